#pragma once
// Running prepared run folders: in child processes (--jobs N at a time) or in this process.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hybridlab/run.h"

namespace hybridlab {

/// One run to execute: where, with which source config, and who it is.
struct RunJob {
  std::string name;
  std::string dir;
  std::string source;  ///< source.yaml text (run_source_yaml)
  RunIdentity id;
  std::string crash;  ///< its build crashed in the pre-flight check: record this, do not start
  int64_t steps = 0;  ///< its train.steps, for the sweep's progress line (0: unknown)
};

struct ScheduleOptions {
  int64_t jobs = 1;
  bool in_process = false;
  bool train_only = false;
  bool quiet = false;
  int64_t child_threads = 0;  ///< >0: each child's runtime.threads (and BLAS threads)
  std::string exe;            ///< the CLI binary run as `exe run-folder DIR --lock-fd N ...`
  /// One rank of a data-parallel job: every job runs in this process on all ranks together
  /// (child_threads = this rank's threads); rank 0 claims, the others follow.
  ProcessGroup* group = nullptr;
};

/// For each job in order: takes its lock (a folder locked by a live process is a recorded
/// failure naming it), applies plan_run (skip, refuse, fresh, resume) and, unless skipped or
/// refused, executes it. Children get the lock's descriptor, their own process group (the parent
/// forwards Ctrl-C / SIGTERM once, so each child checkpoints and stops) and PR_SET_PDEATHSIG
/// (a child never outlives its parent). Counts go to `out`. With `group`: see ScheduleOptions;
/// the first failing run ends the sweep there, and RankLost propagates.
void schedule_runs(const std::vector<RunJob>& jobs, const ScheduleOptions& o, SweepOutcome& out);

/// The claim every entry point makes before executing a run: takes the job's lock and applies
/// the rule (prepare_run_folder). A job with `crash` set gets status `failed` with that message.
/// `lock` is set only when the run must execute now. Throws RunBusy (another live writer) and
/// UserError (the folder cannot be written).
struct RunClaim {
  RunPlan plan;
  std::unique_ptr<RunLock> lock;
};
RunClaim claim_run(const RunJob& job, bool train_only);

}  // namespace hybridlab
