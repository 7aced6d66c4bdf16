#pragma once
// CSV tables with a header row, written atomically (temp file + rename), for reports and inspect.

#include <torch/types.h>

#include <string>
#include <vector>

namespace hybridlab::plot {

/// Writes `header` and then `rows` as comma-separated lines to `path` (atomically; parent folders
/// are created). Cells are written as given; a cell containing a comma, quote or newline is quoted
/// (RFC 4180). Throws std::invalid_argument when a row's length differs from the header's, and
/// UserError when the file cannot be written.
void write_csv(const std::string& path, const std::vector<std::string>& header,
               const std::vector<std::vector<std::string>>& rows);

/// Writes a 1-D [N] or 2-D [N, M] tensor as CSV: the first column is the row index, named
/// `row_label`, followed by one column per tensor column, named by `columns` (M names; empty means
/// "c0", "c1", ...). A 1-D tensor has one value column, named columns[0] or "value". Numbers are
/// written in the shortest form that reads back to the same value of the tensor's dtype (float32
/// or float64; other dtypes are converted to float64); non-finite values as "nan", "inf", "-inf".
/// Throws std::invalid_argument for other ranks or a wrong number of column names, UserError when
/// the file cannot be written.
void write_tensor_csv(const std::string& path, const torch::Tensor& t,
                      const std::vector<std::string>& columns = {},
                      const std::string& row_label = "row");

/// One number in the same format write_tensor_csv uses.
std::string format_number(double v);
std::string format_number(float v);

}  // namespace hybridlab::plot
