#pragma once
// Plots of a metric against a swept numeric key (accuracy vs key-value pairs, vs Gated DeltaNet
// head_dim, vs attention layers), beside the plots against eval length.

#include <cstdint>
#include <string>
#include <vector>

#include "plot/gnuplot.h"
#include "report/aggregate.h"

namespace hybridlab::report {

/// The label keys of `variants` (one task's) that make a numeric axis: every variant has the key
/// with a value that parses whole as a finite number, and the values take at least `min_values`
/// distinct numbers. In first-label order.
std::vector<std::string> numeric_axes(const std::vector<const VariantCells*>& variants,
                                      size_t min_values = 3);

/// What one plot against an axis shows.
struct AxisRequest {
  std::string x;       ///< a label key, or a key of VariantCells::axis
  std::string metric;  ///< the metric on y
  /// Eval length of the metric; 0 = each variant's training length, or the one length a variant
  /// was scored at when it has none there (an eval variant with its own eval.lengths).
  int64_t length = 0;
  /// Label keys whose combinations make the lines; empty = every label but x (and but
  /// `eval` when `x_from_eval` says x is an eval variant's setting).
  std::vector<std::string> series;
  bool x_from_eval = false;
};

/// The value of axis `x` for `v`: its label when that parses whole as a finite number, else its
/// `axis` entry. False when neither exists.
bool axis_value(const VariantCells& v, const std::string& x, double& out);

/// `r.metric` at `r.length` against axis `r.x`: one series per combination of the series labels
/// (titled "k=v, ..." or "all"), its points sorted by x, with 95% half-widths as error bars when
/// any point has an interval. Log x when every x is > 0 and the largest is at least 8 times the
/// smallest. Variants without that cell or that axis are left out.
plot::LinePlot axis_plot(const std::vector<const VariantCells*>& variants, const AxisRequest& r);

}  // namespace hybridlab::report
