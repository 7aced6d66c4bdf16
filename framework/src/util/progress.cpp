#include "util/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

#include "util/console.h"

namespace hybridlab {

Progress::Progress(int64_t total, int64_t start, bool quiet, int64_t log_every)
    : total_(total),
      start_(start),
      log_every_(log_every),
      quiet_(quiet),
      tty_(::isatty(STDERR_FILENO) != 0),
      begin_(std::chrono::steady_clock::now()) {}

void Progress::update(int64_t step, double loss, double lr, double tokens_per_s) {
  if (quiet_) return;
  const auto now = std::chrono::steady_clock::now();
  const double elapsed = std::chrono::duration<double>(now - begin_).count();
  const double eta = step > start_ ? elapsed / double(step - start_) * double(total_ - step) : 0.0;
  const std::string stats = fmt::format("step {}/{} loss {:.4f} lr {:.2e} {:.0f} tok/s ETA {}",
                                        step, total_, loss, lr, tokens_per_s, format_duration(eta));
  if (tty_) {
    if (step != total_ && std::chrono::duration<double>(now - last_draw_).count() < 0.1) return;
    last_draw_ = now;
    const int width = 24;
    const int filled = static_cast<int>(width * step / std::max<int64_t>(1, total_));
    say(stderr, "\r[{}{}] {}\x1b[K", std::string(filled, '#'), std::string(width - filled, '.'),
        stats);
    open_ = true;
  } else if (step % log_every_ == 0 || step == total_ || step == start_ + 1) {
    say(stderr, "{}\n", stats);
  }
  std::fflush(stderr);
}

void Progress::note(const std::string& text) {
  if (quiet_) return;
  if (tty_ && open_) say(stderr, "\r\x1b[K");
  say(stderr, "{}\n", text);
  open_ = false;
}

void Progress::finish() {
  if (quiet_) return;
  if (tty_ && open_) say(stderr, "\n");
  open_ = false;
  std::fflush(stderr);
}

}  // namespace hybridlab
