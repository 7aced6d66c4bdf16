// Reports over a folder of runs: summary.csv, summary_by_variant.csv, summary.md, claims.csv,
// gnuplot PNGs (plot/gnuplot.h). The runs are read by report_input.cpp, seeds aggregated by
// report/aggregate.h (health flags: report/health.h), the files written by report_csv.cpp,
// report_markdown.cpp, report_claims_section.cpp and report_plots.cpp.

#include "hybridlab/report.h"

#include <fmt/format.h>

#include "hybridlab/error.h"
#include "plot/csv.h"
#include "plot/gnuplot.h"
#include "report/report_parts.h"
#include "report/tuning.h"
#include "util/atomic_file.h"

namespace hybridlab {
namespace fs = std::filesystem;

ReportFiles write_report(const std::string& experiment_dir, bool plots) {
  const fs::path dir(experiment_dir);
  if (!fs::is_directory(dir)) {
    throw UserError(
        fmt::format("'{}' is not a folder of runs (expected runs/<experiment>)", experiment_dir));
  }
  const report::ReportInput in = report::read_report_input(dir);
  const ReportRequests asked = read_report_requests(dir.string());
  const std::vector<PlotRequest>& requests = asked.plots;
  if (in.runs.empty()) {
    throw UserError(
        fmt::format("'{}' holds no runs (no <run>/status.json); run `hybridlab run "
                    "EXPERIMENT.yaml` first",
                    experiment_dir));
  }
  report::remove_stale_plot_temps(dir / "plots");
  ReportFiles files;
  files.csv = (dir / "summary.csv").string();
  files.by_variant_csv = (dir / "summary_by_variant.csv").string();
  files.markdown = (dir / "summary.md").string();

  const std::vector<report::VariantCells> groups = report::aggregate_runs(in.data);
  // Tuned variants keep the runs of their best value on the validation split.
  const std::vector<report::VariantCells> variants = report::select_tuned(groups);
  const report::MetricColumns columns = report::metric_columns(in.data);
  report::write_runs_csv(files.csv, in, groups, columns);
  report::write_variants_csv(files.by_variant_csv, variants, columns);

  // summary.md: per task, variant x eval length of the primary metric, then the sections.
  std::string md = report::markdown_header(dir, in.runs);
  const bool draw = plots && plot::gnuplot_available();
  for (const report::TaskView& view : report::task_views(variants)) {
    md += report::task_table(view);
    if (asked.best_of_seeds) md += report::best_seed_table(view);
    if (draw) report::task_plots(dir, view, requests, in, files);
  }
  md += report::tuning_section(variants);
  md += report::claims_section(dir, variants, files);
  md += report::closing_sections(dir, in.runs, variants);
  if (!files.plots.empty()) {
    md += "\n## Plots\n\n";
    for (const auto& p : files.plots)
      md += fmt::format("- ![]({})\n", fs::relative(p, dir).string());
  }
  write_file_atomic(files.markdown, md);
  files.markdown_text = md;
  return files;
}

}  // namespace hybridlab
