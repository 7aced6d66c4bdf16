// The claims grammar: a hand-written tokenizer and recursive-descent parser, and resolution
// against the variants, metrics and lengths of an experiment.

#include "hybridlab/claims.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <cstdlib>

#include "hybridlab/config.h"

namespace hybridlab {
namespace {

enum class Tok { kWord, kSelector, kOp, kEnd };

struct Token {
  Tok kind = Tok::kEnd;
  std::string text;  // word, operator (">=" for "≥", "<=" for "≤"), or the selector's inside
  std::vector<std::pair<std::string, std::string>> selector;
  size_t column = 0;
};

bool word_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '+' ||
         c == '-' || c == '/';
}

std::string trim(const std::string& s) {
  size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
  return s.substr(a, b - a);
}

std::vector<Token> tokenize(const std::string& s) {
  std::vector<Token> out;
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
      continue;
    }
    Token t;
    t.column = i;
    if (c == '{') {
      const size_t close = s.find('}', i);
      if (close == std::string::npos) throw ClaimError(i, "'{' without a closing '}'");
      t.kind = Tok::kSelector;
      t.text = s.substr(i, close - i + 1);
      size_t at = i + 1;
      while (at < close) {
        size_t comma = s.find(',', at);
        if (comma == std::string::npos || comma > close) comma = close;
        const std::string entry = s.substr(at, comma - at);
        const size_t colon = entry.find(':');
        const std::string key = colon == std::string::npos ? "" : trim(entry.substr(0, colon));
        const std::string value = colon == std::string::npos ? "" : trim(entry.substr(colon + 1));
        if (key.empty() || value.empty()) {
          throw ClaimError(
              at, fmt::format("expected 'label: value' inside braces, got '{}'", trim(entry)));
        }
        t.selector.emplace_back(key, value);
        at = comma + 1;
      }
      if (t.selector.empty()) throw ClaimError(i, "empty braces: expected {label: value, ...}");
      i = close + 1;
    } else if (c == '>' || c == '<') {
      t.kind = Tok::kOp;
      const bool eq = i + 1 < s.size() && s[i + 1] == '=';
      t.text = std::string(1, c) + (eq ? "=" : "");
      i += eq ? 2 : 1;
    } else if (s.compare(i, 3, "\xe2\x89\xa5") == 0 || s.compare(i, 3, "\xe2\x89\xa4") == 0) {
      t.kind = Tok::kOp;  // ≥ (U+2265), ≤ (U+2264)
      t.text = s[i + 2] == '\xa5' ? ">=" : "<=";
      i += 3;
    } else if (word_char(c)) {
      t.kind = Tok::kWord;
      while (i < s.size() && word_char(s[i])) t.text += s[i++];
    } else {
      throw ClaimError(i, fmt::format("unexpected character '{}'", c));
    }
    out.push_back(t);
  }
  Token end;
  end.column = s.size();
  out.push_back(end);
  return out;
}

// A number as the configuration reads one (parse_number_text): 1e-400 is refused, not read as 0.
bool parse_number(const std::string& w, double& out) { return parse_number_text(w, out); }

// Starts like a number: a digit, or a sign or point before one.
bool looks_numeric(const std::string& w) {
  size_t i = 0;
  while (i < w.size() && i < 2 && (w[i] == '-' || w[i] == '+' || w[i] == '.')) ++i;
  return i < w.size() && std::isdigit(static_cast<unsigned char>(w[i]));
}

bool parse_length(const std::string& w, int64_t& out) {
  if (w.empty() || w.size() > 12) return false;
  for (char c : w) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  out = std::stoll(w);
  return out > 0;
}

std::string describe(const Token& t) {
  return t.kind == Tok::kEnd ? "the end of the claim" : "'" + t.text + "'";
}

class Parser {
 public:
  explicit Parser(const std::string& text) : toks_(tokenize(text)) {}

  Claim parse(const std::string& text) {
    Claim c;
    c.text = text;
    if (peek().kind == Tok::kEnd) throw ClaimError(0, "empty claim");
    c.lhs = cell(true);
    relation(c);
    const Token& t = peek();
    double num = 0;
    const bool last = toks_[pos_ + 1].kind == Tok::kEnd;
    if (t.kind == Tok::kWord && last && looks_numeric(t.text) && !parse_number(t.text, num)) {
      throw ClaimError(t.column, fmt::format("'{}' is not a number as the configuration writes "
                                             "one: decimal, within a double's range (1e-400 would "
                                             "read as 0, 1e400 as infinity)",
                                             t.text));
    }
    if (t.kind == Tok::kWord && parse_number(t.text, num) && last) {
      c.rhs_is_number = true;
      c.number = num;
      ++pos_;
    } else {
      c.rhs = cell(false);
    }
    if (peek().kind != Tok::kEnd) {
      throw ClaimError(peek().column,
                       fmt::format("unexpected {} after the claim's right side", describe(peek())));
    }
    return c;
  }

 private:
  const Token& peek() const { return toks_[pos_]; }
  bool word_is(const char* w) const { return peek().kind == Tok::kWord && peek().text == w; }
  void expect_word(const char* w, const char* context) {
    if (!word_is(w)) {
      throw ClaimError(peek().column,
                       fmt::format("expected '{}' {}, got {}", w, context, describe(peek())));
    }
    ++pos_;
  }

  // [selector] [word [word]] "at" length; on the right every part is optional.
  CellRef cell(bool lhs) {
    CellRef r;
    r.column = peek().column;
    if (peek().kind == Tok::kSelector) {
      r.selector = peek().selector;
      r.variant_column = peek().column;
      ++pos_;
    }
    std::vector<Token> words;
    while (peek().kind == Tok::kWord && peek().text != "at" && peek().text != "is") {
      words.push_back(peek());
      ++pos_;
    }
    const size_t max_words = r.selector.empty() ? 2 : 1;
    if (words.size() > max_words) {
      throw ClaimError(words[max_words].column,
                       fmt::format("unexpected '{}': a cell is [variant] metric at length",
                                   words[max_words].text));
    }
    if (words.size() == 2) {
      r.variant = words[0].text;
      r.variant_column = words[0].column;
      r.metric = words[1].text;
      r.metric_column = words[1].column;
    } else if (words.size() == 1) {
      r.metric = words[0].text;
      r.metric_column = words[0].column;
      r.metric_or_variant = !lhs && r.selector.empty();
    } else if (lhs) {
      throw ClaimError(
          peek().column,
          fmt::format("expected a metric (e.g. accuracy) before 'at', got {}", describe(peek())));
    }
    if (word_is("at")) {
      ++pos_;
      r.length_column = peek().column;
      if (peek().kind != Tok::kWord || !parse_length(peek().text, r.length)) {
        throw ClaimError(
            peek().column,
            fmt::format("expected a length in tokens after 'at', got {}", describe(peek())));
      }
      ++pos_;
    } else if (lhs) {
      throw ClaimError(peek().column, fmt::format("expected 'at LENGTH' after the metric, got {}",
                                                  describe(peek())));
    } else if (words.empty() && r.selector.empty()) {
      throw ClaimError(peek().column,
                       fmt::format("expected a number or a cell ([variant] [metric] at length), "
                                   "got {}",
                                   describe(peek())));
    }
    return r;
  }

  void relation(Claim& c) {
    const Token& t = peek();
    if (t.kind == Tok::kOp) {
      c.relation = t.text == ">="   ? Relation::kAtLeast
                   : t.text == "<=" ? Relation::kAtMost
                   : t.text == ">"  ? Relation::kAbove
                                    : Relation::kBelow;
      ++pos_;
      return;
    }
    const std::string expected =
        "expected a relation ('is better than', 'is worse than', 'is at least', 'is at most', "
        "'is above', 'is below', 'is within X of', >=, <=, >, <)";
    if (!word_is("is"))
      throw ClaimError(t.column, fmt::format("{}, got {}", expected, describe(t)));
    ++pos_;
    if (word_is("better") || word_is("worse")) {
      c.relation = peek().text == "better" ? Relation::kBetter : Relation::kWorse;
      ++pos_;
      expect_word("than", "after 'better'/'worse'");
    } else if (word_is("at")) {
      ++pos_;
      if (!word_is("least") && !word_is("most")) {
        throw ClaimError(
            peek().column,
            fmt::format("expected 'least' or 'most' after 'is at', got {}", describe(peek())));
      }
      c.relation = peek().text == "least" ? Relation::kAtLeast : Relation::kAtMost;
      ++pos_;
    } else if (word_is("above") || word_is("below")) {
      c.relation = peek().text == "above" ? Relation::kAbove : Relation::kBelow;
      ++pos_;
    } else if (word_is("within")) {
      ++pos_;
      if (peek().kind != Tok::kWord || !parse_number(peek().text, c.tolerance) || c.tolerance < 0) {
        throw ClaimError(
            peek().column,
            fmt::format("expected a tolerance >= 0 after 'within', got {}", describe(peek())));
      }
      ++pos_;
      c.relation = Relation::kWithin;
      expect_word("of", "after 'within X'");
    } else {
      throw ClaimError(peek().column, fmt::format("{}, got 'is' {}", expected, describe(peek())));
    }
  }

  std::vector<Token> toks_;
  size_t pos_ = 0;
};

std::string variant_list(const ClaimCatalog& cat) {
  std::string s;
  for (const auto& v : cat.variants) s += (s.empty() ? "" : ", ") + v.name;
  return s;
}

std::string selector_text(const std::vector<std::pair<std::string, std::string>>& sel) {
  std::string s;
  for (const auto& [k, v] : sel) s += (s.empty() ? "" : ", ") + k + ": " + v;
  return "{" + s + "}";
}

// The catalog variant a cell names (see claims.h), or a ClaimError at the cell.
std::string resolve_variant(const CellRef& r, const ClaimCatalog& cat) {
  std::vector<std::string> hits;
  if (!r.selector.empty()) {
    for (const auto& [k, v] : r.selector) {
      bool known = false;
      for (const auto& var : cat.variants) {
        for (const auto& [lk, lv] : var.labels) known |= lk == k;
      }
      if (!known) {
        std::string keys;
        if (!cat.variants.empty()) {
          for (const auto& [lk, lv] : cat.variants[0].labels)
            keys += (keys.empty() ? "" : ", ") + lk;
        }
        throw ClaimError(r.variant_column,
                         fmt::format("unknown label '{}' (the variants' labels: {})", k,
                                     keys.empty() ? "none: the experiment has no sweep" : keys));
      }
    }
    for (const auto& var : cat.variants) {
      bool all = true;
      for (const auto& [k, v] : r.selector) {
        bool hit = false;
        for (const auto& [lk, lv] : var.labels) hit |= lk == k && lv == v;
        all &= hit;
      }
      if (all) hits.push_back(var.name);
    }
    if (hits.empty()) {
      throw ClaimError(r.variant_column, fmt::format("no variant has {}; the variants are: {}",
                                                     selector_text(r.selector), variant_list(cat)));
    }
  } else {
    for (const auto& var : cat.variants) {
      if (var.name == r.variant) return var.name;
    }
    for (const auto& var : cat.variants) {
      if (!var.run_name.empty() && var.run_name == r.variant) return var.name;
    }
    for (const auto& var : cat.variants) {
      for (const auto& [lk, lv] : var.labels) {
        if (lv == r.variant) {
          hits.push_back(var.name);
          break;
        }
      }
    }
    if (hits.empty()) {
      throw ClaimError(r.variant_column, fmt::format("unknown variant '{}'; the variants are: {}",
                                                     r.variant, variant_list(cat)));
    }
  }
  if (hits.size() > 1) {
    std::string names;
    for (const auto& h : hits) names += (names.empty() ? "" : ", ") + h;
    throw ClaimError(r.variant_column,
                     fmt::format("'{}' names {} variants ({}); give more labels, e.g. "
                                 "{{key: value, key: value}}, or a full variant name",
                                 r.selector.empty() ? r.variant : selector_text(r.selector),
                                 hits.size(), names));
  }
  return hits[0];
}

bool known_metric(const std::string& m, const ClaimCatalog& cat) {
  for (const auto& k : cat.metrics) {
    if (k == m) return true;
  }
  return false;
}

void check_metric(const std::string& m, size_t column, const ClaimCatalog& cat) {
  if (known_metric(m, cat)) return;
  std::string all;
  for (const auto& k : cat.metrics) all += (all.empty() ? "" : ", ") + k;
  throw ClaimError(column, fmt::format("unknown metric '{}'; the task's metrics are: {}", m, all));
}

void check_length(int64_t L, size_t column, const ClaimCatalog& cat) {
  for (int64_t k : cat.lengths) {
    if (k == L) return;
  }
  std::string all;
  for (int64_t k : cat.lengths) all += (all.empty() ? "" : ", ") + std::to_string(k);
  throw ClaimError(column, fmt::format("length {} is not evaluated; eval.lengths are: {}", L, all));
}

}  // namespace

Claim parse_claim(const std::string& text) { return Parser(text).parse(text); }

void resolve_claim(Claim& claim, const ClaimCatalog& catalog) {
  CellRef& l = claim.lhs;
  if (l.variant.empty() && l.selector.empty()) {
    if (catalog.variants.size() != 1) {
      throw ClaimError(l.column, fmt::format("name the variant: this experiment has {} ({})",
                                             catalog.variants.size(), variant_list(catalog)));
    }
    l.variant = catalog.variants[0].name;
  } else {
    l.variant = resolve_variant(l, catalog);
  }
  check_metric(l.metric, l.metric_column, catalog);
  check_length(l.length, l.length_column, catalog);
  if (claim.rhs_is_number) return;
  CellRef& r = claim.rhs;
  if (r.metric_or_variant && !known_metric(r.metric, catalog)) {
    r.variant = r.metric;
    r.variant_column = r.metric_column;
    r.metric.clear();
  }
  if (r.variant.empty() && r.selector.empty()) {
    r.variant = l.variant;
  } else {
    r.variant = resolve_variant(r, catalog);
  }
  if (r.metric.empty()) {
    r.metric = l.metric;
  } else {
    check_metric(r.metric, r.metric_column, catalog);
  }
  if (r.length == 0) {
    r.length = l.length;
  } else {
    check_length(r.length, r.length_column, catalog);
  }
  if (r.variant == l.variant && r.metric == l.metric && r.length == l.length) {
    throw ClaimError(r.column, "both sides name the same cell");
  }
}

}  // namespace hybridlab
