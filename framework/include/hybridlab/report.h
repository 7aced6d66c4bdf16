#pragma once
// Reports over a folder of runs: summary.csv, summary_by_variant.csv, summary.md, claims.csv and
// gnuplot PNGs.

#include <cstdint>
#include <string>
#include <vector>

namespace hybridlab {

struct ReportFiles {
  std::string csv;                 ///< <dir>/summary.csv
  std::string by_variant_csv;      ///< <dir>/summary_by_variant.csv
  std::string markdown;            ///< <dir>/summary.md
  std::string claims_csv;          ///< <dir>/claims.csv ("" when the experiment has no claims)
  std::vector<std::string> plots;  ///< <dir>/plots/*.png (empty when gnuplot is missing)
  std::string markdown_text;       ///< the content of summary.md (printed by `run`)
  int64_t claims_held = 0, claims_failed = 0, claims_inconclusive = 0;
  int64_t claims_split = 0;  ///< claims on a variant whose seeds split (report/health.h)
};

/// Reads every <experiment_dir>/<run>/{results.json,status.json,metrics.jsonl,source.yaml} and
/// writes the report files atomically:
///  - summary.csv: one row per run: run, varied values, task, state, health, params, steps, final
///    loss, then every metric at every eval length as `<metric>@<length>`;
///  - summary_by_variant.csv: one row per variant (the seeds of one configuration): n, health,
///    tuned values, and per metric and length the mean (`<metric>@<length>`) and the half-width
///    of its 95% Student-t interval (`<metric>@<length>_ci95`, empty for n = 1);
///  - summary.md: per task, a variant x eval length table of the primary metric, mean ± 95% CI
///    over seeds, the best value per column in bold and the values indistinguishable from it
///    (overlapping intervals) marked ≈, a health column (still learning, at chance, diverged, seeds
///    split); the
///    claims with their outcome; failed runs listed with their error;
///  - claims.csv: each `expect:` claim of the experiment: holds / fails / inconclusive / seeds
///    split with the
///    numbers it was judged on;
///  - plots/<task>_<metric>_vs_length.png (one line per variant with 95% error bars, training
///    length marked), plots/<task>_loss_vs_step.png and, for text, the loss per position.
/// Throws UserError when the folder holds no runs.
ReportFiles write_report(const std::string& experiment_dir, bool plots = true);

}  // namespace hybridlab
