#pragma once
// Wall-clock helpers shared by the commands that report their own duration.

#include <chrono>

namespace hybridlab {

/// Seconds elapsed on the steady clock since t0.
inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace hybridlab
