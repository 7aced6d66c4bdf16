// Plots of a metric against a swept numeric key.

#include "report/axis_plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "report/report_parts.h"

namespace hybridlab::report {
namespace {

// The value of `text` when the whole of it is a finite number.
bool axis_number(const std::string& text, double& out) {
  if (text.empty()) return false;
  size_t used = 0;
  try {
    out = std::stod(text, &used);
  } catch (const std::exception&) {
    return false;
  }
  return used == text.size() && std::isfinite(out);
}

std::string axis_label(const Labels& labels, const std::string& key) {
  for (const auto& [k, v] : labels) {
    if (k == key) return v;
  }
  return "";
}

bool axis_has_label(const Labels& labels, const std::string& key) {
  return std::any_of(labels.begin(), labels.end(), [&](const auto& kv) { return kv.first == key; });
}

// `metric` at the training length, or at the one length the variant was scored at when that is
// another (an eval variant at its own length, e.g. MQAR's 64 pairs at 256 tokens).
Interval default_cell(const VariantCells& v, const std::string& metric) {
  const Interval at_train = v.cell(metric, v.train_length);
  if (!at_train.empty()) return at_train;
  std::vector<int64_t> lengths;
  for (const auto& [key, iv] : v.cells) {
    if (key.first == metric && !iv.empty()) lengths.push_back(key.second);
  }
  return lengths.size() == 1 ? v.cell(metric, lengths[0]) : Interval{};
}

}  // namespace

std::vector<std::string> numeric_axes(const std::vector<const VariantCells*>& variants,
                                      size_t min_values) {
  std::vector<std::string> out;
  if (variants.empty()) return out;
  for (const auto& [key, unused] : variants.front()->labels) {
    std::set<double> values;
    bool numeric = true;
    for (const VariantCells* v : variants) {
      double x = 0;
      numeric =
          numeric && axis_has_label(v->labels, key) && axis_number(axis_label(v->labels, key), x);
      if (!numeric) break;
      values.insert(x);
    }
    if (numeric && values.size() >= min_values) out.push_back(key);
  }
  return out;
}

bool axis_value(const VariantCells& v, const std::string& x, double& out) {
  if (axis_number(axis_label(v.labels, x), out)) return true;
  const auto it = v.axis.find(x);
  if (it == v.axis.end() || !std::isfinite(it->second)) return false;
  out = it->second;
  return true;
}

plot::LinePlot axis_plot(const std::vector<const VariantCells*>& variants, const AxisRequest& r) {
  plot::LinePlot p;
  const std::string task = variants.empty() ? "" : variants.front()->task;
  const std::string at =
      r.length > 0 ? fmt::format("at {}", r.length) : "at the training length (or its one length)";
  p.title = fmt::format("{}: {} {} vs {} (mean, 95% CI over seeds)", task, r.metric, at, r.x);
  p.xlabel = r.x;
  p.ylabel = r.metric;
  // Without a `series` list, a line is named by the keys that tell the lines apart: a key
  // every variant shares would only crowd the legend.
  std::vector<const Labels*> rows;
  for (const VariantCells* v : variants) rows.push_back(&v->labels);
  const std::set<std::string> differing = differing_keys(rows);
  const auto in_title = [&](const std::string& k) {
    if (k == r.x) return false;
    if (!r.series.empty()) return std::find(r.series.begin(), r.series.end(), k) != r.series.end();
    return !(r.x_from_eval && k == "eval") && differing.count(k) > 0;
  };
  // Series by the chosen labels, in first-appearance order; points (x, mean, half-width).
  std::vector<std::string> order;
  std::map<std::string, std::vector<std::tuple<double, double, double, bool>>> points;
  for (const VariantCells* v : variants) {
    double x = 0;
    if (!axis_value(*v, r.x, x)) continue;
    const Interval iv = r.length > 0 ? v->cell(r.metric, r.length) : default_cell(*v, r.metric);
    if (iv.empty() || !std::isfinite(iv.mean)) continue;
    std::string title;
    for (const auto& [k, val] : v->labels) {
      if (in_title(k)) title += (title.empty() ? "" : ", ") + k + "=" + val;
    }
    if (title.empty()) title = "all";
    if (!points.count(title)) order.push_back(title);
    points[title].emplace_back(x, iv.mean, iv.half_width, iv.has_interval());
  }
  double lo = INFINITY, hi = -INFINITY;
  for (const std::string& title : order) {
    auto& pts = points[title];
    std::sort(pts.begin(), pts.end());
    plot::Series s;
    s.title = title;
    bool any_interval = false;
    for (const auto& [x, mean, half, has] : pts) {
      s.x.push_back(x);
      s.y.push_back(mean);
      s.yerr.push_back(has ? half : 0.0);
      any_interval |= has;
      lo = std::min(lo, x);
      hi = std::max(hi, x);
    }
    if (!any_interval) s.yerr.clear();
    p.series.push_back(s);
  }
  p.logx = lo > 0 && hi >= 8 * lo;
  return p;
}

}  // namespace hybridlab::report
