#pragma once
// Console output of long-running commands. A run's records live in its folder; what it prints is
// a view of them, so a closed terminal or pipe (EPIPE, after SIGPIPE is handled as a stop) must
// not turn into the run's error.

#include <fmt/format.h>

#include <cstdio>
#include <system_error>
#include <utility>

namespace hybridlab {

/// fmt::print(f, ...) that drops the text when `f` cannot be written (fmt throws
/// std::system_error on a short write). Never throws for a write error.
template <typename... Args>
void say(std::FILE* f, fmt::format_string<Args...> format, Args&&... args) {
  try {
    fmt::print(f, format, std::forward<Args>(args)...);
  } catch (const std::system_error&) {
  }
}

/// say() on stdout.
template <typename... Args>
void say(fmt::format_string<Args...> format, Args&&... args) {
  say(stdout, format, std::forward<Args>(args)...);
}

}  // namespace hybridlab
