#pragma once
// Loading a text corpus into train/validation documents (see text.cpp for the layouts).

#include <torch/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace hybridlab::tasks {

struct DocumentSet {
  torch::Tensor bytes;             ///< [N] uint8, documents concatenated
  torch::Tensor offsets;           ///< [D] int64, start of each document in bytes
  std::vector<int64_t> offset_of;  ///< the same, as a vector
  std::vector<int64_t> lengths;    ///< bytes per document
  std::vector<std::string> names;  ///< file (and #index for one-file corpora)
  int64_t longest = 0;
};

struct TextCorpus {
  std::string root;  ///< the resolved path
  DocumentSet train, validation;
};

/// Whether `data` is valid UTF-8; sets `bad_offset` to the first invalid byte otherwise.
bool is_utf8(const std::string& data, size_t& bad_offset);

/// Stable 64-bit FNV-1a hash (for the document split).
uint64_t fnv1a(const std::string& s);

/// Loads `path` (resolved against the current folder, then `config_dir` and its parents). Throws
/// DataError for a missing corpus (naming scripts/fetch_brown.sh for the default data/brown), an
/// empty corpus or split, a non-UTF-8 document (file and byte offset).
TextCorpus load_text_corpus(const std::string& path, const std::string& config_dir,
                            double eval_fraction, const std::string& separator);

}  // namespace hybridlab::tasks
