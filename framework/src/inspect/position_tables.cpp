#include "hybridlab/inspect.h"

#include <cmath>
#include <filesystem>
#include <stdexcept>

#include "hybridlab/error.h"
#include "plot/csv.h"
#include "plot/gnuplot.h"

namespace hybridlab::inspect {
namespace fs = std::filesystem;

PlotKind plot_kind(const PositionTable& table) {
  const torch::Tensor& v = table.values;
  if (!v.defined() || v.numel() <= 1) return PlotKind::kNone;
  if (v.dim() == 2 && v.size(1) > 4) return PlotKind::kHeatmap;
  if (v.size(0) <= 1) return PlotKind::kNone;
  return PlotKind::kLines;
}

namespace {

std::vector<std::string> column_names(const PositionTable& t) {
  const int64_t cols = t.values.dim() == 2 ? t.values.size(1) : 1;
  if (!t.columns.empty()) return t.columns;
  if (t.values.dim() == 1) return {"value"};
  std::vector<std::string> out;
  for (int64_t c = 0; c < cols; ++c) out.push_back("c" + std::to_string(c));
  return out;
}

void draw_lines(const PositionTable& t, const std::string& title, const std::string& png) {
  const torch::Tensor v = t.values.detach().to(torch::kCPU, torch::kDouble).contiguous();
  const torch::Tensor m = v.dim() == 1 ? v.unsqueeze(1) : v;
  const std::vector<std::string> names = column_names(t);
  plot::LinePlot p;
  p.title = title;
  p.xlabel = t.row_label;
  p.ylabel = m.size(1) == 1 ? names[0] : t.column_label;
  bool positive = true;
  double lo = INFINITY, hi = 0;
  for (int64_t c = 0; c < m.size(1); ++c) {
    plot::Series s;
    s.title = names[size_t(c)];
    for (int64_t r = 0; r < m.size(0); ++r) {
      const double y = m[r][c].item<double>();
      s.x.push_back(double(r));
      s.y.push_back(y);
      if (std::isfinite(y)) {
        positive = positive && y > 0;
        lo = std::min(lo, std::abs(y));
        hi = std::max(hi, std::abs(y));
      }
    }
    p.series.push_back(std::move(s));
  }
  // Frequencies and wavelengths span orders of magnitude: a log axis shows them.
  p.logy = positive && lo > 0 && hi / lo > 1e3;
  plot::plot_lines(p, png);
}

}  // namespace

std::vector<std::string> write_position_tables(const std::vector<PositionTable>& tables,
                                               const std::string& out_dir,
                                               const std::string& title_prefix, bool plots) {
  std::vector<std::string> written;
  for (const PositionTable& t : tables) {
    const std::string csv = (fs::path(out_dir) / (t.name + ".csv")).string();
    plot::write_tensor_csv(csv, t.values, t.columns, t.row_label);
    written.push_back(csv);
  }
  if (!plots) return written;
  bool any_plot = false;
  for (const PositionTable& t : tables) any_plot = any_plot || plot_kind(t) != PlotKind::kNone;
  if (any_plot && !plot::gnuplot_available()) {
    throw UserError("wrote the CSV tables to '" + out_dir +
                    "' but cannot draw the plots: 'gnuplot' is not on PATH (install the Debian "
                    "package gnuplot-nox, or pass --no-plots)");
  }
  for (const PositionTable& t : tables) {
    const std::string png = (fs::path(out_dir) / (t.name + ".png")).string();
    const std::string title = title_prefix + ": " + t.description;
    switch (plot_kind(t)) {
      case PlotKind::kHeatmap:
        plot::plot_heatmap(t.values, title, t.column_label, t.row_label, png);
        break;
      case PlotKind::kLines:
        draw_lines(t, title, png);
        break;
      case PlotKind::kNone:
        continue;
    }
    written.push_back(png);
  }
  return written;
}

}  // namespace hybridlab::inspect
