#pragma once
// The pieces write_report (report.cpp) assembles, each in its own file: the runs as the report
// reads them (report_input.cpp), the two summary CSVs (report_csv.cpp), the markdown tables and
// sections (report_markdown.cpp), the claims section (report_claims_section.cpp) and the plots
// (report_plots.cpp).

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "hybridlab/report.h"
#include "hybridlab/run_record.h"
#include "report/aggregate.h"

namespace hybridlab::report {

/// One run as the report sees it: its folder's record (status; results, when readable).
struct ReportRow {
  std::string name, state, error;
  std::optional<RunResults> results;
};

/// Every run of an experiment folder and the rows the report tabulates.
struct ReportInput {
  std::vector<ReportRow> runs;  ///< one per <run>/status.json, sorted by folder name
  std::vector<RunData> data;    ///< one per run, or per (run, eval variant) for runs with variants
  std::vector<size_t> row_of;   ///< data index -> runs index
  /// The per-length results (with per-position losses) of each data row, by its name; they point
  /// into `runs` (which a move keeps in place).
  std::map<std::string, const std::vector<LengthResult>*> curves;
};

/// Reads every <dir>/<run>/ that has a status.json (records, results, metrics.jsonl): one data row
/// per run, or one for the trained setting and one per eval variant; every row is labelled with
/// its scoring when any row was generated. Throws what RunFolder throws for unreadable folders.
ReportInput read_report_input(const std::filesystem::path& dir);

/// A value as the report prints it: 4 decimals, scientific beyond [1e-3, 1e5), "nan", "inf" or
/// "-inf" when not finite.
std::string fmt_value(double v);
/// "mean ± half-width" (95% CI over seeds), the mean alone for one seed, "-" for none, "nan" (or
/// "inf") when every seed recorded a value and none is finite (Interval::non_finite).
std::string interval_text(const Interval& iv);
/// A row's label inside one task's table: the varied values other than the task itself.
std::string row_label(const Labels& labels, const std::string& fallback);
/// The label keys whose values differ among `rows` (a key some rows lack differs).
std::set<std::string> differing_keys(const std::vector<const Labels*>& rows);
/// The legend entries of a plot with one line per row of `rows`: row_label naming only the keys
/// whose values differ among the rows (a key some rows lack differs), so that what every line
/// shares does not crowd the legend; a single line keeps its whole label. A line with no
/// differing key is named by its `fallbacks` entry (same length as `rows`).
std::vector<std::string> legend_labels(const std::vector<const Labels*>& rows,
                                       const std::vector<std::string>& fallbacks);

/// (metric, eval length) of every cell any row has.
using MetricColumns = std::set<std::pair<std::string, int64_t>>;
MetricColumns metric_columns(const std::vector<RunData>& data);

/// summary.csv: one row per data row: run, labels, task, state, health (from `groups`), params,
/// steps, final train loss, tokens/s, error, then every metric column. Written atomically.
void write_runs_csv(const std::string& path, const ReportInput& in,
                    const std::vector<VariantCells>& groups, const MetricColumns& columns);
/// summary_by_variant.csv: one row per variant: labels, task, n, health, tuned values, and per
/// metric column the mean and its 95% half-width. Written atomically.
void write_variants_csv(const std::string& path, const std::vector<VariantCells>& variants,
                        const MetricColumns& columns);

/// The variants of one task, with the eval and training lengths they have.
struct TaskView {
  std::string task;
  std::vector<const VariantCells*> variants;
  std::set<int64_t> lengths, train_lengths;
  std::string metric;  ///< the task's primary metric
  bool higher_is_better = true;
};
/// One view per task, in the order the variants first name them.
std::vector<TaskView> task_views(const std::vector<VariantCells>& variants);

/// summary.md's title and run counts, and the legend of its cells.
std::string markdown_header(const std::filesystem::path& dir, const std::vector<ReportRow>& runs);
/// One task's table: variant x eval length of the primary metric, best in bold, ≈ for the
/// indistinguishable, tuned values, health.
std::string task_table(const TaskView& view);
/// With `report.best_of_seeds`: one task's table of the best single run of each variant per
/// eval length (highest or lowest by the metric's direction, non-finite values skipped), each
/// cell naming its seed; "" when no variant has two or more runs.
std::string best_seed_table(const TaskView& view);
/// Every tuned variant's validation score per candidate value ("" when nothing was tuned).
std::string tuning_section(const std::vector<VariantCells>& variants);
/// The claims of the experiment (report.yaml's expect:) judged on `variants`; writes claims.csv
/// and counts the outcomes into `files` ("" when the experiment has no claims).
std::string claims_section(const std::filesystem::path& dir,
                           const std::vector<VariantCells>& variants, ReportFiles& files);
/// Seeds that split, runs without results, layer damage and the runs' knock-out analyses.
std::string closing_sections(const std::filesystem::path& dir, const std::vector<ReportRow>& runs,
                             const std::vector<VariantCells>& variants);

/// Removes plot temp files (<name>.png.tmp.<pid>.png) of a report killed mid-plot, unless their
/// writer is still alive.
void remove_stale_plot_temps(const std::filesystem::path& plots);
/// One task's plots into <dir>/plots/ (metric vs length, the requested or numeric-axis plots,
/// train loss vs step, loss vs position), their paths appended to files.plots.
void task_plots(const std::filesystem::path& dir, const TaskView& view,
                const std::vector<PlotRequest>& requests, const ReportInput& in,
                ReportFiles& files);

}  // namespace hybridlab::report
