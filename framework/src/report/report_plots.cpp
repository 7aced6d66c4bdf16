// The plots of a report (report/report_parts.h), drawn with gnuplot (plot/gnuplot.h) into
// <dir>/plots/.

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "plot/gnuplot.h"
#include "report/axis_plot.h"
#include "report/report_parts.h"

namespace hybridlab::report {
namespace fs = std::filesystem;

namespace {

// The loss curve averaged over windows so that the plot stays readable.
std::pair<std::vector<double>, std::vector<double>> smoothed(const std::vector<LossPoint>& pts) {
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
void requested_plots(const fs::path& dir, const std::vector<const VariantCells*>& tv,
                     const std::vector<PlotRequest>& requests, ReportFiles& files) {
  const std::string& task = tv.front()->task;
  bool has_eval = false;
  for (const auto* v : tv) {
    for (const auto& [k, val] : v->labels) has_eval |= k == "eval";
  }
  for (const PlotRequest& r : requests) {
    AxisRequest a{r.x, r.metric.empty() ? tv.front()->primary : r.metric, r.length, r.series,
                  false};
    // An eval variant's setting (a dotted key that is no label) varies with the `eval` label.
    bool label = false;
    for (const auto* v : tv) {
      for (const auto& [k, val] : v->labels) label |= k == r.x;
    }
    a.x_from_eval = has_eval && !label &&
                    std::find(model_quantities().begin(), model_quantities().end(), r.x) ==
                        model_quantities().end();
    const plot::LinePlot p = axis_plot(tv, a);
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

}  // namespace

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

namespace {

// Draws `p` into <dir>/plots/<name> unless it has no series; records the file.
void draw(const plot::LinePlot& p, const fs::path& dir, const std::string& name,
          ReportFiles& files) {
  if (p.series.empty()) return;
  const std::string png = (dir / "plots" / name).string();
  plot::plot_lines(p, png);
  files.plots.push_back(png);
}

// Marks the training length on a plot whose x axis is in tokens (when the task has one).
void mark_train_length(plot::LinePlot& p, const TaskView& view) {
  if (view.train_lengths.size() != 1) return;
  p.vline = static_cast<double>(*view.train_lengths.begin());
  p.vline_label = "train length";
}

// The legend entries of one line per variant (legend_labels).
std::vector<std::string> variant_legend(const std::vector<const VariantCells*>& variants) {
  std::vector<const Labels*> rows;
  std::vector<std::string> names;
  for (const auto* v : variants) rows.push_back(&v->labels), names.push_back(v->variant);
  return legend_labels(rows, names);
}

// The primary metric vs eval length, one line per variant with 95% error bars.
plot::LinePlot length_plot(const TaskView& view) {
  plot::LinePlot p;
  p.title = fmt::format("{}: {} vs eval length (mean, 95% CI over seeds)", view.task, view.metric);
  p.xlabel = "eval length (tokens)";
  p.ylabel = view.metric;
  p.logx = true;
  mark_train_length(p, view);
  const std::vector<std::string> titles = variant_legend(view.variants);
  for (size_t i = 0; i < view.variants.size(); ++i) {
    const auto* v = view.variants[i];
    plot::Series s;
    s.title = titles[i];
    bool any_interval = false;
    for (int64_t L : view.lengths) {
      const Interval iv = v->cell(view.metric, L);
      if (iv.empty()) continue;
      s.x.push_back(static_cast<double>(L));
      s.y.push_back(iv.mean);
      s.yerr.push_back(iv.half_width);
      any_interval |= iv.has_interval();
    }
    if (!any_interval) s.yerr.clear();
    if (!s.x.empty()) p.series.push_back(s);
  }
  return p;
}

// Train loss vs step, one (smoothed) line per run.
plot::LinePlot loss_plot(const TaskView& view) {
  plot::LinePlot p;
  p.title = fmt::format("{}: training loss", view.task);
  p.xlabel = "step";
  p.ylabel = "train loss (nats/token)";
  std::vector<const Labels*> rows;
  std::vector<std::string> names;
  for (const auto* v : view.variants) {
    for (const auto* r : v->runs) rows.push_back(&r->labels), names.push_back(r->name);
  }
  const std::vector<std::string> titles = legend_labels(rows, names);
  size_t i = 0;
  for (const auto* v : view.variants) {
    for (const auto* r : v->runs) {
      const std::string& title = titles[i++];
      auto [xs, ys] = smoothed(r->loss);
      if (xs.empty()) continue;
      plot::Series s;
      s.title = title;
      s.x = xs;
      s.y = ys;
      p.series.push_back(s);
    }
  }
  return p;
}

// The mean over a variant's runs of one per-position curve at `length` (runs whose curve has
// another number of buckets, or none, left out); empty when no run has one.
std::vector<double> mean_curve(const VariantCells& v, const ReportInput& in, int64_t length,
                               std::vector<double> LengthResult::*curve_of, int& runs_used) {
  std::vector<double> sum;
  runs_used = 0;
  for (const auto* rd : v.runs) {
    const auto curve = in.curves.find(rd->name);
    if (curve == in.curves.end()) continue;
    const std::vector<LengthResult>& results = *curve->second;
    const auto at = std::find_if(results.begin(), results.end(),
                                 [&](const LengthResult& l) { return l.length == length; });
    if (at == results.end() || ((*at).*curve_of).empty()) continue;
    const auto& vals = (*at).*curve_of;
    if (sum.empty()) sum.assign(vals.size(), 0.0);
    if (vals.size() != sum.size()) continue;
    for (size_t b = 0; b < vals.size(); ++b) sum[b] += vals[b];
    ++runs_used;
  }
  for (double& x : sum) x /= std::max(runs_used, 1);
  return sum;
}

// One per-position curve (loss or accuracy, `what` and `ylabel` naming it) at the longest eval
// length (tasks that record it): one line per variant, the mean of its seeds' curves (a line per
// seed made the legend outgrow the plot).
plot::LinePlot position_plot(const TaskView& view, const ReportInput& in,
                             std::vector<double> LengthResult::*curve_of, const std::string& what,
                             const std::string& ylabel) {
  plot::LinePlot p;
  const int64_t longest = *view.lengths.rbegin();
  p.title =
      fmt::format("{}: {} vs position at length {} (mean over seeds)", view.task, what, longest);
  p.xlabel = "position (tokens)";
  p.ylabel = ylabel;
  mark_train_length(p, view);
  const std::vector<std::string> titles = variant_legend(view.variants);
  for (size_t i = 0; i < view.variants.size(); ++i) {
    const auto* v = view.variants[i];
    int runs_used = 0;
    const std::vector<double> vals = mean_curve(*v, in, longest, curve_of, runs_used);
    if (vals.empty()) continue;
    plot::Series s;
    s.title = titles[i];
    for (size_t b = 0; b < vals.size(); ++b) {
      s.x.push_back((static_cast<double>(b) + 0.5) * static_cast<double>(longest) /
                    static_cast<double>(vals.size()));
      s.y.push_back(vals[b]);
    }
    p.series.push_back(s);
  }
  return p;
}

}  // namespace

void task_plots(const fs::path& dir, const TaskView& view, const std::vector<PlotRequest>& requests,
                const ReportInput& in, ReportFiles& files) {
  const std::string& task = view.task;
  draw(length_plot(view), dir, fmt::format("{}_{}_vs_length.png", task, view.metric), files);
  requested_plots(dir, view.variants, requests, files);
  // Unless plots were asked for: the primary metric against each swept numeric key (pairs,
  // head_dim, ...).
  for (const std::string& key :
       requests.empty() ? numeric_axes(view.variants) : std::vector<std::string>{}) {
    draw(axis_plot(view.variants, {key, view.metric, 0, {}, false}), dir,
         fmt::format("{}_{}_vs_{}.png", task, view.metric, key), files);
  }
  draw(loss_plot(view), dir, fmt::format("{}_loss_vs_step.png", task), files);
  draw(position_plot(view, in, &LengthResult::position_loss, "loss", "loss (nats/token)"), dir,
       fmt::format("{}_loss_vs_position.png", task), files);
  draw(position_plot(view, in, &LengthResult::position_accuracy, "accuracy", "accuracy"), dir,
       fmt::format("{}_accuracy_vs_position.png", task), files);
}

}  // namespace hybridlab::report
