// Reports over a folder of runs: summary.csv, summary_by_variant.csv, summary.md, claims.csv,
// gnuplot PNGs (plot/gnuplot.h). Seeds are aggregated by report/aggregate.h, health flags come
// from report/health.h and claims are judged by report/claims.h.

#include "hybridlab/report.h"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "hybridlab/analysis.h"
#include "hybridlab/error.h"
#include "hybridlab/run_record.h"
#include "plot/csv.h"
#include "plot/gnuplot.h"
#include "report/aggregate.h"
#include "report/axis_plot.h"
#include "report/claims.h"
#include "report/layer_damage.h"
#include "report/tuning.h"
#include "util/atomic_file.h"

namespace hybridlab {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// One run as the report sees it: its folder's record (status; results, when readable).
struct ReportRow {
  std::string name, state, error;
  std::optional<RunResults> results;
};

std::string fmt_value(double v) {
  if (!std::isfinite(v)) return "nan";
  if (v != 0 && (std::fabs(v) >= 1e5 || std::fabs(v) < 1e-3)) return fmt::format("{:.3e}", v);
  return fmt::format("{:.4f}", v);
}

// "mean ± half-width" (95% CI over seeds), the mean alone for one seed, "-" for none.
std::string interval_text(const report::Interval& iv) {
  if (iv.empty()) return "-";
  if (!iv.has_interval()) return fmt_value(iv.mean);
  return fmt_value(iv.mean) + " ± " + fmt_value(iv.half_width);
}

// Row label inside one task's table: the varied values other than the task itself.
std::string row_label(const report::Labels& labels, const std::string& fallback) {
  std::string s;
  for (const auto& [k, v] : labels) {
    if (k == "task" || k == "name") continue;
    s += (s.empty() ? "" : " ") + k + "=" + v;
  }
  return s.empty() ? fallback : s;
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
    r.results = rec.results;
    runs.push_back(r);
  }
  return runs;
}

// How `results` were scored: "generated" if any length was, "teacher_forced" else.
std::string scoring_text(const std::vector<LengthResult>& results) {
  for (const LengthResult& l : results) {
    if (l.scoring != "teacher_forced") return l.scoring;
  }
  return "teacher_forced";
}

// length -> metric -> value.
std::map<int64_t, std::map<std::string, double>> metric_table(
    const std::vector<LengthResult>& results) {
  std::map<int64_t, std::map<std::string, double>> out;
  for (const LengthResult& l : results) out[l.length] = l.metrics;
  return out;
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

// Every (step, loss) of a run's metrics.jsonl.
std::vector<report::LossPoint> loss_points(const fs::path& metrics) {
  std::vector<report::LossPoint> pts;
  try {
    require_plain_file(metrics.string());
  } catch (const UserError& e) {
    std::fprintf(stderr, "warning: %s; its loss curve is left out\n", e.what());
    return pts;
  }
  std::ifstream in(metrics);
  std::string line;
  while (std::getline(in, line)) {
    try {
      const json j = json::parse(line);
      if (j.contains("loss") && j.contains("step")) {
        const json& l = j["loss"];
        pts.push_back({j["step"].get<int64_t>(), l.is_number() ? l.get<double>() : NAN});
      }
    } catch (const std::exception&) {
    }
  }
  return pts;
}

// `text` (a YAML flow value) as a number, when it is one.
bool yaml_number(const std::string& text, double& out) {
  try {
    const YAML::Node n = YAML::Load(text);
    if (!n.IsScalar()) return false;
    out = n.as<double>();
    return std::isfinite(out);
  } catch (const std::exception&) {
    return false;
  }
}

// The run's own value of each key its eval variants set (from its resolved config.yaml), so
// that the trained row sits on the same axis as its variants.
std::map<std::string, double> own_settings(const RunResults& res, const fs::path& run_dir) {
  std::map<std::string, double> out;
  if (res.variants.empty()) return out;
  const std::optional<std::string> text = RunFolder(run_dir.string()).resolved_config();
  if (!text) return out;
  Config cfg;
  try {
    cfg = Config::parse(*text, (run_dir / "config.yaml").string());
  } catch (const std::exception&) {
    return out;
  }
  for (const auto& v : res.variants) {
    for (const auto& [key, value] : v.settings) {
      const YAML::Node n = cfg.lookup(key);
      double x = 0;
      if (n.IsDefined() && n.IsScalar() && yaml_number(n.Scalar(), x)) out[key] = x;
    }
  }
  return out;
}

report::RunData run_data(const ReportRow& r, const fs::path& dir) {
  report::RunData d;
  d.name = r.name;
  d.folder = r.name;
  d.state = r.state;
  d.error = r.error.substr(0, r.error.find('\n'));
  if (r.results) {
    const RunResults& res = *r.results;
    d.task = res.task;
    d.primary = res.primary_metric;
    d.higher_is_better = res.higher_is_better;
    d.train_length = res.train_length;
    d.labels = res.id.labels;
    d.eval = metric_table(res.eval);
    d.validation = metric_table(res.validation);
    d.chance = res.chance;
    for (const auto& [k, grid] : res.tuned) d.tuned[k] = grid;
    for (const std::string& q : model_quantities()) {
      const double x = model_quantity(q, res.params, res.model.value_or(ModelRecord{}));
      if (q == "params" || res.model) d.axis[q] = x;
    }
    for (const auto& [key, x] : own_settings(res, dir / r.name)) d.axis[key] = x;
  }
  d.loss = loss_points(dir / r.name / "metrics.jsonl");
  return d;
}

// The loss curve averaged over windows so that the plot stays readable.
std::pair<std::vector<double>, std::vector<double>> smoothed(
    const std::vector<report::LossPoint>& pts) {
  std::vector<double> xs, ys;
  const size_t w = std::max<size_t>(1, pts.size() / 100);
  for (size_t i = 0; i < pts.size(); i += w) {
    double sx = 0, sy = 0;
    size_t n = 0;
    for (size_t k = i; k < std::min(pts.size(), i + w); ++k, ++n) {
      sx += static_cast<double>(pts[k].step);
      sy += pts[k].loss;
    }
    xs.push_back(sx / static_cast<double>(n));
    ys.push_back(sy / static_cast<double>(n));
  }
  return {xs, ys};
}

// The plots the experiment asked for (report.yaml) for one task's variants `tv`, drawn into
// <dir>/plots/<task>_<metric>_vs_<x>[_at_<length>].png; requests whose metric or axis the task's
// variants lack are skipped.
void requested_plots(const fs::path& dir, const std::vector<const report::VariantCells*>& tv,
                     const std::vector<PlotRequest>& requests, ReportFiles& files) {
  const std::string& task = tv.front()->task;
  bool has_eval = false;
  for (const auto* v : tv) {
    for (const auto& [k, val] : v->labels) has_eval |= k == "eval";
  }
  for (const PlotRequest& r : requests) {
    report::AxisRequest a{r.x, r.metric.empty() ? tv.front()->primary : r.metric, r.length,
                          r.series, false};
    // An eval variant's setting (a dotted key that is no label) varies with the `eval` label.
    bool label = false;
    for (const auto* v : tv) {
      for (const auto& [k, val] : v->labels) label |= k == r.x;
    }
    a.x_from_eval = has_eval && !label &&
                    std::find(model_quantities().begin(), model_quantities().end(), r.x) ==
                        model_quantities().end();
    const plot::LinePlot p = report::axis_plot(tv, a);
    if (p.series.empty()) continue;
    const std::string png =
        (dir / "plots" /
         fmt::format("{}_{}_vs_{}{}.png", task, a.metric, folder_name(r.x),
                     r.length > 0 ? fmt::format("_at_{}", r.length) : std::string()))
            .string();
    plot::plot_lines(p, png);
    files.plots.push_back(png);
  }
}

std::string side_text(const report::CellRef& c) {
  return fmt::format("{} {} at {}", c.variant, c.metric, c.length);
}

}  // namespace

ReportFiles write_report(const std::string& experiment_dir, bool plots) {
  const fs::path dir(experiment_dir);
  if (!fs::is_directory(dir)) {
    throw UserError(
        fmt::format("'{}' is not a folder of runs (expected runs/<experiment>)", experiment_dir));
  }
  const std::vector<ReportRow> runs = load_runs(dir);
  const std::vector<PlotRequest> requests = read_report_requests(dir.string()).plots;
  if (runs.empty()) {
    throw UserError(
        fmt::format("'{}' holds no runs (no <run>/status.json); run `hybridlab run "
                    "EXPERIMENT.yaml` first",
                    experiment_dir));
  }
  remove_stale_plot_temps(dir / "plots");
  ReportFiles files;
  files.csv = (dir / "summary.csv").string();
  files.by_variant_csv = (dir / "summary_by_variant.csv").string();
  files.markdown = (dir / "summary.md").string();

  std::vector<report::RunData> data;
  std::vector<size_t> row_of;           // data index -> runs index
  std::vector<std::string> scoring_of;  // data index -> eval.scoring of its results ("" = none)
  // Per-position loss curves of every row of data, by its name.
  std::map<std::string, const std::vector<LengthResult>*> curves;
  for (size_t i = 0; i < runs.size(); ++i) {
    const report::RunData base = run_data(runs[i], dir);
    const auto& res = runs[i].results;
    if (!res || res->variants.empty()) {
      data.push_back(base);
      row_of.push_back(i);
      scoring_of.push_back(res ? scoring_text(res->eval) : "");
      if (res) curves[base.name] = &res->eval;
      continue;
    }
    // A run with eval variants: one row for the trained setting, one per variant.
    const auto add = [&](const std::string& eval, const std::vector<LengthResult>& results) {
      report::RunData d = base;
      std::tie(d.name, d.labels) = report::eval_variant_run(base.name, base.labels, eval);
      d.eval = metric_table(results);
      for (const auto& v : res->variants) {
        if (v.name != eval) continue;
        for (const auto& [key, text] : v.settings) {
          double x = 0;
          if (yaml_number(text, x)) d.axis[key] = x;
        }
      }
      data.push_back(d);
      row_of.push_back(i);
      scoring_of.push_back(scoring_text(results));
      curves[d.name] = &results;
    };
    add("trained", res->eval);
    for (const auto& v : res->variants) add(v.name, v.eval);
  }
  // Generated and teacher-forced scores of one task are different measurements: when any row was
  // generated, every row says how it was scored (a label: a column of the CSV, part of the
  // variant's name in summary.md).
  if (std::find(scoring_of.begin(), scoring_of.end(), "generated") != scoring_of.end()) {
    for (size_t i = 0; i < data.size(); ++i) {
      if (!scoring_of[i].empty()) data[i].labels.emplace_back("scoring", scoring_of[i]);
    }
  }
  const std::vector<report::VariantCells> groups = report::aggregate_runs(data);
  // Health of each run, by name (the variant holds it per run).
  std::map<std::string, std::string> run_health;
  for (const auto& v : groups) {
    for (size_t i = 0; i < v.runs.size(); ++i) run_health[v.runs[i]->name] = v.health[i].text();
  }
  // Tuned variants keep the runs of their best value on the validation split.
  const std::vector<report::VariantCells> variants = report::select_tuned(groups);

  // ---- summary.csv: one row per run, every metric at every length.
  std::vector<std::string> label_keys;
  std::set<std::pair<std::string, int64_t>> metric_cols;  // (metric, length)
  for (const auto& r : data) {
    for (const auto& [k, v] : r.labels) {
      if (std::find(label_keys.begin(), label_keys.end(), k) == label_keys.end())
        label_keys.push_back(k);
    }
    for (const auto& [L, metrics] : r.eval) {
      for (const auto& [m, v] : metrics) metric_cols.insert({m, L});
    }
  }
  std::vector<std::string> header = {"run"};
  header.insert(header.end(), label_keys.begin(), label_keys.end());
  for (const char* h : {"task", "state", "health", "params", "steps", "final_train_loss",
                        "train_tokens_per_s", "error"}) {
    header.push_back(h);
  }
  for (const auto& [m, L] : metric_cols) header.push_back(fmt::format("{}@{}", m, L));
  std::vector<std::vector<std::string>> rows;
  for (size_t i = 0; i < data.size(); ++i) {
    const ReportRow& r = runs[row_of[i]];
    std::vector<std::string> row = {data[i].name};
    for (const auto& k : label_keys) row.push_back(data[i].label(k));
    const TrainRecord* train = r.results && r.results->train ? &*r.results->train : nullptr;
    row.push_back(data[i].task);
    row.push_back(r.state);
    row.push_back(run_health.count(data[i].name) ? run_health[data[i].name] : "");
    row.push_back(r.results ? std::to_string(r.results->params) : "");
    row.push_back(train ? std::to_string(train->steps) : "");
    row.push_back(train ? plot::format_number(train->final_loss) : "");
    row.push_back(train ? fmt::format("{:.0f}", train->tokens_per_s) : "");
    row.push_back(data[i].error);
    for (const auto& [m, L] : metric_cols) {
      const double v = data[i].value(m, L);
      row.push_back(std::isfinite(v) ? plot::format_number(v) : "");
    }
    rows.push_back(row);
  }
  plot::write_csv(files.csv, header, rows);

  // ---- summary_by_variant.csv: one row per variant, mean and 95% half-width per cell.
  std::vector<std::string> vlabel_keys, tuned_keys;
  for (const auto& v : variants) {
    for (const auto& [k, x] : v.labels) {
      if (std::find(vlabel_keys.begin(), vlabel_keys.end(), k) == vlabel_keys.end())
        vlabel_keys.push_back(k);
    }
    for (const auto& [k, x] : v.chosen) {
      if (std::find(tuned_keys.begin(), tuned_keys.end(), k) == tuned_keys.end())
        tuned_keys.push_back(k);
    }
  }
  std::vector<std::string> vheader = {"variant"};
  vheader.insert(vheader.end(), vlabel_keys.begin(), vlabel_keys.end());
  for (const char* h : {"task", "n", "health"}) vheader.push_back(h);
  for (const auto& k : tuned_keys) {
    vheader.push_back("best_" + k);
    vheader.push_back("best_" + k + "_at_edge");
  }
  for (const auto& [m, L] : metric_cols) {
    vheader.push_back(fmt::format("{}@{}", m, L));
    vheader.push_back(fmt::format("{}@{}_ci95", m, L));
  }
  std::vector<std::vector<std::string>> vrows;
  for (const auto& v : variants) {
    std::vector<std::string> row = {v.variant};
    for (const auto& k : vlabel_keys) {
      std::string val;
      for (const auto& [lk, lv] : v.labels)
        if (lk == k) val = lv;
      row.push_back(val);
    }
    row.push_back(v.task);
    row.push_back(std::to_string(v.runs.size()));
    row.push_back(v.health_text());
    for (const auto& k : tuned_keys) {
      std::string val;
      for (const auto& [ck, cv] : v.chosen)
        if (ck == k) val = cv;
      row.push_back(val);
      row.push_back(val.empty() ? "" : v.chosen_at_edge.count(k) ? "yes" : "no");
    }
    for (const auto& [m, L] : metric_cols) {
      const report::Interval iv = v.cell(m, L);
      row.push_back(iv.empty() ? "" : plot::format_number(iv.mean));
      row.push_back(iv.has_interval() ? plot::format_number(iv.half_width) : "");
    }
    vrows.push_back(row);
  }
  plot::write_csv(files.by_variant_csv, vheader, vrows);

  // ---- summary.md: per task, variant x eval length of the primary metric.
  // Titled by the folder's own name, also for `report .` or a trailing slash.
  std::string md = fmt::format("# {}\n\n", fs::weakly_canonical(dir).filename().string());
  std::map<std::string, int64_t> states;
  for (const auto& r : runs) ++states[r.state];
  std::string counts;
  for (const auto& [s, c] : states)
    counts += (counts.empty() ? "" : ", ") + fmt::format("{} {}", c, s);
  md += fmt::format("{} runs: {}.\n", runs.size(), counts);
  md +=
      "\nCells: mean ± half-width of the 95% confidence interval over the n seeds of a variant "
      "(Student t, n−1 degrees of freedom; n = 1: the single value, no interval). **Bold**: the "
      "best mean of its column; ≈: its interval overlaps the best one's (indistinguishable from "
      "it). Health: docs/experiments.md#run-health.\n";
  std::vector<std::string> tasks;
  for (const auto& v : variants) {
    if (std::find(tasks.begin(), tasks.end(), v.task) == tasks.end()) tasks.push_back(v.task);
  }
  for (const auto& task : tasks) {
    std::vector<const report::VariantCells*> tv;
    std::set<int64_t> lens, train_lens;
    for (const auto& v : variants) {
      if (v.task != task) continue;
      tv.push_back(&v);
      for (const auto& [key, iv] : v.cells) lens.insert(key.second);
      train_lens.insert(v.train_length);
    }
    const std::string metric = tv[0]->primary;
    const bool higher = tv[0]->higher_is_better;
    std::string tl;
    for (int64_t L : train_lens) tl += (tl.empty() ? "" : ", ") + std::to_string(L);
    bool any_tuned = false;
    for (const auto* v : tv) any_tuned |= !v->chosen.empty();
    md += fmt::format("\n## {}: {} ({} is better; trained at length {})\n\n", task, metric,
                      higher ? "higher" : "lower", tl);
    md += "| variant | n |";
    for (int64_t L : lens) md += fmt::format(" {}{} |", L, train_lens.count(L) ? " (train)" : "");
    if (any_tuned) md += " tuned |";
    md += " health |\n|---|---:|";
    for (size_t i = 0; i < lens.size(); ++i) md += "---:|";
    if (any_tuned) md += "---|";
    md += "---|\n";
    std::map<int64_t, std::vector<report::CellRank>> ranks;
    for (int64_t L : lens) {
      std::vector<report::Interval> column;
      for (const auto* v : tv) column.push_back(v->cell(metric, L));
      ranks[L] = report::rank_cells(column, higher);
    }
    for (size_t i = 0; i < tv.size(); ++i) {
      const auto* v = tv[i];
      md += fmt::format("| {} | {} |", row_label(v->labels, v->variant), v->runs.size());
      for (int64_t L : lens) {
        const std::string cell = interval_text(v->cell(metric, L));
        switch (ranks[L][i]) {
          case report::CellRank::kBest:
            md += " **" + cell + "** |";
            break;
          case report::CellRank::kIndistinguishable:
            md += " ≈ " + cell + " |";
            break;
          case report::CellRank::kNone:
            md += " " + cell + " |";
            break;
        }
      }
      if (any_tuned) {
        std::string t;
        for (const auto& [k, val] : v->chosen) {
          t += (t.empty() ? "" : ", ") + k + "=" + val +
               (v->chosen_at_edge.count(k) ? " (edge of grid)" : "");
        }
        md += " " + (t.empty() ? "-" : t) + " |";
      }
      md += " " + v->health_text() + " |\n";
    }

    if (!plots || !plot::gnuplot_available()) continue;
    // Metric vs eval length, one line per variant with 95% error bars, the training length marked.
    plot::LinePlot p;
    p.title = fmt::format("{}: {} vs eval length (mean, 95% CI over seeds)", task, metric);
    p.xlabel = "eval length (tokens)";
    p.ylabel = metric;
    p.logx = true;
    if (train_lens.size() == 1) {
      p.vline = static_cast<double>(*train_lens.begin());
      p.vline_label = "train length";
    }
    for (const auto* v : tv) {
      plot::Series s;
      s.title = row_label(v->labels, v->variant);
      bool any_interval = false;
      for (int64_t L : lens) {
        const report::Interval iv = v->cell(metric, L);
        if (iv.empty()) continue;
        s.x.push_back(static_cast<double>(L));
        s.y.push_back(iv.mean);
        s.yerr.push_back(iv.half_width);
        any_interval |= iv.has_interval();
      }
      if (!any_interval) s.yerr.clear();
      if (!s.x.empty()) p.series.push_back(s);
    }
    const std::string png =
        (dir / "plots" / fmt::format("{}_{}_vs_length.png", task, metric)).string();
    if (!p.series.empty()) {
      plot::plot_lines(p, png);
      files.plots.push_back(png);
    }
    requested_plots(dir, tv, requests, files);
    // Unless plots were asked for: the primary metric against each swept numeric key (pairs,
    // head_dim, ...).
    for (const std::string& key :
         requests.empty() ? report::numeric_axes(tv) : std::vector<std::string>{}) {
      const plot::LinePlot ap = report::axis_plot(tv, {key, metric, 0, {}, false});
      if (ap.series.empty()) continue;
      const std::string apng =
          (dir / "plots" / fmt::format("{}_{}_vs_{}.png", task, metric, key)).string();
      plot::plot_lines(ap, apng);
      files.plots.push_back(apng);
    }
    // Train loss vs step, one line per run.
    plot::LinePlot lp;
    lp.title = fmt::format("{}: training loss", task);
    lp.xlabel = "step";
    lp.ylabel = "train loss (nats/token)";
    for (const auto* v : tv) {
      for (const auto* r : v->runs) {
        auto [xs, ys] = smoothed(r->loss);
        if (!xs.empty()) {
          plot::Series s;
          s.title = row_label(r->labels, r->name);
          s.x = xs;
          s.y = ys;
          lp.series.push_back(s);
        }
      }
    }
    if (!lp.series.empty()) {
      const std::string lpng = (dir / "plots" / fmt::format("{}_loss_vs_step.png", task)).string();
      plot::plot_lines(lp, lpng);
      files.plots.push_back(lpng);
    }
    // Per-position loss at the longest length (text), one line per run.
    plot::LinePlot pp;
    const int64_t longest = *lens.rbegin();
    pp.title = fmt::format("{}: loss vs position at length {}", task, longest);
    pp.xlabel = "position (tokens)";
    pp.ylabel = "loss (nats/token)";
    if (train_lens.size() == 1) {
      pp.vline = static_cast<double>(*train_lens.begin());
      pp.vline_label = "train length";
    }
    for (const auto* v : tv) {
      for (const auto* rd : v->runs) {
        const auto curve = curves.find(rd->name);
        if (curve == curves.end()) continue;
        const std::vector<LengthResult>& results = *curve->second;
        const auto at = std::find_if(results.begin(), results.end(),
                                     [&](const LengthResult& l) { return l.length == longest; });
        if (at == results.end() || at->position_loss.empty()) continue;
        plot::Series s;
        s.title = row_label(rd->labels, rd->name);
        const auto& vals = at->position_loss;
        for (size_t b = 0; b < vals.size(); ++b) {
          s.x.push_back((static_cast<double>(b) + 0.5) * static_cast<double>(longest) /
                        static_cast<double>(vals.size()));
          s.y.push_back(vals[b]);
        }
        pp.series.push_back(s);
      }
    }
    if (!pp.series.empty()) {
      const std::string ppng =
          (dir / "plots" / fmt::format("{}_loss_vs_position.png", task)).string();
      plot::plot_lines(pp, ppng);
      files.plots.push_back(ppng);
    }
  }

  // ---- tuning: every candidate's validation score.
  std::string tuning;
  for (const auto& v : variants) {
    if (v.tuning_scores.empty()) continue;
    std::string cells;
    for (const auto& [text, score] : v.tuning_scores) {
      std::string chosen;
      for (const auto& [k, val] : v.chosen) chosen += (chosen.empty() ? "" : ", ") + k + "=" + val;
      cells += (cells.empty() ? "" : "; ") + text + ": " +
               (std::isfinite(score) ? fmt_value(score) : "-") +
               (text == chosen ? " (chosen)" : "");
    }
    std::string edge;
    for (const auto& k : v.chosen_at_edge) edge += (edge.empty() ? "" : ", ") + k;
    tuning +=
        fmt::format("| {} | {} | {} |\n", row_label(v.labels, v.variant), cells,
                    edge.empty() ? "-" : "best at the edge of the " + edge + " grid: widen it");
  }
  if (!tuning.empty()) {
    md += "\n## Tuning\n\nEach variant keeps the value with the best mean " +
          std::string(
              "validation score (primary metric at the training length on the validation "
              "split, disjoint from the scored eval sets).\n\n| variant | validation score "
              "per value | edge |\n|---|---|---|\n") +
          tuning;
  }

  // ---- claims: judged on the variants' intervals.
  const std::vector<std::string> claims = read_expectations(dir.string());
  if (!claims.empty()) {
    report::ClaimCatalog cat;
    std::set<std::string> metrics;
    std::set<int64_t> lengths;
    for (const auto& v : variants) {
      cat.variants.push_back({v.variant, v.labels});
      for (const auto& [key, iv] : v.cells) {
        metrics.insert(key.first);
        lengths.insert(key.second);
      }
    }
    cat.metrics.assign(metrics.begin(), metrics.end());
    cat.lengths.assign(lengths.begin(), lengths.end());
    const auto lookup = [&](const std::string& name, const std::string& m, int64_t L) {
      for (const auto& v : variants) {
        if (v.variant == name) return v.cell(m, L);
      }
      return report::Interval{};
    };
    const auto higher = [&](const std::string& m) {
      return variants.empty() ? true
                              : report::metric_higher_is_better(m, variants[0].primary,
                                                                variants[0].higher_is_better);
    };
    // Per-seed differences between two cells whose variants have runs of the same seeds.
    const auto paired = [&](const report::CellRef& a, const report::CellRef& b) {
      const auto runs_of = [&](const std::string& name) -> const report::VariantCells* {
        for (const auto& v : variants) {
          if (v.variant == name) return &v;
        }
        return nullptr;
      };
      const report::VariantCells* va = runs_of(a.variant);
      const report::VariantCells* vb = runs_of(b.variant);
      if (!va || !vb) return report::Interval{};
      return report::paired_difference(*va, a.metric, a.length, *vb, b.metric, b.length);
    };
    const auto split_of = [&](const std::string& name) {
      for (const auto& v : variants) {
        if (v.variant == name) return v.split_note();
      }
      return std::string();
    };
    std::vector<std::vector<std::string>> crow;
    md += "\n## Claims\n\n| claim | outcome | left | right | note |\n|---|---|---|---|---|\n";
    for (const auto& text : claims) {
      std::vector<std::string> row = {text};
      report::ClaimOutcome o;
      report::Claim c;
      try {
        c = report::parse_claim(text);
        report::resolve_claim(c, cat);
        o = report::evaluate_claim(c, lookup, higher, split_of, paired);
      } catch (const report::ClaimError& e) {
        // Checked when the experiment was read; here the runs of a cell may be missing.
        o.status = report::ClaimStatus::kInconclusive;
        o.note = std::string("cannot judge on these runs: ") + e.what();
      }
      const std::string status = report::claim_status_name(o.status);
      (o.status == report::ClaimStatus::kHolds   ? files.claims_held
       : o.status == report::ClaimStatus::kFails ? files.claims_failed
       : o.status == report::ClaimStatus::kSplit ? files.claims_split
                                                 : files.claims_inconclusive)++;
      const auto side_cells = [](const report::Interval& iv, bool number) {
        return std::vector<std::string>{iv.empty() ? "" : plot::format_number(iv.mean),
                                        iv.has_interval() ? plot::format_number(iv.half_width) : "",
                                        number || iv.empty() ? "" : std::to_string(iv.n)};
      };
      const std::string left = c.lhs.variant.empty() ? "" : side_text(c.lhs);
      const std::string right = c.rhs_is_number ? plot::format_number(c.number)
                                                : (c.rhs.variant.empty() ? "" : side_text(c.rhs));
      row.push_back(status);
      row.push_back(left);
      for (auto& s : side_cells(o.lhs, false)) row.push_back(s);
      row.push_back(right);
      for (auto& s : side_cells(o.rhs, c.rhs_is_number)) row.push_back(s);
      for (auto& s : side_cells(o.difference, false)) row.push_back(s);
      row.push_back(o.note);
      crow.push_back(row);
      const auto md_side = [](const report::Interval& iv, bool number) {
        if (number) return fmt_value(iv.mean);
        return iv.empty() ? std::string("-") : interval_text(iv) + fmt::format(" (n={})", iv.n);
      };
      md += fmt::format("| {} | {} | {} | {} | {} |\n", text,
                        o.status == report::ClaimStatus::kHolds ? status : "**" + status + "**",
                        md_side(o.lhs, false), md_side(o.rhs, c.rhs_is_number), o.note);
    }
    md += fmt::format("\n{} claims: {} hold, {} fail, {} inconclusive", claims.size(),
                      files.claims_held, files.claims_failed, files.claims_inconclusive);
    md += files.claims_split == 0
              ? std::string(".\n")
              : fmt::format(
                    ", {} on variants whose seeds split (one seed left the plateau, "
                    "another did not: more seeds, a longer schedule or a better recipe; "
                    "docs/experiments.md#run-health).\n",
                    files.claims_split);
    files.claims_csv = (dir / "claims.csv").string();
    plot::write_csv(files.claims_csv,
                    {"claim", "outcome", "left", "left_mean", "left_ci95", "left_n", "right",
                     "right_mean", "right_ci95", "right_n", "paired_difference_mean",
                     "paired_difference_ci95", "paired_n", "note"},
                    crow);
  }

  std::string splits;
  for (const auto& v : variants) {
    if (v.split.split())
      splits += fmt::format("- {}: {}\n", row_label(v.labels, v.variant), v.split_note());
  }
  if (!splits.empty()) {
    md +=
        "\n## Seeds that split\n\nOne seed of each variant below left the learning plateau "
        "and another did not; the mean describes neither. Run more seeds, a longer schedule "
        "or a recipe that leaves the plateau on every seed (docs/experiments.md#run-health).\n\n" +
        splits;
  }
  std::string failed;
  for (const auto& r : runs) {
    if (r.state != "finished" && r.state != "new") {
      failed +=
          fmt::format("- {} ({}): {}\n", r.name, r.state, r.error.substr(0, r.error.find('\n')));
    }
  }
  if (!failed.empty()) md += "\n## Runs without results\n\n" + failed;
  // Knock-out analyses of single runs (`hybridlab analyze`), each in its own words.
  std::string analyses;
  for (const auto& r : runs) {
    const std::string text = analysis_summary((dir / r.name).string());
    if (!text.empty())
      analyses +=
          fmt::format("- {} ([details]({}/analysis/summary.md)): {}\n", r.name, r.name, text);
  }
  md += report::layer_damage_tables(dir.string(), variants);
  if (!analyses.empty()) md += "\n## Analysis (knock-outs of trained runs)\n\n" + analyses;
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
