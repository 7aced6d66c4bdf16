#pragma once
// Writing a positional scheme's inspect() tables to disk: CSV for every table, PNG plots via
// gnuplot. Used by `hybridlab inspect position`.

#include <string>
#include <vector>

#include "hybridlab/position.h"

namespace hybridlab::inspect {

/// How a table is drawn: a heatmap for 2-D tables with more than 4 columns, a line plot (one line
/// per column, x = row index) for 1-D tables and narrow 2-D tables with more than one row, nothing
/// for a single value.
enum class PlotKind { kNone, kHeatmap, kLines };
PlotKind plot_kind(const PositionTable& table);

/// Writes `<out_dir>/<name>.csv` for every table (header row: row_label, then the column names)
/// and, when `plots` is true, `<out_dir>/<name>.png` as plot_kind() says, titled
/// "<title_prefix>: <description>". Files are written atomically; `out_dir` is created.
/// Returns the paths written, in order. Throws std::invalid_argument for a table that is not 1-D
/// or 2-D (or has a wrong number of column names), UserError when a file cannot be written, and
/// UserError naming gnuplot-nox when plots are asked for but gnuplot is missing (after every CSV
/// was written).
std::vector<std::string> write_position_tables(const std::vector<PositionTable>& tables,
                                               const std::string& out_dir,
                                               const std::string& title_prefix, bool plots = true);

}  // namespace hybridlab::inspect
