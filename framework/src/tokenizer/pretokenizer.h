#pragma once
// Pre-tokenisation: the split of text into the pieces BPE merges inside, by the tokenizer's
// regular expression (GPT-2: openai/gpt-2@master src/encoder.py; tiktoken and Hugging Face
// tokenizers use the same patterns through fancy-regex / Oniguruma).
//
// The patterns run on RE2, which has no look-around. Their one look-around, the alternative
// `\s+(?!\S)` (whitespace not followed by a non-space), is emulated exactly: RE2 matches it as
// `\s+`, which by greediness ends at a non-space or at the end of the text; a run of n >= 2
// followed by a non-space gives back its last character (what backtracking into the look-ahead
// does), and a run of one followed by a non-space fails, so the alternatives after it are tried at
// the same place. Any other look-around or a possessive quantifier is refused. `\s` and `\S` are
// widened to Unicode's White_Space (RE2's own `\s` is ASCII only): [\t-\r\x85\p{Z}].

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace hybridlab::tokenizer {

/// The GPT-2 pattern (also the Hugging Face ByteLevel pre-tokenizer's with use_regex: true).
extern const char* const kGpt2Pattern;

/// Splits UTF-8 text by one pattern. Thread-safe after construction (RE2 is).
class PreTokenizer {
 public:
  /// Compiles `pattern`. Throws std::invalid_argument naming the construct for a look-around other
  /// than `\s+(?!\S)` as a whole alternative, a possessive quantifier, or a pattern RE2 rejects.
  explicit PreTokenizer(const std::string& pattern);
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  /// The pieces of `text` in order; together they are exactly `text` (text no alternative
  /// matches becomes a piece of its own, as Hugging Face's Split with behavior "Isolated" keeps
  /// it). Views into `text`.
  std::vector<std::string_view> split(std::string_view text) const;

  const std::string& pattern() const { return pattern_; }

 private:
  struct Impl;
  std::string pattern_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hybridlab::tokenizer
