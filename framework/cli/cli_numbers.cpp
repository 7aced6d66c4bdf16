// Command-line numbers through the configuration's number reader.

#include "cli_numbers.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <string>

#include "hybridlab/config.h"

namespace hybridlab::cli {
namespace {

std::string shown(const std::string& text) {
  constexpr size_t kShown = 40;  // a pasted megabyte stays one short line
  return text.size() <= kShown ? text : text.substr(0, kShown) + "...";
}

}  // namespace

CLI::Validator integer_in(int64_t lo, int64_t hi) {
  const std::string range = hi == std::numeric_limits<int64_t>::max()
                                ? fmt::format("an integer >= {}", lo)
                                : fmt::format("an integer from {} to {}", lo, hi);
  return CLI::Validator(
      [lo, hi, range](std::string& text) -> std::string {
        int64_t v = 0;
        if (parse_integer_text(text, v) && v >= lo && v <= hi) return "";
        return fmt::format("'{}' is not {}", shown(text), range);
      },
      range);
}

CLI::Validator number_in(double lo, double hi) {
  const std::string range = std::isinf(hi) ? fmt::format("a number >= {}", lo)
                                           : fmt::format("a number from {} to {}", lo, hi);
  return CLI::Validator(
      [lo, hi, range](std::string& text) -> std::string {
        double v = 0;
        if (parse_number_text(text, v) && v >= lo && v <= hi) return "";
        return fmt::format("'{}' is not {}", shown(text), range);
      },
      range);
}

}  // namespace hybridlab::cli
