#pragma once
// The report's summary of the knock-out analyses of a sweep's runs: per variant, how much of the
// damage each layer's mixer carries (docs/analysis.md, `report.analysis`).

#include <string>
#include <vector>

#include "report/aggregate.h"

namespace hybridlab::report {

/// Markdown tables, one per task and length (the training length, and the longest analysed
/// length when longer): one row per variant (its trained setting), one column per layer, each
/// cell the damage of zeroing that layer's mixer (primary-metric units, mean ± 95% half-width
/// over the seeds that were analysed) and its share of the row's total positive damage. Reads
/// each run's analysis record (`<experiment_dir>/<run>/analysis/analysis.json`); "" when no run
/// of `variants` has "mixer" knock-outs.
std::string layer_damage_tables(const std::string& experiment_dir,
                                const std::vector<VariantCells>& variants);

}  // namespace hybridlab::report
