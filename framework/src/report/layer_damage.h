#pragma once
// The report's summary of the knock-out analyses of a sweep's runs: per variant, how much of the
// damage each layer's mixer carries (docs/analysis.md, `report.analysis`).

#include <string>
#include <vector>

#include "report/aggregate.h"

namespace hybridlab::report {

/// Markdown tables, per task, for the "mixer" and the "position" knock-outs, each at the training
/// length and at the longest analysed length when longer: one row per variant (its trained
/// setting), one column per layer (and, for positions, the input scheme and all positions at
/// once), each cell the damage in primary-metric units, mean ± 95% half-width over the seeds
/// that were analysed; mixer cells also give their share of the row's total positive damage.
/// Reads each run's analysis record (`<experiment_dir>/<run>/analysis/analysis.json`); "" when no
/// run of `variants` has such knock-outs.
std::string layer_damage_tables(const std::string& experiment_dir,
                                const std::vector<VariantCells>& variants);

}  // namespace hybridlab::report
