#pragma once
// Reading `report:`: the plots an experiment asks its report to draw and the analysis of its runs.

#include <cstdint>
#include <string>
#include <vector>

#include "hybridlab/experiment.h"

namespace hybridlab {

/// What `report.plots` entries may name, gathered from the experiment.
struct PlotCatalog {
  /// Sweep axes: the dotted key and the label key the report shows it under ("head_dim").
  std::vector<std::pair<std::string, std::string>> swept;
  std::vector<std::string> labels;        ///< every label key of the variants (+ "eval")
  std::vector<std::string> variant_keys;  ///< dotted keys set by eval variants
  std::vector<std::string> metrics;       ///< the tasks' metrics
  std::vector<int64_t> lengths;           ///< every eval length (eval variants' included)
};

/// Reads `report:` ({plots: [{x, metric, length, series}, ...], analysis: true | false |
/// {kinds, lengths, examples, state_window, windows, tolerance}}). An x that is neither swept,
/// set by an eval variant nor a model quantity, an unknown metric, length or series label, an
/// unknown knock-out kind, a length that is not an eval length, or an entry of the wrong type is
/// recorded in the config at its file:line:key. A swept x given as its dotted key is stored as
/// its label key, the name the report knows it by.
ReportRequests read_report_section(Section report, const PlotCatalog& cat);

}  // namespace hybridlab
