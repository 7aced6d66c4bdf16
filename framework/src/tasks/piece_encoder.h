#pragma once
// Texts assembled from pieces, on a task's tokens: bytes (one token per byte, vocabulary 256) or a
// byte-level BPE (task.tokenizer). Each piece is encoded on its own and the filler is one sentence
// encoded once and repeated, so a haystack can be cut at any token and every other piece keeps its
// token count wherever it lands: the lengths RULER's generators count in tokens (NVIDIA/RULER@
// c3f5e3b scripts/data/synthetic/niah.py). On bytes a text is its pieces' bytes, the same as the
// byte-level generators wrote before pieces existed. On BPE tokens a row is its pieces' tokens,
// which can differ from the whole text's encoding where two pieces meet (a cut filler before a
// newline); training and evaluation read the same rows.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hybridlab/task.h"
#include "tokenizer/bpe.h"

namespace hybridlab::tasks {

class PieceEncoder {
 public:
  /// `tok`: the tokenizer, or nullptr for bytes. `filler`: the sentence a haystack repeats.
  PieceEncoder(std::shared_ptr<const tokenizer::BpeTokenizer> tok, const std::string& filler);
  /// The token ids of `piece` (its bytes on bytes).
  std::vector<int64_t> encode(const std::string& piece) const;
  /// The first `n` tokens of the filler sentence's tokens repeated (n >= 0).
  std::vector<int64_t> filler(int64_t n) const;
  /// At most how many tokens `text` of `bytes` bytes can take: one per byte (a BPE token covers at
  /// least one byte), the bound for pieces that vary between examples (a key, a number).
  static int64_t most_tokens(int64_t bytes) { return bytes; }
  int64_t vocab_size() const { return tok_ ? tok_->vocab_size() : 256; }
  bool bytes() const { return !tok_; }
  const std::shared_ptr<const tokenizer::BpeTokenizer>& tokenizer() const { return tok_; }

 private:
  std::shared_ptr<const tokenizer::BpeTokenizer> tok_;
  std::vector<int64_t> filler_;  ///< the filler sentence's tokens
};

/// A row of tokens built from pieces, with where its scored answer starts.
struct PieceRow {
  std::vector<int64_t> tokens;
  int64_t answer_begin = 0;  ///< index of the first scored token
  void add(const std::vector<int64_t>& piece) {
    tokens.insert(tokens.end(), piece.begin(), piece.end());
  }
};

/// Examples from rows of the same length L: row i's tokens [answer_begin, L) are the targets
/// (predicted from the position before each), every other target ignored (kIgnoreIndex).
/// Throws std::logic_error when the rows differ in length or an answer_begin is outside [1, L].
Batch token_examples(const std::vector<PieceRow>& rows);

/// The index in `answer` (an answer piece's tokens) of the first token holding a decimal digit,
/// from which the answer is scored: " 12345" on bytes scores the five digits, not the space, as
/// the byte-level tasks always did; on GPT-2 tokens its first token is " 123". answer.size() when
/// none does.
int64_t first_digit_token(const PieceEncoder& enc, const std::vector<int64_t>& answer);

}  // namespace hybridlab::tasks
