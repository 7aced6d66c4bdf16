// `report:`: plots the report draws on request, checked against what the experiment sweeps, and
// the knock-out analysis of every run.

#include "experiment/report_section.h"

#include <fmt/format.h>

#include <algorithm>

namespace hybridlab {
namespace {

template <class T>
bool contains(const std::vector<T>& v, const T& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out.empty() ? "none" : out;
}

// The axis name the report plots `x` under ("" when x names nothing plottable).
std::string axis_name(const std::string& x, const PlotCatalog& cat) {
  for (const auto& [dotted, label] : cat.swept) {
    if (x == dotted || x == label) return label;
  }
  if (contains(cat.variant_keys, x) || contains(model_quantities(), x)) return x;
  return "";
}

PlotRequest read_plot(Section p, const PlotCatalog& cat) {
  PlotRequest r;
  const std::string x = p.required<std::string>("x");
  if (!x.empty()) {
    r.x = axis_name(x, cat);
    if (r.x.empty()) {
      std::vector<std::string> swept;
      for (const auto& [dotted, label] : cat.swept) swept.push_back(dotted);
      p.error("x",
              fmt::format("'{}' is not a swept key ({}), a key set by an eval variant ({}) "
                          "or a model quantity ({})",
                          x, joined(swept), joined(cat.variant_keys), joined(model_quantities())));
    }
  }
  r.metric = p.get<std::string>("metric", "");
  if (!r.metric.empty() && !contains(cat.metrics, r.metric)) {
    p.error("metric", fmt::format("'{}' is not a metric of the experiment's tasks ({})", r.metric,
                                  joined(cat.metrics)));
  }
  r.length = p.get<int64_t>("length", 0);
  if (p.has("length") && !contains(cat.lengths, r.length)) {
    std::vector<std::string> lens;
    for (int64_t L : cat.lengths) lens.push_back(std::to_string(L));
    p.error("length",
            fmt::format("{} is not an eval length of the experiment ({})", r.length, joined(lens)));
  }
  r.series = p.get<std::vector<std::string>>("series", {});
  for (const std::string& s : r.series) {
    if (!contains(cat.labels, s)) {
      p.error("series",
              fmt::format("'{}' is not a label of the variants ({})", s, joined(cat.labels)));
    } else if (s == r.x) {
      p.error("series", fmt::format("'{}' is the plot's x axis", s));
    }
  }
  p.finish();
  return r;
}

}  // namespace

const std::vector<std::string>& model_quantities() {
  static const std::vector<std::string> names = {"params",
                                                 "layers",
                                                 "attention_share",
                                                 "position_share",
                                                 "recurrent_state_floats",
                                                 "kv_floats_per_token"};
  return names;
}

namespace {

// `report.analysis`: true, false or a map of the options of `hybridlab analyze`.
void read_analysis(Section report, const PlotCatalog& cat, ReportRequests& out) {
  const YAML::Node n = report.node()["analysis"];  // present: the caller checked
  if (n.IsScalar()) {
    out.analysis = report.get<bool>("analysis", false);
    out.analyze.kinds = {"mixer"};
    return;
  }
  Section a = report.child("analysis");
  out.analysis = true;
  AnalyzeOptions& o = out.analyze;
  o.kinds = a.get<std::vector<std::string>>("kinds", {"mixer"});
  for (const std::string& k : o.kinds) {
    if (!contains(knockout_kinds(), k)) {
      const std::string near = nearest_key(k, knockout_kinds());
      a.error("kinds", fmt::format("unknown knock-out kind '{}'{} (kinds: {})", k,
                                   near.empty() ? "" : "; did you mean '" + near + "'?",
                                   joined(knockout_kinds())));
    }
  }
  o.lengths = a.get<std::vector<int64_t>>("lengths", {});
  for (int64_t L : o.lengths) {
    if (!contains(cat.lengths, L))
      a.error("lengths", fmt::format("{} is not an eval length of the experiment", L));
  }
  o.examples = a.get<int64_t>("examples", 0);
  a.check(o.examples >= 0, "examples", "must be >= 1 (or 0: each run's eval.examples)");
  o.state_window = a.get<int64_t>("state_window", 0);
  a.check(o.state_window >= 0, "state_window", "must be >= 1 (or 0: each layer's chunk_size)");
  o.reach_windows = a.get<std::vector<int64_t>>("windows", {});
  for (int64_t w : o.reach_windows) a.check(w >= 1, "windows", "must be windows of >= 1 token");
  o.reach_tolerance = a.get<double>("tolerance", o.reach_tolerance);
  a.check(o.reach_tolerance >= 0, "tolerance", "must be >= 0 (primary-metric units)");
  a.finish();
}

}  // namespace

ReportRequests read_report_section(Section report, const PlotCatalog& cat) {
  ReportRequests out;
  std::vector<PlotRequest>& plots = out.plots;
  report.accept("plots");
  const YAML::Node list = report.has("plots") ? report.node()["plots"] : YAML::Node();
  if (list.IsDefined() && !list.IsNull()) {
    if (!list.IsSequence()) {
      report.error("plots", "expected a list of plots, e.g. [{x: task.num_kv_pairs, length: 256}]");
    } else {
      for (size_t i = 0; i < list.size(); ++i) {
        const std::string path = report.path() + ".plots." + std::to_string(i);
        if (!list[i].IsMap()) {
          report.error("plots", fmt::format("entry {} is not a map {{x: KEY, metric: M, length: "
                                            "L, series: [LABEL, ...]}}",
                                            i));
          continue;
        }
        plots.push_back(read_plot(report.config().section_at(path, list[i]), cat));
      }
    }
  }
  if (report.has("analysis")) read_analysis(report, cat, out);
  report.accept("analysis");
  out.best_of_seeds = report.get<bool>("best_of_seeds", false);
  report.finish();
  // Entries are read as maps under "report.plots.<i>"; the resolved config shows the list.
  if (list.IsSequence()) {
    YAML::Node resolved = report.config().resolved();
    resolved["report"]["plots"] = YAML::Clone(list);
  }
  return out;
}

}  // namespace hybridlab
