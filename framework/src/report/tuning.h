#pragma once
// Per-variant tuning (`sweep.tune`): of the runs of one variant at each tuned value, keep those
// whose mean validation score is best, as Zoology keeps the best learning rate per model
// (HazyResearch/zoology@d88d6f5, iclr24_zoology_figure2). The score is the primary metric at the
// training length on the task's validation split, which is disjoint from the eval sets the
// report scores (Task::validation_set), so the choice does not peek at the reported numbers.

#include <vector>

#include "report/aggregate.h"

namespace hybridlab::report {

/// Merges the groups of `groups` (from aggregate_runs) that differ only in tuned values into one
/// group per variant: the candidate with the best mean validation score of its runs (direction of
/// the primary metric; candidates without validation results are skipped; ties keep the earlier
/// grid value). The kept group is renamed to the variant without its tuned parts, its labels lose
/// the tuned keys, and `chosen`, `chosen_at_edge` (first or last value of its grid) and
/// `tuning_scores` are filled. Groups without tuned keys pass through unchanged, in order.
/// When no candidate of a variant has validation results the first candidate is kept, with
/// `chosen` values suffixed " (no validation)".
std::vector<VariantCells> select_tuned(const std::vector<VariantCells>& groups);

/// The validation score of one run: its primary metric at the training length on the validation
/// split (NaN when absent).
double validation_score(const RunData& run);

}  // namespace hybridlab::report
