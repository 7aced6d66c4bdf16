#pragma once
// Reports over a folder of runs: summary.csv, summary.md and gnuplot PNGs.

#include <string>
#include <vector>

namespace hybridlab {

struct ReportFiles {
  std::string csv;                 ///< <dir>/summary.csv
  std::string markdown;            ///< <dir>/summary.md
  std::vector<std::string> plots;  ///< <dir>/plots/*.png (empty when gnuplot is missing)
  std::string markdown_text;       ///< the content of summary.md (printed by `run`)
};

/// Reads every <experiment_dir>/<run>/{results.json,status.json,metrics.jsonl} and writes the
/// report files atomically:
///  - summary.csv: one row per run: run, varied values, task, state, params, steps, final loss,
///    then every metric at every eval length as `<metric>@<length>`;
///  - summary.md: per task, a variant x eval length table of the primary metric with the best value
///    per column in bold, failed runs listed with their error;
///  - plots/<task>_<metric>_vs_length.png (one line per variant, training length marked) and
///    plots/<task>_loss_vs_step.png.
/// Throws UserError when the folder holds no runs.
ReportFiles write_report(const std::string& experiment_dir, bool plots = true);

}  // namespace hybridlab
