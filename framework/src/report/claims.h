#pragma once
// Claims: statements about report cells that a report checks against the confidence intervals.
//
// A claim reads aloud as a sentence (`expect:` in an experiment file):
//
//   claim    := cell relation operand
//   cell     := [variant] [metric] "at" length
//   variant  := a run name without its seed part ("pattern-GGGA_scheme-rope"), one label value
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
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "report/stats.h"

namespace hybridlab::report {

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

/// kSplit: a side's variant has seeds on both sides of the learning plateau (SeedSplit,
/// health.h), so its mean describes no seed and the claim is not judged on it.
enum class ClaimStatus { kHolds, kFails, kInconclusive, kSplit };
std::string claim_status_name(ClaimStatus s);  ///< "holds", "fails", "inconclusive", "seeds split"

/// A resolved claim with the numbers it was judged on.
struct ClaimOutcome {
  ClaimStatus status = ClaimStatus::kInconclusive;
  Interval lhs, rhs;  ///< rhs is a point (n = 1, mean = number) for a number
  /// Paired claims: the interval of the per-seed differences lhs − rhs (empty otherwise).
  Interval difference;
  std::string note;  ///< why inconclusive ("intervals overlap", "no finished run of ...")
};

/// Looks up the interval of a resolved cell (variant, metric, length); empty when not measured.
using CellLookup =
    std::function<Interval(const std::string& variant, const std::string& metric, int64_t length)>;
/// The seed-split note of a variant (VariantCells::split_note()), "" when its seeds do not split.
using SplitLookup = std::function<std::string(const std::string& variant)>;
/// The interval of the per-seed differences a − b between two resolved cells, when both have
/// runs of the same seeds (two or more): the same variant at two lengths, or two variants of one
/// sweep, whose runs of one seed share the data order. Empty when the seeds do not match.
using PairedLookup = std::function<Interval(const CellRef& a, const CellRef& b)>;

/// Judges a resolved claim. With a = the left interval and b = the right one (a number is a
/// point): "a > b" holds when a.lo > b.hi, fails when a.hi <= b.lo; "a >= b" holds when
/// a.lo >= b.hi, fails when a.hi < b.lo; "within t" holds when the whole difference interval
/// [a.lo − b.hi, a.hi − b.lo] lies in [−t, t], fails when it lies wholly outside; every other
/// case is inconclusive. "better"/"worse" are ">"/"<" for metrics where higher is better (per
/// `higher_is_better(metric)`), the reverse otherwise. A cell without values is inconclusive.
/// When `split` names a split for either side's variant, the outcome is kSplit whatever the
/// intervals say; its note gives the split and the intervals' own verdict.
/// Paired judging: when the right side is a cell and `paired` gives the interval D of the
/// per-seed differences a − b (Student t over the seeds, as a paired t-test; e.g. Wasserman, "All
/// of Statistics", §10.5), the claim is judged on D alone: "a > b" holds when D.lo > 0, fails when
/// D.hi <= 0; "a >= b" holds when D.lo >= 0, fails when D.hi < 0; "within t" holds when D lies in
/// [−t, t], fails when it lies wholly outside. Runs of one seed share their data order and
/// initialisation stream, so the differences vary far less than either side does, and two
/// independent intervals would understate what the seeds show.
ClaimOutcome evaluate_claim(const Claim& claim, const CellLookup& lookup,
                            const std::function<bool(const std::string&)>& higher_is_better,
                            const SplitLookup& split = nullptr,
                            const PairedLookup& paired = nullptr);

}  // namespace hybridlab::report
