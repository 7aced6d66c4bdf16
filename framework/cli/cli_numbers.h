#pragma once
// Numbers on the command line, read as the configuration reads them.

#include <CLI/CLI.hpp>

#include <cstdint>

namespace hybridlab::cli {

/// A CLI11 check that an option's text is an integer as a config file writes one (decimal digits,
/// optional sign: parse_integer_text) within [lo, hi]. CLI11's own conversion clamps
/// 99999999999999999999 and wraps -1 for an unsigned target, and its Range prints DBL_MAX's 309
/// digits; this names the value and the bounds ("an integer >= 1" when hi is INT64_MAX). Runs
/// before CLI11 converts the text, so a value that passes converts exactly. Per element for
/// list options.
CLI::Validator integer_in(int64_t lo, int64_t hi);

/// The same for a number (parse_number_text: decimal, finite, within a double's range) within
/// [lo, hi]; hi = infinity for no upper bound.
CLI::Validator number_in(double lo, double hi);

}  // namespace hybridlab::cli
