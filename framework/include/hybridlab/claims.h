#pragma once
// The claims grammar: statements about report cells (`expect:` in an experiment file), parsed
// and checked against the experiment's variants, metrics and lengths when it is read; the report
// judges them on confidence intervals (framework/src/report/claims.h).
//
// A claim reads aloud as a sentence (`expect:` in an experiment file):
//
//   claim    := cell relation operand
//   cell     := [variant] [metric] "at" length
//   variant  := a run name without its seed part ("pattern-GGGA_scheme-rope"; with eval variants
//               it names the run's own evaluation, eval: trained), one label value
//               that picks a single variant ("GGGA"), or labels in braces "{pattern: GGGA,
//               scheme: rope}"; may be left out when the experiment has one variant
//   relation := "is better than" | "is worse than"            (in the metric's direction)
//             | "is at least" | ">=" | "≥" | "is at most" | "<=" | "≤"
//             | "is above" | ">" | "is below" | "<"
//             | "is within" number "of"                       (|difference| <= number)
//   operand  := number | cell   (a cell on the right may leave out the variant and/or metric:
//                                they are the left cell's)
//
// e.g. "GGGA accuracy at 64 >= 0.95",
//      "{pattern: AAAA, scheme: rope} bits_per_byte at 512 is worse than at 128",
//      "scheme-alibi bits_per_byte at 1024 is within 0.1 of at 256",
//      "GGGA accuracy at 64 is better than AAAA".
//
// A claim holds when the intervals (Student t, 95%) of its two sides are ordered as claimed
// without overlap, fails when they are ordered the other way without overlap, and is inconclusive
// when they overlap; see evaluate_claim().

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace hybridlab {

/// A syntax or reference error in a claim, at a 0-based byte `column` of the claim text.
class ClaimError : public std::runtime_error {
 public:
  ClaimError(size_t column, const std::string& message)
      : std::runtime_error(message), column(column) {}
  size_t column;
};

/// One side of a claim as written.
struct CellRef {
  std::string variant;  ///< a variant word or "" (see `selector`; else the left cell's / the only)
  std::vector<std::pair<std::string, std::string>> selector;  ///< {key: value, ...} when given
  std::string metric;  ///< "" on the right side: the left cell's
  /// Right side only: one word was given, a metric if it names one, else a variant.
  bool metric_or_variant = false;
  int64_t length = 0;  ///< 0 on the right side: the left cell's
  size_t column = 0, variant_column = 0, metric_column = 0, length_column = 0;  ///< in the text
};

enum class Relation { kBetter, kWorse, kAtLeast, kAtMost, kAbove, kBelow, kWithin };

/// A parsed claim.
struct Claim {
  std::string text;
  CellRef lhs;
  Relation relation = Relation::kAtLeast;
  double tolerance = 0;  ///< kWithin only
  bool rhs_is_number = false;
  double number = 0;  ///< when rhs_is_number
  CellRef rhs;        ///< otherwise
};

/// Parses one claim. Throws ClaimError naming the column and what was expected.
Claim parse_claim(const std::string& text);

/// A variant a claim may name: its name (run name without seed/tuned parts) and labels.
struct ClaimVariant {
  std::string name;
  std::vector<std::pair<std::string, std::string>> labels;
  /// Another name the variant answers to: with eval variants, the row of a run's own
  /// evaluation (eval: trained) is also named by the run's folder name without its seed part
  /// ("layers-GA" for "layers-GA_eval-trained"); empty otherwise.
  std::string run_name{};
};

/// What the claims of an experiment may refer to.
struct ClaimCatalog {
  std::vector<ClaimVariant> variants;
  std::vector<std::string> metrics;
  std::vector<int64_t> lengths;
};

/// Resolves the variants and metrics of `claim` against `catalog`: afterwards every CellRef has
/// `variant` set to a catalog variant name and `metric` set. Throws ClaimError at the offending
/// cell for an unknown or ambiguous variant (listing the variants), an unknown metric or length
/// (listing the valid ones).
void resolve_claim(Claim& claim, const ClaimCatalog& catalog);

}  // namespace hybridlab
