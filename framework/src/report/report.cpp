// Reports over a folder of runs: summary.csv, summary.md, gnuplot PNGs (plot/gnuplot.h).

#include "hybridlab/report.h"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>

#include "hybridlab/error.h"
#include "hybridlab/run_record.h"
#include "plot/csv.h"
#include "plot/gnuplot.h"
#include "util/atomic_file.h"

namespace hybridlab {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// One run as the report sees it: its folder's typed record, flattened for the tables.
struct ReportRow {
  std::string name, state, error, task, primary;
  bool higher_is_better = true;
  int64_t train_length = 0;
  int64_t params = 0;
  bool has_results = false;
  std::optional<TrainRecord> train;
  std::vector<LengthResult> eval;
  std::vector<std::pair<std::string, std::string>> labels;
};

std::string fmt_value(double v) {
  if (!std::isfinite(v)) return "nan";
  if (v != 0 && (std::fabs(v) >= 1e5 || std::fabs(v) < 1e-3)) return fmt::format("{:.3e}", v);
  return fmt::format("{:.4f}", v);
}

// Row label inside one task's table: the varied values other than the task itself.
std::string row_label(const ReportRow& r) {
  std::string s;
  for (const auto& [k, v] : r.labels) {
    if (k == "task" || k == "name") continue;
    s += (s.empty() ? "" : " ") + k + "=" + v;
  }
  return s.empty() ? r.name : s;
}

std::vector<ReportRow> load_runs(const fs::path& dir) {
  std::vector<ReportRow> runs;
  std::vector<fs::path> subdirs;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_directory() && fs::exists(e.path() / "status.json")) subdirs.push_back(e.path());
  }
  std::sort(subdirs.begin(), subdirs.end());
  for (const auto& d : subdirs) {
    const RunRecord rec = RunFolder(d.string()).read();
    ReportRow r;
    r.name = d.filename().string();
    r.state = run_state_name(rec.status.state);
    r.error = rec.results_error.empty() ? rec.status.error : rec.results_error;
    if (rec.results) {
      const RunResults& res = *rec.results;
      r.has_results = true;
      r.task = res.task;
      r.primary = res.primary_metric;
      r.higher_is_better = res.higher_is_better;
      r.train_length = res.train_length;
      r.params = res.params;
      r.train = res.train;
      r.eval = res.eval;
      r.labels = res.id.labels;
    }
    runs.push_back(r);
  }
  return runs;
}

std::vector<int64_t> lengths_of(const ReportRow& r) {
  std::vector<int64_t> out;
  for (const auto& l : r.eval) out.push_back(l.length);
  std::sort(out.begin(), out.end());
  return out;
}

const LengthResult* at_length(const ReportRow& r, int64_t L) {
  for (const auto& l : r.eval) {
    if (l.length == L) return &l;
  }
  return nullptr;
}

double metric_at(const ReportRow& r, int64_t L, const std::string& m) {
  const LengthResult* l = at_length(r, L);
  if (!l) return NAN;
  const auto it = l->metrics.find(m);
  return it == l->metrics.end() ? NAN : it->second;
}

// Plot temp files (<name>.png.tmp.<pid>.png) of a report killed mid-plot: removed unless their
// writer is still alive.
void remove_stale_plot_temps(const fs::path& plots) {
  std::error_code ec;
  if (!fs::is_directory(plots, ec)) return;
  for (const auto& e : fs::directory_iterator(plots, ec)) {
    const std::string name = e.path().filename().string();
    const size_t at = name.find(".png.tmp.");
    if (at == std::string::npos) continue;
    long pid = 0;
    try {
      pid = std::stol(name.substr(at + 9));
    } catch (const std::exception&) {
    }
    if (pid > 0 && pid != ::getpid() && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM))
      continue;
    fs::remove(e.path(), ec);
  }
}

// (step, loss) of a run's metrics.jsonl, averaged over windows so that the plot stays readable.
std::pair<std::vector<double>, std::vector<double>> loss_curve(const fs::path& metrics) {
  std::vector<double> xs, ys;
  std::ifstream in(metrics);
  std::string line;
  std::vector<std::pair<double, double>> pts;
  while (std::getline(in, line)) {
    try {
      const json j = json::parse(line);
      if (j.contains("loss")) pts.emplace_back(j["step"].get<double>(), j["loss"].get<double>());
    } catch (const std::exception&) {
    }
  }
  const size_t w = std::max<size_t>(1, pts.size() / 100);
  for (size_t i = 0; i < pts.size(); i += w) {
    double sx = 0, sy = 0;
    size_t n = 0;
    for (size_t k = i; k < std::min(pts.size(), i + w); ++k, ++n) {
      sx += pts[k].first;
      sy += pts[k].second;
    }
    xs.push_back(sx / n);
    ys.push_back(sy / n);
  }
  return {xs, ys};
}

}  // namespace

ReportFiles write_report(const std::string& experiment_dir, bool plots) {
  const fs::path dir(experiment_dir);
  if (!fs::is_directory(dir)) {
    throw UserError(
        fmt::format("'{}' is not a folder of runs (expected runs/<experiment>)", experiment_dir));
  }
  const std::vector<ReportRow> runs = load_runs(dir);
  if (runs.empty()) {
    throw UserError(
        fmt::format("'{}' holds no runs (no <run>/status.json); run `hybridlab run "
                    "EXPERIMENT.yaml` first",
                    experiment_dir));
  }
  remove_stale_plot_temps(dir / "plots");
  ReportFiles files;
  files.csv = (dir / "summary.csv").string();
  files.markdown = (dir / "summary.md").string();

  // ---- summary.csv: one row per run, every metric at every length.
  std::vector<std::string> label_keys;
  std::set<std::pair<std::string, int64_t>> metric_cols;  // (metric, length)
  for (const auto& r : runs) {
    for (const auto& [k, v] : r.labels) {
      if (std::find(label_keys.begin(), label_keys.end(), k) == label_keys.end())
        label_keys.push_back(k);
    }
    for (const auto& l : r.eval) {
      for (const auto& [m, v] : l.metrics) metric_cols.insert({m, l.length});
    }
  }
  std::vector<std::string> header = {"run"};
  header.insert(header.end(), label_keys.begin(), label_keys.end());
  for (const char* h :
       {"task", "state", "params", "steps", "final_train_loss", "train_tokens_per_s", "error"}) {
    header.push_back(h);
  }
  for (const auto& [m, L] : metric_cols) header.push_back(fmt::format("{}@{}", m, L));
  std::vector<std::vector<std::string>> rows;
  for (const auto& r : runs) {
    std::vector<std::string> row = {r.name};
    for (const auto& k : label_keys) {
      std::string v;
      for (const auto& [lk, lv] : r.labels)
        if (lk == k) v = lv;
      row.push_back(v);
    }
    row.push_back(r.task);
    row.push_back(r.state);
    row.push_back(r.has_results ? std::to_string(r.params) : "");
    row.push_back(r.train ? std::to_string(r.train->steps) : "");
    row.push_back(r.train ? plot::format_number(r.train->final_loss) : "");
    row.push_back(r.train ? fmt::format("{:.0f}", r.train->tokens_per_s) : "");
    row.push_back(r.error.substr(0, r.error.find('\n')));
    for (const auto& [m, L] : metric_cols) {
      const double v = metric_at(r, L, m);
      row.push_back(std::isfinite(v) ? plot::format_number(v) : "");
    }
    rows.push_back(row);
  }
  plot::write_csv(files.csv, header, rows);

  // ---- summary.md: per task, variant x eval length of the primary metric, best in bold.
  std::string md = fmt::format("# {}\n\n", dir.filename().string());
  std::map<std::string, int64_t> states;
  for (const auto& r : runs) ++states[r.state];
  std::string counts;
  for (const auto& [s, c] : states)
    counts += (counts.empty() ? "" : ", ") + fmt::format("{} {}", c, s);
  md += fmt::format("{} runs: {}.\n", runs.size(), counts);
  std::vector<std::string> tasks;
  for (const auto& r : runs) {
    if (!r.task.empty() && lengths_of(r).size() &&
        std::find(tasks.begin(), tasks.end(), r.task) == tasks.end()) {
      tasks.push_back(r.task);
    }
  }
  for (const auto& task : tasks) {
    std::vector<const ReportRow*> tr;
    std::set<int64_t> lens, train_lens;
    for (const auto& r : runs) {
      if (r.task != task || lengths_of(r).empty()) continue;
      tr.push_back(&r);
      for (int64_t L : lengths_of(r)) lens.insert(L);
      train_lens.insert(r.train_length);
    }
    const std::string metric = tr[0]->primary;
    const bool higher = tr[0]->higher_is_better;
    std::string tl;
    for (int64_t L : train_lens) tl += (tl.empty() ? "" : ", ") + std::to_string(L);
    md += fmt::format("\n## {}: {} ({} is better; trained at length {})\n\n", task, metric,
                      higher ? "higher" : "lower", tl);
    md += "| variant |";
    for (int64_t L : lens) md += fmt::format(" {}{} |", L, train_lens.count(L) ? " (train)" : "");
    md += "\n|---|";
    for (size_t i = 0; i < lens.size(); ++i) md += "---:|";
    md += "\n";
    std::map<int64_t, double> best;
    for (int64_t L : lens) {
      double b = NAN;
      for (const auto* r : tr) {
        const double v = metric_at(*r, L, metric);
        if (std::isfinite(v) && (!std::isfinite(b) || (higher ? v > b : v < b))) b = v;
      }
      best[L] = b;
    }
    for (const auto* r : tr) {
      md += "| " + row_label(*r) + " |";
      for (int64_t L : lens) {
        const double v = metric_at(*r, L, metric);
        const std::string cell = std::isfinite(v) ? fmt_value(v) : "-";
        md += (std::isfinite(v) && fmt_value(v) == fmt_value(best[L])) ? " **" + cell + "** |"
                                                                       : " " + cell + " |";
      }
      md += "\n";
    }

    if (!plots || !plot::gnuplot_available()) continue;
    // Metric vs eval length, one line per variant, the training length marked.
    plot::LinePlot p;
    p.title = fmt::format("{}: {} vs eval length", task, metric);
    p.xlabel = "eval length (tokens)";
    p.ylabel = metric;
    p.logx = true;
    if (train_lens.size() == 1) {
      p.vline = static_cast<double>(*train_lens.begin());
      p.vline_label = "train length";
    }
    for (const auto* r : tr) {
      plot::Series s{row_label(*r), {}, {}};
      for (int64_t L : lengths_of(*r)) {
        s.x.push_back(static_cast<double>(L));
        s.y.push_back(metric_at(*r, L, metric));
      }
      p.series.push_back(s);
    }
    const std::string png =
        (dir / "plots" / fmt::format("{}_{}_vs_length.png", task, metric)).string();
    plot::plot_lines(p, png);
    files.plots.push_back(png);
    // Train loss vs step.
    plot::LinePlot lp;
    lp.title = fmt::format("{}: training loss", task);
    lp.xlabel = "step";
    lp.ylabel = "train loss (nats/token)";
    for (const auto* r : tr) {
      auto [xs, ys] = loss_curve(dir / r->name / "metrics.jsonl");
      if (!xs.empty()) lp.series.push_back({row_label(*r), xs, ys});
    }
    if (!lp.series.empty()) {
      const std::string lpng = (dir / "plots" / fmt::format("{}_loss_vs_step.png", task)).string();
      plot::plot_lines(lp, lpng);
      files.plots.push_back(lpng);
    }
    // Per-position loss at the longest length (text).
    plot::LinePlot pp;
    const int64_t longest = *lens.rbegin();
    pp.title = fmt::format("{}: loss vs position at length {}", task, longest);
    pp.xlabel = "position (tokens)";
    pp.ylabel = "loss (nats/token)";
    if (train_lens.size() == 1) {
      pp.vline = static_cast<double>(*train_lens.begin());
      pp.vline_label = "train length";
    }
    for (const auto* r : tr) {
      const LengthResult* at = at_length(*r, longest);
      if (!at || at->position_loss.empty()) continue;
      plot::Series s{row_label(*r), {}, {}};
      const auto& vals = at->position_loss;
      for (size_t b = 0; b < vals.size(); ++b) {
        s.x.push_back((static_cast<double>(b) + 0.5) * static_cast<double>(longest) /
                      static_cast<double>(vals.size()));
        s.y.push_back(vals[b]);
      }
      pp.series.push_back(s);
    }
    if (!pp.series.empty()) {
      const std::string ppng =
          (dir / "plots" / fmt::format("{}_loss_vs_position.png", task)).string();
      plot::plot_lines(pp, ppng);
      files.plots.push_back(ppng);
    }
  }
  std::string failed;
  for (const auto& r : runs) {
    if (r.state != "finished" && r.state != "new") {
      failed +=
          fmt::format("- {} ({}): {}\n", r.name, r.state, r.error.substr(0, r.error.find('\n')));
    }
  }
  if (!failed.empty()) md += "\n## Runs without results\n\n" + failed;
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
