#pragma once
// Progress of a long loop (training steps, analysis knock-outs): a bar with ETA on a terminal,
// plain lines every log_every steps otherwise.

#include <chrono>
#include <cstdint>
#include <string>

#include "util/clock.h"  // format_duration

namespace hybridlab {

class Progress {
 public:
  Progress(int64_t total, int64_t start, bool quiet, int64_t log_every);
  void update(int64_t step, double loss, double lr, double tokens_per_s);
  /// A line printed above the bar (or as a plain line).
  void note(const std::string& text);
  void finish();

 private:
  int64_t total_, start_, log_every_;
  bool quiet_, tty_, open_ = false;
  std::chrono::steady_clock::time_point begin_, last_draw_;
};

}  // namespace hybridlab
