#pragma once
// Byte-level byte-pair encoding (Sennrich et al. 2016, "Neural Machine Translation of Rare Words
// with Subword Units", §3.1; byte-level as in GPT-2, Radford et al. 2019 §2.2): text is cut into
// pieces by a pre-tokenizer pattern, each piece starts as its bytes, and the adjacent pair of
// lowest priority is merged, leftmost first, until no pair can merge. Two vocabulary sources:
//  - a merge list (Hugging Face tokenizer.json `model.merges`): priority = the merge's index, the
//    result = the vocabulary's id of the two parts joined;
//  - ranks (tiktoken: openai/tiktoken@main src/lib.rs `byte_pair_merge`): two parts may merge when
//    their concatenation is a token, with its rank as priority and id; a piece that is itself a
//    token is taken whole first (tiktoken's `encode_ordinary` does the same).
// Special tokens (<|endoftext|>) have ids but are never produced from text: encode() treats their
// spelling as ordinary text, like tiktoken's encode_ordinary; callers insert them by id.

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tokenizer/pretokenizer.h"

namespace hybridlab::tokenizer {

/// What a tokenizer file says: every field in bytes, before any index is built.
struct BpeVocabulary {
  std::string source;               ///< the file, for messages
  std::vector<std::string> tokens;  ///< id -> the token's bytes ("" for an id left unused)
  std::vector<std::pair<std::string, std::string>> merges;  ///< merge list in priority order
  bool merges_by_rank = false;     ///< true: ranks (tiktoken); false: the merge list
  bool whole_piece_first = false;  ///< a piece that is a token is emitted as one (ignore_merges)
  std::map<std::string, int32_t> special;  ///< special tokens' text -> id
  std::string pattern = kGpt2Pattern;      ///< the pre-tokenizer pattern
};

/// A byte-level BPE tokenizer. encode() and decode() are thread-safe.
class BpeTokenizer {
 public:
  /// Builds the indexes. Throws std::invalid_argument naming `vocab.source` when a byte has no
  /// token, a token is listed twice, a merge's parts or result are not tokens, or the pattern is
  /// refused (PreTokenizer).
  explicit BpeTokenizer(const BpeVocabulary& vocab);

  /// Token ids of UTF-8 `text` (ids in [0, vocab_size())). decode(encode(t)) == t for every t.
  std::vector<int32_t> encode(std::string_view text) const;
  /// The bytes of `ids` joined (a special token gives its text). Throws std::out_of_range for an
  /// id outside [0, vocab_size()) or one no token uses.
  std::string decode(const std::vector<int32_t>& ids) const;
  /// One past the largest id (GPT-2: 50257, the 50256 merges' tokens, 256 bytes and
  /// <|endoftext|>).
  int64_t vocab_size() const { return static_cast<int64_t>(bytes_.size()); }
  /// Bytes each id stands for (special tokens: their text's length; unused ids: 0). [vocab_size()]
  const std::vector<int32_t>& token_lengths() const { return lengths_; }
  /// The id of a special token, or -1.
  int32_t special_id(const std::string& text) const;
  /// The file it was read from.
  const std::string& source() const { return source_; }

 private:
  struct Merge {
    int32_t priority;
    int32_t result;
  };
  void encode_piece(std::string_view piece, std::vector<int32_t>& out) const;
  void merge(std::vector<int32_t>& parts) const;

  std::string source_;
  std::vector<std::string> bytes_;  // id -> bytes
  std::vector<int32_t> lengths_;
  std::unordered_map<std::string, int32_t> id_of_;
  std::unordered_map<uint64_t, Merge> merges_;  // (left id << 32 | right id) -> merge
  int32_t byte_id_[256] = {};
  bool whole_piece_first_ = false;
  std::map<std::string, int32_t> special_;
  PreTokenizer pre_;
  // Pieces repeat (words): their ids are kept. Bounded; cleared when full.
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

}  // namespace hybridlab::tokenizer
