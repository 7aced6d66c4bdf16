#include "plot/csv.h"

#include <charconv>
#include <cmath>
#include <stdexcept>

#include "util/atomic_file.h"

namespace hybridlab::plot {

namespace {

std::string cell(const std::string& text) {
  if (text.find_first_of(",\"\n\r") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) {
    out += c;
    if (c == '"') out += '"';
  }
  return out + "\"";
}

template <class T>
std::string shortest(T v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, res.ptr);
}

}  // namespace

std::string format_number(double v) { return shortest(v); }
std::string format_number(float v) { return shortest(v); }

void write_csv(const std::string& path, const std::vector<std::string>& header,
               const std::vector<std::vector<std::string>>& rows) {
  std::string text;
  auto line = [&](const std::vector<std::string>& cells) {
    for (size_t i = 0; i < cells.size(); ++i) text += (i ? "," : "") + cell(cells[i]);
    text += '\n';
  };
  line(header);
  for (size_t r = 0; r < rows.size(); ++r) {
    if (rows[r].size() != header.size()) {
      throw std::invalid_argument("write_csv('" + path + "'): row " + std::to_string(r) + " has " +
                                  std::to_string(rows[r].size()) + " cells, the header " +
                                  std::to_string(header.size()));
    }
    line(rows[r]);
  }
  write_file_atomic(path, text);
}

void write_tensor_csv(const std::string& path, const torch::Tensor& t,
                      const std::vector<std::string>& columns, const std::string& row_label) {
  if (!t.defined() || (t.dim() != 1 && t.dim() != 2)) {
    throw std::invalid_argument("write_tensor_csv('" + path + "'): expected a 1-D or 2-D tensor");
  }
  const bool is_float = t.scalar_type() == torch::kFloat;
  const torch::Tensor v =
      t.detach().to(torch::kCPU, is_float ? torch::kFloat : torch::kDouble).contiguous();
  const torch::Tensor m = v.dim() == 1 ? v.unsqueeze(1) : v;
  const int64_t rows = m.size(0), cols = m.size(1);
  std::vector<std::string> header{row_label};
  if (columns.empty()) {
    for (int64_t c = 0; c < cols; ++c)
      header.push_back(t.dim() == 1 ? "value" : "c" + std::to_string(c));
  } else if (static_cast<int64_t>(columns.size()) == cols) {
    header.insert(header.end(), columns.begin(), columns.end());
  } else {
    throw std::invalid_argument("write_tensor_csv('" + path + "'): " + std::to_string(cols) +
                                " columns but " + std::to_string(columns.size()) + " names");
  }
  std::vector<std::vector<std::string>> out(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    auto& row = out[static_cast<size_t>(r)];
    row.reserve(static_cast<size_t>(cols + 1));
    row.push_back(std::to_string(r));
    for (int64_t c = 0; c < cols; ++c) {
      row.push_back(is_float ? shortest(m.data_ptr<float>()[r * cols + c])
                             : shortest(m.data_ptr<double>()[r * cols + c]));
    }
  }
  write_csv(path, header, out);
}

}  // namespace hybridlab::plot
