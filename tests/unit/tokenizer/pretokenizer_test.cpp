// The pre-tokenizer against splits derived by hand from the pattern's backtracking semantics
// (the look-ahead alternative `\s+(?!\S)` and Unicode White_Space are where RE2 differs).

#include <catch2/catch.hpp>

#include <stdexcept>
#include <string>
#include <vector>

#include "tokenizer/pretokenizer.h"

using hybridlab::tokenizer::kGpt2Pattern;
using hybridlab::tokenizer::PreTokenizer;

namespace {
std::vector<std::string> split(const PreTokenizer& p, const std::string& text) {
  std::vector<std::string> out;
  for (auto piece : p.split(text)) out.emplace_back(piece);
  return out;
}
using Pieces = std::vector<std::string>;
}  // namespace

TEST_CASE("GPT-2 pattern: words, contractions, numbers and punctuation", "[tokenizer]") {
  const PreTokenizer p(kGpt2Pattern);
  CHECK(split(p, "Hello world") == Pieces{"Hello", " world"});
  CHECK(split(p, "it's 2024!") == Pieces{"it", "'s", " 2024", "!"});
  CHECK(split(p, "I'll go.") == Pieces{"I", "'ll", " go", "."});
  CHECK(split(p, "\"(a)\"") == Pieces{"\"(", "a", ")\""});
  CHECK(split(p, "") == Pieces{});
}

TEST_CASE("GPT-2 pattern: a whitespace run before a word gives its last space to the word",
          "[tokenizer]") {
  const PreTokenizer p(kGpt2Pattern);
  // "  world": \s+(?!\S) backtracks to one space; the other starts " world".
  CHECK(split(p, "Hello  world") == Pieces{"Hello", " ", " world"});
  CHECK(split(p, "a    b") == Pieces{"a", "   ", " b"});
  // A newline cannot join a word (` ?` is a space only): each newline before a letter stands
  // alone, the first by the look-ahead, the last by the plain \s+.
  CHECK(split(p, "a\n\nb") == Pieces{"a", "\n", "\n", "b"});
  CHECK(split(p, "a\nb") == Pieces{"a", "\n", "b"});
  // At the end of the text the whole run is one piece.
  CHECK(split(p, "end   ") == Pieces{"end", "   "});
  CHECK(split(p, " \n ") == Pieces{" \n "});
}

TEST_CASE("GPT-2 pattern: whitespace is Unicode White_Space, not RE2's ASCII class",
          "[tokenizer]") {
  const PreTokenizer p(kGpt2Pattern);
  // U+3000 (3 bytes) twice before a letter: the run gives back one whole character.
  const std::string ideo = "\xe3\x80\x80";
  CHECK(split(p, "a" + ideo + ideo + "b") == Pieces{"a", ideo, ideo, "b"});
  // Vertical tab and NEL are White_Space (RE2's \s has neither).
  CHECK(split(p, "a\v\vb") == Pieces{"a", "\v", "\v", "b"});
  CHECK(split(p,
              "a\xc2\x85"
              "b") == Pieces{"a", "\xc2\x85", "b"});
  // A letter outside ASCII is \p{L}.
  CHECK(split(p, " caf\xc3\xa9!") == Pieces{" caf\xc3\xa9", "!"});
}

TEST_CASE("a look-ahead that fails on one space falls through to the later alternatives",
          "[tokenizer]") {
  // Qwen2's order: `\s*[\r\n]+` before the look-ahead, then `\s+`.
  const PreTokenizer p(R"([^\r\n\p{L}\p{N}]?\p{L}+|\s*[\r\n]+|\s+(?!\S)|\s+)");
  CHECK(split(p, "a \n\n b") == Pieces{"a", " \n\n", " b"});
  // With nothing after the look-ahead alternative, unmatched text is kept as a piece of its own.
  const PreTokenizer q(R"(x|\s+(?!\S))");
  CHECK(split(q, " a") == Pieces{" a"});
  CHECK(split(q, "  x") == Pieces{" ", " ", "x"});
}

TEST_CASE("pre-tokenizer patterns RE2 cannot run are refused by name", "[tokenizer]") {
  const auto refused = [](const std::string& pattern, const std::string& what) {
    try {
      PreTokenizer p(pattern);
      FAIL("accepted: " << pattern);
    } catch (const std::invalid_argument& e) {
      CHECK_THAT(e.what(), Catch::Contains(what));
    }
  };
  refused(R"(a(?=b)|\s+)", "look-around `(?=`");
  refused(R"((?<!a)b)", "look-around `(?<`");
  refused(R"(\s+(?!\S)x|\s+)", "look-around `(?!`");  // not the whole alternative
  refused(R"(\p{L}++|\s)", "possessive quantifier `++`");
  refused(R"(a?+)", "possessive quantifier `?+`");
  refused(R"([\S])", "`\\S` inside a character class");
  refused(R"(a(b)", "RE2 rejects it");
  CHECK_NOTHROW(PreTokenizer(R"((?i:'s|'t)|\p{N}{1,3})"));
}
