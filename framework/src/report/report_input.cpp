// The runs of an experiment folder as the report reads them (report/report_parts.h).

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <tuple>

#include "hybridlab/error.h"
#include "report/report_parts.h"
#include "util/atomic_file.h"

namespace hybridlab::report {
namespace fs = std::filesystem;

namespace {

// Every run folder (one with a status.json) of `dir`, sorted by name.
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

// Every (step, loss) of a run's metrics.jsonl.
std::vector<LossPoint> loss_points(const fs::path& metrics) {
  std::vector<LossPoint> pts;
  try {
    require_plain_file(metrics.string());
  } catch (const UserError& e) {
    std::fprintf(stderr, "warning: %s; its loss curve is left out\n", e.what());
    return pts;
  }
  for (const MetricsRow& r : read_metrics(metrics.string()))
    if (r.has_loss) pts.push_back({r.step, r.loss});
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

RunData run_data(const ReportRow& r, const fs::path& dir) {
  RunData d;
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

}  // namespace

ReportInput read_report_input(const fs::path& dir) {
  ReportInput in;
  in.runs = load_runs(dir);
  const std::vector<ReportRow>& runs = in.runs;
  std::vector<RunData>& data = in.data;
  std::vector<size_t>& row_of = in.row_of;
  std::vector<std::string> scoring_of;  // data index -> eval.scoring of its results ("" = none)
  auto& curves = in.curves;
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunData base = run_data(runs[i], dir);
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
      RunData d = base;
      std::tie(d.name, d.labels) = eval_variant_run(base.name, base.labels, eval);
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
  return in;
}

std::string fmt_value(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v != 0 && (std::fabs(v) >= 1e5 || std::fabs(v) < 1e-3)) return fmt::format("{:.3e}", v);
  return fmt::format("{:.4f}", v);
}

// "mean ± half-width" (95% CI over seeds), the mean alone for one seed, "-" for none.
std::string interval_text(const Interval& iv) {
  if (iv.empty()) return iv.non_finite > 0 ? fmt_value(iv.mean) : "-";
  if (!iv.has_interval()) return fmt_value(iv.mean);
  return fmt_value(iv.mean) + " ± " + fmt_value(iv.half_width);
}

// Row label inside one task's table: the varied values other than the task itself.
std::string row_label(const Labels& labels, const std::string& fallback) {
  std::string s;
  for (const auto& [k, v] : labels) {
    if (k == "task" || k == "name") continue;
    s += (s.empty() ? "" : " ") + k + "=" + v;
  }
  return s.empty() ? fallback : s;
}

std::set<std::string> differing_keys(const std::vector<const Labels*>& rows) {
  // A key differs when some row lacks it or gives it another value than the first row has.
  std::map<std::string, std::string> first;
  std::map<std::string, size_t> count;
  std::set<std::string> out;
  for (const Labels* row : rows) {
    for (const auto& [k, v] : *row) {
      ++count[k];
      const auto [it, inserted] = first.emplace(k, v);
      if (!inserted && it->second != v) out.insert(k);
    }
  }
  for (const auto& [k, n] : count)
    if (n != rows.size()) out.insert(k);
  return out;
}

std::vector<std::string> legend_labels(const std::vector<const Labels*>& rows,
                                       const std::vector<std::string>& fallbacks) {
  std::vector<std::string> out;
  const std::set<std::string> differing = differing_keys(rows);
  for (size_t i = 0; i < rows.size(); ++i) {
    Labels kept;
    for (const auto& kv : *rows[i])
      if (rows.size() == 1 || differing.count(kv.first)) kept.push_back(kv);
    out.push_back(row_label(kept, fallbacks[i]));
  }
  return out;
}

MetricColumns metric_columns(const std::vector<RunData>& data) {
  MetricColumns columns;
  for (const auto& r : data) {
    for (const auto& [L, metrics] : r.eval) {
      for (const auto& [m, v] : metrics) columns.insert({m, L});
    }
  }
  return columns;
}

}  // namespace hybridlab::report
