#pragma once
// Figures for reports and `hybridlab inspect`: line plots and heatmaps rendered by gnuplot.
//
// Each call writes its data and a .gp script into a private temporary folder, runs `gnuplot` on it
// (terminal pngcairo when this gnuplot has it, else the libgd `png` terminal) and moves the
// finished PNG into place atomically (temporary name in the target folder, then rename), so a crash
// never leaves a half-written image. The temporary folder is removed afterwards. Text is drawn with
// `noenhanced`, so underscores in titles and labels print as written.

#include <torch/types.h>

#include <cmath>
#include <string>
#include <vector>

namespace hybridlab::plot {

/// One line of a LinePlot: points (x[i], y[i]); x and y must have the same length. Non-finite
/// values are written as NaN, which gnuplot leaves out (a gap in the line). With `yerr` (empty, or
/// one half-width per point, e.g. a 95% confidence interval) the line gets error bars
/// (y ± yerr[i]; gnuplot `yerrorlines`).
struct Series {
  std::string title;
  std::vector<double> x, y;
  std::vector<double> yerr = {};
};

/// A line plot: one line per series, a legend with the series titles, optional log axes and an
/// optional dashed vertical marker (e.g. the training length) at x = vline when vline is finite.
struct LinePlot {
  std::string title, xlabel, ylabel;
  bool logx = false;  ///< log-scale x axis: every x must be > 0
  bool logy = false;  ///< log-scale y axis: every finite y must be > 0
  std::vector<Series> series;
  double vline = NAN;
  std::string vline_label;
};

/// Whether a working `gnuplot` is on PATH (runs `gnuplot --version` once per process and caches
/// the answer).
bool gnuplot_available();

/// Renders `plot` to the PNG file `png_path` (900x600), creating missing parent folders.
/// Throws UserError when gnuplot is not installed (install the Debian package gnuplot-nox) or the
/// target folder cannot be written; std::invalid_argument for a plot with no series, a series whose
/// x and y lengths differ, or a non-positive value on a log axis; std::runtime_error with gnuplot's
/// own message if gnuplot fails.
void plot_lines(const LinePlot& plot, const std::string& png_path);

/// Renders the 2-D tensor `m` [rows, cols] as a heatmap to `png_path`: column index on x, row index
/// on y with row 0 at the top (as a matrix or an attention map is read), a colour bar for the
/// values. Non-finite entries (e.g. -inf from a mask) are drawn as background. `xtics` / `ytics`
/// (empty, or one label per column / row) name the columns and rows instead of their indices.
/// Throws as plot_lines(), and std::invalid_argument when `m` is not 2-D or is empty, or a tic
/// list has the wrong length.
void plot_heatmap(const torch::Tensor& m, const std::string& title, const std::string& xlabel,
                  const std::string& ylabel, const std::string& png_path,
                  const std::vector<std::string>& xtics = {},
                  const std::vector<std::string>& ytics = {});

}  // namespace hybridlab::plot
