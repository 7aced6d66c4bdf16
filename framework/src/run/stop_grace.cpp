// A run's child ends itself when a stop request is not honoured within a grace period.
//
// The trainer looks at stop_requested() between steps only, so a step that never returns (a
// plugin's hook that hangs, a library waiting forever) leaves a child that asked itself to stop,
// or whose parent died (PR_SET_PDEATHSIG sends it SIGTERM), running without end and holding its
// run's lock. A watchdog thread gives the stop a deadline.

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "hybridlab/run.h"
#include "hybridlab/runtime.h"
#include "hybridlab/trainer.h"

namespace hybridlab {

double stop_grace_seconds() {
  const char* env = std::getenv("HYBRIDLAB_STOP_GRACE");
  if (!env || !*env) return 120;
  double v = 0;
  // At most a day: past that the deadline is none.
  if (!parse_number_text(env, v) || !(v > 0) || v > 86400) {
    throw UserError(fmt::format(
        "HYBRIDLAB_STOP_GRACE: '{}' is not a number of seconds in (0, 86400] (how long a run's "
        "process may take to stop after a stop request or its parent's death; default 120)",
        env));
  }
  return v;
}

namespace {

[[noreturn]] void end_now(const std::string& run_dir, double grace_s, bool orphaned) {
  const std::string why = fmt::format(
      "did not stop within {:g} s of {} (HYBRIDLAB_STOP_GRACE): its current step never reached "
      "its end; ended, rerun to resume from the last checkpoint",
      grace_s, orphaned ? "its parent's death" : "the stop request");
  try {
    RunFolder(run_dir).write_status(RunState::kInterrupted, why);
  } catch (const std::exception&) {
    // The disk failed too: the lock is still released below, and a rerun resumes the run.
  }
  std::fprintf(stderr, "%s: %s\n", run_dir.c_str(), why.c_str());
  std::fflush(stderr);
  // _exit, not exit: the main thread is stuck inside the step, and exit's destructors could wait
  // on what it holds.
  ::_exit(130);
}

void watch(const std::string& run_dir, double grace_s, pid_t parent) {
  using Clock = std::chrono::steady_clock;
  while (!stop_requested().load() && ::getppid() == parent)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const bool orphaned = ::getppid() != parent;
  stop_requested().store(true);  // a parent's death whose signal was lost is a stop too
  const auto deadline = Clock::now() + std::chrono::duration<double>(grace_s);
  std::this_thread::sleep_until(deadline);
  end_now(run_dir, grace_s, orphaned);
}

}  // namespace

void end_after_stop_grace(const std::string& run_dir, double grace_s) {
  std::thread(watch, run_dir, grace_s, ::getppid()).detach();
}

}  // namespace hybridlab
