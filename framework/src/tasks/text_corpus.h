#pragma once
// Loading a text corpus into train/validation documents (see text.cpp for the layouts).

#include <torch/types.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace hybridlab::tokenizer {
class BpeTokenizer;
}

namespace hybridlab::tasks {

/// Documents laid end to end as tokens: bytes (uint8) as loaded, or BPE ids (int32) after
/// tokenize_documents. Offsets and lengths count tokens.
struct DocumentSet {
  torch::Tensor tokens;            ///< [N] uint8 or int32, documents concatenated
  torch::Tensor offsets;           ///< [D] int64, start of each document in tokens
  std::vector<int64_t> offset_of;  ///< the same, as a vector
  std::vector<int64_t> lengths;    ///< tokens per document
  std::vector<std::string> names;  ///< file (and #index for one-file corpora)
  int64_t longest = 0;
  int64_t text_bytes = 0;  ///< bytes of text in all documents (= N for bytes)
};

struct TextCorpus {
  std::string root;  ///< the resolved path
  DocumentSet train, validation;
};

/// Whether `data` is valid UTF-8; sets `bad_offset` to the first invalid byte otherwise.
bool is_utf8(const std::string& data, size_t& bad_offset);

/// Stable 64-bit FNV-1a hash (for the document split).
uint64_t fnv1a(const std::string& s);

/// Where a data path given in an experiment is: `path` itself when absolute or present from the
/// current folder, else the first `config_dir`, parent, grandparent, ... that holds it; `path`
/// unchanged when none does.
std::filesystem::path resolve_data_path(const std::string& path, const std::string& config_dir);

/// `set` (bytes) as the ids of `tok`, each document encoded alone.
DocumentSet tokenize_documents(const DocumentSet& set, const tokenizer::BpeTokenizer& tok);

/// Loads `path` (resolved against the current folder, then `config_dir` and its parents). Throws
/// DataError for a missing corpus (naming scripts/fetch_brown.sh for the default data/brown), an
/// empty corpus or split, a non-UTF-8 document (file and byte offset).
TextCorpus load_text_corpus(const std::string& path, const std::string& config_dir,
                            double eval_fraction, const std::string& separator);

}  // namespace hybridlab::tasks
