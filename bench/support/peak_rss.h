#pragma once
// Peak resident memory of the bench process, for the memory counters of the attention benches.

#include <fstream>
#include <string>

namespace hybridlab::bench {

/// VmHWM (peak resident set) of this process in GiB, read from /proc/self/status; 0 if unreadable.
inline double peak_rss_gib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / (1024.0 * 1024.0);
  }
  return 0;
}

}  // namespace hybridlab::bench
