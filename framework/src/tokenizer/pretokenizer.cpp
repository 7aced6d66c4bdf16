#include "tokenizer/pretokenizer.h"

#include <fmt/format.h>

#include <stdexcept>

namespace hybridlab::tokenizer {

const char* const kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

}  // namespace hybridlab::tokenizer

#ifdef HYBRIDLAB_NO_RE2  // a bundle build (framework/CMakeLists.txt): no BPE tokenizers

namespace hybridlab::tokenizer {
struct PreTokenizer::Impl {};
PreTokenizer::PreTokenizer(const std::string& pattern) : pattern_(pattern) {
  throw std::invalid_argument(
      "this build of hybridlab has no RE2, so it reads no BPE tokenizer (use task.tokenizer: "
      "bytes, or build against Debian's libre2-dev)");
}
PreTokenizer::~PreTokenizer() = default;
std::vector<std::string_view> PreTokenizer::split(std::string_view) const { return {}; }
}  // namespace hybridlab::tokenizer

#else

#include <re2/re2.h>

namespace hybridlab::tokenizer {
namespace {

// Unicode White_Space (PropList.txt): U+0009..000D, U+0085 and the separators Zs, Zl, Zp.
constexpr const char* kSpaceItems = R"(\x{09}-\x{0D}\x{85}\p{Z})";
constexpr const char* kLookaheadAlternative = R"(\s+(?!\S))";

std::invalid_argument refuse(const std::string& pattern, size_t at, const std::string& what) {
  return std::invalid_argument(fmt::format(
      "pre-tokenizer pattern: {} at offset {} of '{}' (RE2 runs the pattern; it has no "
      "look-around beyond the emulated `\\s+(?!\\S)` alternative, and no possessive quantifiers)",
      what, at, pattern));
}

// The top-level alternatives of `pattern` (split at `|` outside groups and classes).
std::vector<std::string> alternatives(const std::string& pattern) {
  std::vector<std::string> out(1);
  int depth = 0;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      out.back() += pattern.substr(i, 2);
      ++i;
      continue;
    }
    if (in_class) {
      in_class = c != ']';
    } else if (c == '[') {
      in_class = true;
      // A ']' right after '[' or '[^' is a literal member.
      const size_t lit = i + 1 < pattern.size() && pattern[i + 1] == '^' ? i + 2 : i + 1;
      if (lit < pattern.size() && pattern[lit] == ']') {
        out.back() += pattern.substr(i, lit + 1 - i);
        i = lit;
        continue;
      }
    } else if (c == '(') {
      ++depth;
    } else if (c == ')') {
      --depth;
    } else if (c == '|' && depth == 0) {
      out.emplace_back();
      continue;
    }
    out.back() += c;
  }
  return out;
}

// One alternative for RE2: \s and \S widened to Unicode White_Space; look-around and possessive
// quantifiers refused. `offset` is the alternative's place in the whole pattern, for messages.
std::string translate(const std::string& alt, const std::string& pattern, size_t offset) {
  std::string out;
  bool in_class = false;
  bool after_quantifier = false;  // the last item was *, +, ?, or {n,m}: a '+' now is possessive
  for (size_t i = 0; i < alt.size(); ++i) {
    const char c = alt[i];
    if (c == '\\' && i + 1 < alt.size()) {
      const char e = alt[i + 1];
      ++i;
      after_quantifier = false;
      if (e == 's') {
        out += in_class ? std::string(kSpaceItems) : fmt::format("[{}]", kSpaceItems);
      } else if (e == 'S') {
        if (in_class) throw refuse(pattern, offset + i - 1, "`\\S` inside a character class");
        out += fmt::format("[^{}]", kSpaceItems);
      } else if ((e == 'p' || e == 'P' || e == 'x') && i + 1 < alt.size() && alt[i + 1] == '{') {
        // \p{L}, \x{85}: the braces are the escape's, not a counted repetition.
        const size_t close = alt.find('}', i);
        const size_t end = close == std::string::npos ? alt.size() : close + 1;
        out += alt.substr(i - 1, end - (i - 1));
        i = end - 1;
      } else {
        out += c;
        out += e;
      }
      continue;
    }
    if (in_class) {
      in_class = c != ']';
      out += c;
      continue;
    }
    if (c == '+' && after_quantifier) {
      throw refuse(pattern, offset + i - 1, "possessive quantifier `" + alt.substr(i - 1, 2) + "`");
    }
    if (c == '(' && alt.compare(i, 2, "(?") == 0 && i + 2 < alt.size() &&
        (alt[i + 2] == '=' || alt[i + 2] == '!' || alt[i + 2] == '<')) {
      throw refuse(pattern, offset + i, "look-around `" + alt.substr(i, 3) + "`");
    }
    const bool opens_group = c == '?' && i > 0 && alt[i - 1] == '(';
    const bool lazy = c == '?' && after_quantifier;
    after_quantifier = !opens_group && !lazy && (c == '*' || c == '+' || c == '?' || c == '}');
    in_class = c == '[';
    out += c;
  }
  return out;
}

std::unique_ptr<re2::RE2> compile(const std::string& regex, const std::string& pattern) {
  re2::RE2::Options opts;
  opts.set_log_errors(false);
  auto re = std::make_unique<re2::RE2>(regex, opts);
  if (!re->ok()) {
    throw std::invalid_argument(
        fmt::format("pre-tokenizer pattern '{}': RE2 rejects it: {}", pattern, re->error()));
  }
  return re;
}

// Length in bytes of the UTF-8 character starting at `p` (1 for a stray byte).
size_t char_length(unsigned char c) {
  if (c >= 0xF0) return 4;
  if (c >= 0xE0) return 3;
  if (c >= 0xC0) return 2;
  return 1;
}

}  // namespace

struct PreTokenizer::Impl {
  std::unique_ptr<re2::RE2> all;   // (alt1)|(alt2)|... in the pattern's order
  std::unique_ptr<re2::RE2> rest;  // the alternatives after the look-ahead one (may be null)
  int lookahead_group = -1;        // capture group of the look-ahead alternative (-1: none)
  int groups = 0;
};

PreTokenizer::PreTokenizer(const std::string& pattern) : pattern_(pattern), impl_(new Impl) {
  std::string all, rest;
  size_t offset = 0;
  int group = 1;
  for (const std::string& alt : alternatives(pattern)) {
    const bool lookahead = alt == kLookaheadAlternative && impl_->lookahead_group < 0;
    const std::string re = lookahead ? R"(\s+)" : alt;
    const std::string translated = translate(re, pattern, offset);
    const int inner = compile(translated, pattern)->NumberOfCapturingGroups();
    if (!all.empty()) all += '|';
    all += "(" + translated + ")";
    if (lookahead) {
      impl_->lookahead_group = group;
    } else if (impl_->lookahead_group >= 0) {
      rest += (rest.empty() ? "" : "|") + translated;
    }
    group += 1 + inner;
    offset += alt.size() + 1;
  }
  impl_->all = compile(all, pattern);
  impl_->groups = impl_->all->NumberOfCapturingGroups();
  if (!rest.empty()) impl_->rest = compile(rest, pattern);
}

PreTokenizer::~PreTokenizer() = default;

std::vector<std::string_view> PreTokenizer::split(std::string_view text) const {
  std::vector<std::string_view> pieces;
  const re2::StringPiece whole(text.data(), text.size());
  std::vector<re2::StringPiece> m(static_cast<size_t>(impl_->groups) + 1);
  const size_t n = text.size();
  size_t pos = 0, gap = 0;  // next search start; start of text not yet in a piece
  while (pos < n) {
    if (!impl_->all->Match(whole, pos, n, re2::RE2::UNANCHORED, m.data(),
                           static_cast<int>(m.size()))) {
      break;
    }
    const size_t s = static_cast<size_t>(m[0].data() - text.data());
    size_t e = s + m[0].size();
    if (s >= n) break;  // an empty match at the end
    const int lg = impl_->lookahead_group;
    if (lg >= 0 && m[static_cast<size_t>(lg)].data() != nullptr && e < n) {
      // Whitespace followed by a non-space: emulate `\s+(?!\S)` (see the header).
      size_t last = s;
      size_t chars = 0;
      for (size_t i = s; i < e; i += char_length(static_cast<unsigned char>(text[i]))) {
        last = i;
        ++chars;
      }
      if (chars >= 2) {
        e = last;
      } else {
        re2::StringPiece r;
        if (impl_->rest && impl_->rest->Match(whole, s, n, re2::RE2::ANCHOR_START, &r, 1) &&
            !r.empty()) {
          e = s + r.size();
        } else {  // nothing matches here: the search goes on from the next character
          pos = e;
          continue;
        }
      }
    }
    if (e == s) {  // an empty match: nothing to cut here, look from the next character
      pos = s + char_length(static_cast<unsigned char>(text[s]));
      continue;
    }
    if (s > gap) pieces.push_back(text.substr(gap, s - gap));
    pieces.push_back(text.substr(s, e - s));
    pos = gap = e;
  }
  if (gap < n) pieces.push_back(text.substr(gap));
  return pieces;
}

}  // namespace hybridlab::tokenizer

#endif  // HYBRIDLAB_NO_RE2
