// Stopping a process cleanly: the flag every long loop looks at (the trainer between steps, the
// scheduler, the sweep) and the signal handlers that set it.

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <csignal>

#include "hybridlab/runtime.h"

namespace hybridlab {

std::atomic<bool>& stop_requested() {
  static std::atomic<bool> flag{false};
  return flag;
}

namespace {

std::atomic<bool> second_signal_exits{true};

void on_stop_signal(int sig) {
  // A second Ctrl-C while the checkpoint is written exits at once (where the caller wants it).
  if (stop_requested().exchange(true) && second_signal_exits.load()) _exit(128 + sig);
}

// The reader of stdout or stderr went away (`| head`, a closed terminal's pipe): a stop like
// SIGTERM, never an exit on its own. Both streams go to /dev/null first, so the stop's
// checkpoint and records are not cut short by the next progress line (open and dup2 are
// async-signal-safe).
void on_broken_pipe(int) {
  const int null_fd = ::open("/dev/null", O_WRONLY);
  if (null_fd >= 0) {
    ::dup2(null_fd, STDOUT_FILENO);
    ::dup2(null_fd, STDERR_FILENO);
    ::close(null_fd);
  }
  stop_requested().store(true);
}

}  // namespace

void install_stop_handlers(bool second_exits) {
  second_signal_exits.store(second_exits);
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  struct sigaction pipe {};
  pipe.sa_handler = on_broken_pipe;
  sigemptyset(&pipe.sa_mask);
  sigaction(SIGPIPE, &pipe, nullptr);
}

}  // namespace hybridlab
