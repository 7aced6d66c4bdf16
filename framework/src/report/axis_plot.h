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

/// `metric` at each variant's training length against the value of label `key`: one series per
/// combination of the variants' other labels (titled "k=v, ..." or "all"), its points sorted by x,
/// with 95% half-widths as error bars when any point has an interval. Log x when every x is > 0
/// and the largest is at least 8 times the smallest. Variants without that cell are left out.
plot::LinePlot axis_plot(const std::vector<const VariantCells*>& variants, const std::string& key,
                         const std::string& metric);

}  // namespace hybridlab::report
