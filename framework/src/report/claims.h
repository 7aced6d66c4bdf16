#pragma once
// Judging claims (hybridlab/claims.h: the grammar) on the report's confidence intervals: a claim
// holds when the intervals (Student t, 95%) of its two sides are ordered as claimed without
// overlap, fails when they are ordered the other way without overlap, and is inconclusive when
// they overlap; see evaluate_claim().

#include <cstdint>
#include <functional>
#include <string>

#include "hybridlab/claims.h"
#include "report/stats.h"

namespace hybridlab::report {

using hybridlab::CellRef;
using hybridlab::Claim;
using hybridlab::ClaimCatalog;
using hybridlab::ClaimError;
using hybridlab::ClaimVariant;
using hybridlab::parse_claim;
using hybridlab::Relation;
using hybridlab::resolve_claim;

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
