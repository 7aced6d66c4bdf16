// Executing run folders: claim (lock + rule), then a child process per run, --jobs at a time.

#include "run/scheduler.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <thread>

#include "hybridlab/distributed.h"
#include "hybridlab/runtime.h"
#include "hybridlab/trainer.h"
#include "run/preflight.h"
#include "util/atomic_file.h"
#include "util/child_process.h"
#include "util/clock.h"
#include "util/console.h"
#include "util/fault_context.h"

namespace hybridlab {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

RunClaim claim_run(const RunJob& job, bool train_only) {
  RunClaim c;
  auto lock = std::make_unique<RunLock>(job.dir);
  // Files of a writer killed between writing and renaming; the lock says none is writing now.
  remove_stale_temporaries(job.dir);
  const RunFolder folder(job.dir);
  c.plan = prepare_run_folder(folder, job.source, job.id, train_only);
  if (c.plan.action == RunAction::kSkip || c.plan.action == RunAction::kRefuse) return c;
  if (!job.crash.empty()) {
    folder.write_status(RunState::kFailed, job.crash);
    c.plan = {RunAction::kRefuse, job.crash};
    return c;
  }
  c.lock = std::move(lock);
  return c;
}

namespace {

struct Counter {
  const ScheduleOptions& o;
  SweepOutcome& out;
  void failed(const std::string& name, const std::string& error) {
    ++out.failed;
    out.failures.emplace_back(name, error);
    if (!o.quiet) say("{}: FAILED: {}\n", name, error);
  }
};

// Claims a job for the scheduler: a skip, a refusal or a busy folder is counted here.
std::unique_ptr<RunLock> claim_counted(const RunJob& job, const ScheduleOptions& o, Counter& n) {
  try {
    RunClaim c = claim_run(job, o.train_only);
    if (c.plan.action == RunAction::kSkip) {
      ++n.out.skipped;
      if (!o.quiet) say("{}: {}\n", job.name, c.plan.message);
    } else if (!c.lock) {
      n.failed(job.name, c.plan.message);
    } else if (!c.plan.message.empty() && !o.quiet) {
      say("{}: {}\n", job.name, c.plan.message);
    }
    return std::move(c.lock);
  } catch (const UserError& e) {  // RunBusy, or a folder that cannot be written
    n.failed(job.name, e.what());
    return nullptr;
  }
}

// After a child ended: status.json must say how (a crashed child could not write it). Written
// under the lock, unless another process took the folder over meanwhile.
void record_end(const RunJob& job, RunState state, const std::string& error) {
  try {
    RunLock lock(job.dir);
    const RunFolder folder(job.dir);
    const RunStatus now = folder.status();
    if (now.state == state && (state != RunState::kFailed || !now.error.empty())) return;
    // A finished run is final: a child that failed while adding eval variants to it leaves it so.
    if (now.state == RunState::kFinished) return;
    folder.write_status(state, error);
  } catch (const UserError&) {
  }
}

// "" when a child that exited with code 0 recorded the end it was started for (`finished`, or
// `trained` for train_only), else why its exit is a failure: a plugin or library that calls
// exit(0) mid-run ends the child "successfully" with the run still `running`.
std::string unrecorded_end(const RunJob& job, bool train_only) {
  const RunState want = train_only ? RunState::kTrained : RunState::kFinished;
  RunState now = RunState::kNew;
  try {
    now = RunFolder(job.dir).status().state;
  } catch (const UserError& e) {
    return fmt::format("ended with exit code 0, and its status cannot be read: {}", e.what());
  }
  if (now == want || now == RunState::kFinished) return "";
  return fmt::format("ended with exit code 0 before recording {} (its status says {})",
                     run_state_name(want), run_state_name(now));
}

void run_in_process(const std::vector<RunJob>& jobs, const ScheduleOptions& o, Counter& n) {
  size_t i = 0;
  for (; i < jobs.size(); ++i) {
    if (stop_requested().load()) break;
    const RunJob& job = jobs[i];
    const auto lock = claim_counted(job, o, n);
    if (!lock) continue;
    try {
      execute_run_folder(RunFolder(job.dir), {o.train_only, o.quiet, 0, 0});
      ++n.out.finished;
    } catch (const Interrupted&) {
      ++n.out.interrupted;
      ++i;
      break;
    } catch (const std::exception& e) {
      n.failed(job.name, e.what());
    }
  }
  n.out.interrupted += static_cast<int64_t>(jobs.size() - i);
}

// One rank of a data-parallel job: every job in this process, trained by all ranks together.
// Rank 0 claims each job and tells the others through the store whether to execute it. The first
// run that fails ends the sweep on every rank (the ranks of a run fail together, or the job's
// collectives would pair up across different runs); a rerun resumes it.
void run_data_parallel(const std::vector<RunJob>& jobs, const ScheduleOptions& o, Counter& n) {
  ProcessGroup& g = *o.group;
  size_t i = 0;
  for (; i < jobs.size(); ++i) {
    const RunJob& job = jobs[i];
    const std::string key = fmt::format("job/{}", i);
    std::unique_ptr<RunLock> lock;  // rank 0 holds it while all ranks execute
    std::string action;
    if (g.rank() == 0) {
      if (stop_requested().load()) {
        action = "stop";
      } else {
        lock = claim_counted(job, o, n);
        action = lock ? "run" : "skip";
      }
      g.set(key, action);
    } else {
      action = g.get(key);
    }
    if (action == "stop") break;
    if (action == "skip") continue;
    if (!o.quiet) {
      say("[{}/{}] {} on {} ranks\n", i + 1, jobs.size(), job.name, g.world_size());
      std::fflush(stdout);
    }
    try {
      ExecuteOptions eo;
      eo.train_only = o.train_only;
      eo.quiet = o.quiet;
      eo.threads = o.child_threads;
      eo.group = &g;
      execute_run_folder(RunFolder(job.dir), eo);
      ++n.out.finished;
    } catch (const Interrupted&) {
      ++n.out.interrupted;
      ++i;
      break;
    } catch (const RankLost&) {
      throw;
    } catch (const std::exception& e) {
      n.failed(job.name, e.what());
      ++i;
      break;
    }
  }
  n.out.interrupted += static_cast<int64_t>(jobs.size() - i);
}

pid_t start_child(const RunJob& job, const RunLock& lock, const ScheduleOptions& o) {
  std::vector<std::string> args = {o.exe, "run-folder", job.dir, "--lock-fd",
                                   std::to_string(lock.fd())};
  if (o.train_only) args.push_back("--train-only");
  if (o.quiet) args.push_back("--quiet");
  if (o.child_threads > 0) args.insert(args.end(), {"--threads", std::to_string(o.child_threads)});
  // BLAS threads follow the split too (OpenBLAS spins its own pool otherwise, which
  // oversubscribes the cores when several runs share them), unless the user set them.
  std::map<std::string, std::string> threads;
  if (o.child_threads > 0) {
    for (const char* var : {"OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"})
      threads[var] = std::to_string(o.child_threads);
  }
  int log_fd = -1;
  if (o.jobs > 1) {
    log_fd = ::open((fs::path(job.dir) / "log.txt").c_str(),
                    O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
  }
  const pid_t pid = start_child_process(args, environment_with({}, threads), [&] {
    lock.inherit_into_child();
    if (log_fd >= 0) {
      ::dup2(log_fd, 1);
      ::dup2(log_fd, 2);
    }
  });
  if (log_fd >= 0) ::close(log_fd);
  if (pid < 0) {
    throw UserError(
        fmt::format("cannot start a process for run {}: {}", job.name, std::strerror(errno)));
  }
  return pid;
}

// 130 is a stop with its checkpoint; 128 + SIGINT/SIGTERM (or death by them) a stop before it:
// either way the run resumes from its last checkpoint, nothing failed.
bool stopped(int status) {
  return (WIFEXITED(status) &&
          (WEXITSTATUS(status) == 130 || WEXITSTATUS(status) == 128 + SIGTERM)) ||
         (WIFSIGNALED(status) && (WTERMSIG(status) == SIGINT || WTERMSIG(status) == SIGTERM));
}

// Counts and records how the child of `job` ended (waitpid `status`, after `secs` seconds).
void child_ended(const RunJob& job, int status, double secs, const ScheduleOptions& o, Counter& n) {
  std::string error;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    error = unrecorded_end(job, o.train_only);
    if (error.empty()) {
      ++n.out.finished;
      if (!o.quiet) say("{}: finished in {:.0f} s\n", job.name, secs);
      return;
    }
  } else if (stopped(status)) {
    ++n.out.interrupted;
    record_end(job, RunState::kInterrupted, "interrupted");
    if (!o.quiet) say("{}: interrupted (rerun to resume)\n", job.name);
    return;
  } else if (WIFSIGNALED(status)) {
    error = "crashed: " + signal_text(WTERMSIG(status));
    const std::string where = take_fatal_signal_note(RunFolder(job.dir).fault_note_path());
    if (!where.empty()) error += " " + where;
  } else {
    const RunStatus st = RunFolder(job.dir).status();
    error = st.state == RunState::kFailed && !st.error.empty()
                ? st.error
                : fmt::format("exited with code {}", WEXITSTATUS(status));
  }
  record_end(job, RunState::kFailed, error);
  ++n.out.failed;
  n.out.failures.emplace_back(job.name, error);
  if (!o.quiet) say("{}: FAILED after {:.0f} s: {}\n", job.name, secs, error);
}

struct Child {
  const RunJob* job;
  Clock::time_point start;
  int64_t first_step = 0;  // the step it resumed from
};

// The last step `dir`'s metrics.jsonl logged (0 when none).
int64_t logged_step(const std::string& dir) {
  const std::vector<MetricsRow> rows = read_metrics(RunFolder(dir).metrics_path());
  return rows.empty() ? 0 : rows.back().step;
}

// The whole sweep at a glance, printed after each run ends: runs done, running and left, and
// the time left at the pace of the training steps taken so far (each run's evaluation is paid
// in that pace, as it was for the runs already done).
class SweepProgress {
 public:
  explicit SweepProgress(const std::vector<RunJob>& jobs) : begin_(Clock::now()) {
    for (const RunJob& j : jobs) total_ += std::max<int64_t>(1, j.steps);
  }
  // A run that did not train here (skipped, refused, busy): its steps leave the sweep's work.
  void not_run(const RunJob& j) { total_ -= std::max<int64_t>(1, j.steps); }
  // A run that started at `first_step`: the steps before it are not this sweep's work either.
  void resumed(const RunJob& j, int64_t first_step) {
    total_ -= std::min(first_step, std::max<int64_t>(1, j.steps) - 1);
  }
  void ended(const RunJob& j, int64_t first_step) {
    done_ +=
        std::max<int64_t>(1, j.steps) - std::min(first_step, std::max<int64_t>(1, j.steps) - 1);
    ++ended_;
  }
  std::string line(const std::map<pid_t, Child>& running, size_t left) const {
    int64_t done = done_;
    for (const auto& [pid, c] : running)
      done += std::max<int64_t>(0, logged_step(c.job->dir) - c.first_step);
    const double elapsed = std::chrono::duration<double>(Clock::now() - begin_).count();
    std::string eta = "";
    if (done > 0 && total_ > done) {
      eta = fmt::format(", about {} left",
                        format_duration(elapsed * static_cast<double>(total_ - done) /
                                        static_cast<double>(done)));
    }
    return fmt::format("sweep: {} ended, {} running, {} left; {} elapsed{}\n", ended_,
                       running.size(), left, format_duration(elapsed), eta);
  }

 private:
  Clock::time_point begin_;
  int64_t total_ = 0, done_ = 0, ended_ = 0;
};

void run_children(const std::vector<RunJob>& jobs, const ScheduleOptions& o, Counter& n) {
  std::map<pid_t, Child> running;
  SweepProgress progress(jobs);
  size_t next = 0, started = 0;
  bool forwarded = false;
  const int64_t total = static_cast<int64_t>(jobs.size());
  while (next < jobs.size() || !running.empty()) {
    while (next < jobs.size() && static_cast<int64_t>(running.size()) < o.jobs &&
           !stop_requested().load()) {
      const RunJob& job = jobs[next++];
      const auto lock = claim_counted(job, o, n);
      if (!lock) {
        progress.not_run(job);
        continue;
      }
      ++started;
      if (!o.quiet) {
        say("[{}/{}] {}{}\n", started, total, job.name,
            o.jobs > 1 ? fmt::format(" (log: {})", (fs::path(job.dir) / "log.txt").string()) : "");
      }
      const int64_t first_step = logged_step(job.dir);
      progress.resumed(job, first_step);
      const pid_t pid = start_child(job, *lock, o);
      running[pid] = {&job, Clock::now(), first_step};
      // `lock` closes here: the lock now lives exactly as long as the child.
    }
    if (running.empty()) break;
    int status = 0;
    const pid_t done = ::waitpid(-1, &status, WNOHANG);
    if (done == 0 || (done < 0 && errno == EINTR)) {
      if (stop_requested().load() && !forwarded) {
        for (const auto& [pid, c] : running) ::kill(pid, SIGTERM);
        forwarded = true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    if (done < 0) break;
    auto it = running.find(done);
    if (it == running.end()) continue;
    child_ended(*it->second.job, status,
                std::chrono::duration<double>(Clock::now() - it->second.start).count(), o, n);
    progress.ended(*it->second.job, it->second.first_step);
    running.erase(it);
    if (!o.quiet && (!running.empty() || next < jobs.size()))
      say("{}", progress.line(running, jobs.size() - next));
  }
  n.out.interrupted += static_cast<int64_t>(jobs.size() - next);
}

}  // namespace

void schedule_runs(const std::vector<RunJob>& jobs, const ScheduleOptions& o, SweepOutcome& out) {
  Counter n{o, out};
  if (o.group)
    run_data_parallel(jobs, o, n);
  else if (o.in_process)
    run_in_process(jobs, o, n);
  else
    run_children(jobs, o, n);
}

}  // namespace hybridlab
