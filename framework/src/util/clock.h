#pragma once
// Wall-clock helpers shared by the commands that report their own duration.

#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <string>

namespace hybridlab {

/// Seconds elapsed on the steady clock since t0.
inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// "1:05" / "1:02:03" for a duration in seconds.
inline std::string format_duration(double s) {
  const auto t = static_cast<int64_t>(s + 0.5);
  if (t >= 3600) return fmt::format("{}:{:02d}:{:02d}", t / 3600, (t / 60) % 60, t % 60);
  return fmt::format("{}:{:02d}", t / 60, t % 60);
}

}  // namespace hybridlab
