// Judging claims on confidence intervals (the grammar: experiment/claim_grammar.cpp).

#include "report/claims.h"

#include <fmt/format.h>

#include <cmath>

namespace hybridlab::report {

std::string claim_status_name(ClaimStatus s) {
  switch (s) {
    case ClaimStatus::kHolds:
      return "holds";
    case ClaimStatus::kFails:
      return "fails";
    case ClaimStatus::kSplit:
      return "seeds split";
    case ClaimStatus::kInconclusive:
      break;
  }
  return "inconclusive";
}

namespace {

// The status of "a rel b" for a in [alo, ahi] and b in [blo, bhi] (kBetter/kWorse already turned
// into kAbove/kBelow): holds when every value of the intervals satisfies it, fails when none does.
ClaimStatus judge(Relation rel, double alo, double ahi, double blo, double bhi, double tolerance) {
  bool holds = false, fails = false;
  switch (rel) {
    case Relation::kAbove:
      holds = alo > bhi;
      fails = ahi <= blo;
      break;
    case Relation::kBelow:
      holds = ahi < blo;
      fails = alo >= bhi;
      break;
    case Relation::kAtLeast:
      holds = alo >= bhi;
      fails = ahi < blo;
      break;
    case Relation::kAtMost:
      holds = ahi <= blo;
      fails = alo > bhi;
      break;
    case Relation::kWithin: {
      const double dlo = alo - bhi, dhi = ahi - blo;
      holds = dlo >= -tolerance && dhi <= tolerance;
      fails = dlo > tolerance || dhi < -tolerance;
      break;
    }
    case Relation::kBetter:
    case Relation::kWorse:
      break;
  }
  return holds ? ClaimStatus::kHolds : fails ? ClaimStatus::kFails : ClaimStatus::kInconclusive;
}

// A claim whose variants split by seed (some seeds on the plateau) is reported as split, with
// what the intervals alone said.
void mark_split(const Claim& claim, const SplitLookup& split, ClaimOutcome& o) {
  std::string notes;
  for (const std::string* variant :
       {&claim.lhs.variant, claim.rhs_is_number ? nullptr : &claim.rhs.variant}) {
    if (!variant || (variant != &claim.lhs.variant && *variant == claim.lhs.variant)) continue;
    const std::string n = split(*variant);
    if (!n.empty()) notes += (notes.empty() ? "" : "; ") + *variant + " " + n;
  }
  if (notes.empty()) return;
  o.note = fmt::format("{} (on the intervals alone: {})", notes, claim_status_name(o.status));
  o.status = ClaimStatus::kSplit;
}

}  // namespace

ClaimOutcome evaluate_claim(const Claim& claim, const CellLookup& lookup,
                            const std::function<bool(const std::string&)>& higher_is_better,
                            const SplitLookup& split, const PairedLookup& paired) {
  ClaimOutcome o;
  o.lhs = lookup(claim.lhs.variant, claim.lhs.metric, claim.lhs.length);
  if (claim.rhs_is_number) {
    o.rhs.mean = claim.number;
    o.rhs.n = 1;
  } else {
    o.rhs = lookup(claim.rhs.variant, claim.rhs.metric, claim.rhs.length);
  }
  for (const auto* side : {&claim.lhs, claim.rhs_is_number ? nullptr : &claim.rhs}) {
    if (!side) continue;
    const Interval& iv = side == &claim.lhs ? o.lhs : o.rhs;
    if (iv.empty()) {
      o.status = ClaimStatus::kInconclusive;
      o.note = fmt::format("no result for {} {} at {}", side->variant, side->metric, side->length);
      return o;
    }
  }
  Relation rel = claim.relation;
  if (rel == Relation::kBetter || rel == Relation::kWorse) {
    const bool up = higher_is_better(claim.lhs.metric);
    rel = (rel == Relation::kBetter) == up ? Relation::kAbove : Relation::kBelow;
  }
  if (!claim.rhs_is_number && paired) o.difference = paired(claim.lhs, claim.rhs);
  double alo = o.lhs.lo(), ahi = o.lhs.hi(), blo = o.rhs.lo(), bhi = o.rhs.hi();
  if (!o.difference.empty()) {
    // Judged on the per-seed differences: a − b against 0, exactly as two intervals would be.
    alo = o.difference.lo(), ahi = o.difference.hi(), blo = 0, bhi = 0;
  }
  o.status = judge(rel, alo, ahi, blo, bhi, claim.tolerance);
  if (!o.difference.empty()) {
    o.note = fmt::format("paired over {} seeds: difference {:.4g} ± {:.4g}", o.difference.n,
                         o.difference.mean, o.difference.half_width);
    if (o.status == ClaimStatus::kInconclusive)
      o.note += rel == Relation::kWithin ? ", straddling the tolerance" : ", straddling 0";
  } else if (o.status == ClaimStatus::kInconclusive) {
    o.note = rel == Relation::kWithin ? "the difference's interval straddles the tolerance"
                                      : "intervals overlap";
  }
  const bool points = !o.lhs.has_interval() && (claim.rhs_is_number || !o.rhs.has_interval());
  if (points) o.note += std::string(o.note.empty() ? "" : "; ") + "n=1: no interval";
  if (split) mark_split(claim, split, o);
  return o;
}

}  // namespace hybridlab::report
