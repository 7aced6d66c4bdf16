// run_experiment: expand the sweep, check every build, claim and execute each run folder.

#include <fmt/format.h>

#include <filesystem>

#include "hybridlab/distributed.h"
#include "hybridlab/experiment.h"
#include "hybridlab/run.h"
#include "hybridlab/runtime.h"
#include "hybridlab/trainer.h"
#include "run/init_from.h"
#include "run/preflight.h"
#include "run/scheduler.h"
#include "util/atomic_file.h"
#include "util/console.h"

namespace hybridlab {
namespace fs = std::filesystem;

namespace {

void ensure_writable(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    throw UserError(
        fmt::format("cannot create the runs folder '{}': {}; choose another with --runs-dir",
                    dir.string(), ec.message()));
  }
  const fs::path probe = dir / ".write_test";
  try {
    write_file_atomic(probe.string(), "ok\n");
  } catch (const UserError& e) {
    throw UserError(
        fmt::format("the runs folder '{}' is not writable ({}); choose another with "
                    "--runs-dir",
                    dir.string(), e.what()));
  }
  fs::remove(probe, ec);
}

std::string self_exe() {
  std::error_code ec;
  const fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? "hybridlab" : p.string();
}

// `run --only NAME`: the same claim and the same execution, in this process; a refusal or a busy
// folder is an error (exit 2) rather than a recorded failure.
void run_only_here(const RunJob& job, const RunRequest& req, SweepOutcome& out) {
  RunClaim c = claim_run(job, req.train_only);
  if (c.plan.action == RunAction::kSkip) {
    if (!req.quiet) say("{}: {}\n", job.name, c.plan.message);
    out.skipped = 1;
    return;
  }
  if (!c.lock) throw UserError(c.plan.message);
  if (!c.plan.message.empty() && !req.quiet) say("{}: {}\n", job.name, c.plan.message);
  ExecuteOptions opts;
  opts.train_only = req.train_only;
  opts.quiet = req.quiet;
  execute_run_folder(RunFolder(job.dir), opts);
  out.finished = 1;
}

}  // namespace

void check_batch_split(const Config& cfg, const std::vector<Variant>& variants,
                       const SweepOptions& sweep, int64_t world_size) {
  for (const auto& v : variants) {
    const Config c = variant_config(cfg, v, sweep);
    const YAML::Node node = c.lookup("train.batch_size");
    const int64_t batch = node.IsDefined() ? node.as<int64_t>() : TrainOptions{}.batch_size;
    if (batch % world_size == 0) continue;
    const std::string where =
        node.IsDefined() ? c.location("train.batch_size").str() + ": " : std::string();
    throw ConfigError(fmt::format(
        "{}train.batch_size: {} (run '{}') is not a multiple of the {} ranks; it is the global "
        "batch, split evenly between them",
        where, batch, v.name, world_size));
  }
}

namespace {

// The variants this request runs: `only`, or this shard.
std::vector<Variant> requested_variants(const RunRequest& req, const SweepOptions& sweep) {
  const std::vector<Variant> all = expand_sweep(sweep);
  std::vector<Variant> mine;
  if (!req.only.empty()) {
    for (const auto& v : all) {
      if (v.name == req.only) mine.push_back(v);
    }
    if (mine.empty()) {
      std::string names;
      for (const auto& v : all) names += "\n  " + v.name;
      throw UserError(fmt::format("--only '{}': no such run in {}; its runs are:{}", req.only,
                                  req.experiment_file, names));
    }
  } else {
    mine = shard_variants(all, req.shard_index, req.shard_count);
  }
  return mine;
}

}  // namespace

namespace {

// Every run of a data-parallel job uses all ranks: runs cannot also run side by side.
void refuse_jobs(const RunRequest& req, int64_t world_size) {
  if (req.jobs <= 1) return;
  throw UserError(fmt::format(
      "--jobs {} with {} data-parallel ranks: every run uses all ranks, one run at a time; "
      "drop --jobs",
      req.jobs, world_size));
}

// The train.init_from source of every run that will start afresh, checked before anything is
// written (a run with a checkpoint resumes from it; a finished run is skipped).
void check_init_sources(const Config& cfg, const std::vector<Variant>& mine,
                        const SweepOptions& sweep, const fs::path& exp_dir,
                        const std::string& config_dir) {
  for (const auto& v : mine) {
    const RunFolder f((exp_dir / v.name).string());
    if (f.status().state == RunState::kFinished || fs::exists(f.checkpoint_path())) continue;
    try {
      check_init_from(variant_config(cfg, v, sweep), config_dir);
    } catch (const ConfigError& e) {
      if (mine.size() == 1) throw;
      throw ConfigError(fmt::format("run '{}': {}", v.name, e.what()));
    }
  }
}

}  // namespace

std::string check_data_parallel(const RunRequest& req, int64_t world_size) {
  refuse_jobs(req, world_size);
  Config cfg = load_experiment_config(req.experiment_file, req.overrides);
  const Experiment exp = read_experiment(cfg);
  const std::vector<Variant> mine = requested_variants(req, exp.sweep);
  check_batch_split(cfg, mine, exp.sweep, world_size);
  // Every model built once (a bad scheme, device or corpus is one error here, not one per
  // rank); a build that crashes is recorded as that run's failure later, by rank 0.
  preflight_variants(
      cfg, mine, exp.sweep,
      fs::absolute(fs::path(req.experiment_file)).parent_path().lexically_normal().string());
  return (fs::path(req.runs_dir) / exp.name).string();
}

void check_experiment(const Config& cfg, const std::string& experiment_file) {
  const Experiment exp = read_experiment(cfg);
  const std::vector<Variant> all = expand_sweep(exp.sweep);
  const std::string config_dir =
      fs::absolute(fs::path(experiment_file)).parent_path().lexically_normal().string();
  const std::map<std::string, std::string> crashed =
      preflight_variants(cfg, all, exp.sweep, config_dir, false);
  // `run` records such a build as that run's failure and runs the others; a command that only
  // reads the experiment has nothing else to do, so the first one is its error.
  if (!crashed.empty()) {
    const auto& [name, why] = *crashed.begin();
    throw PluginError(all.size() == 1 ? why : fmt::format("run '{}': {}", name, why));
  }
}

SweepOutcome run_experiment(const RunRequest& req) {
  SweepOutcome out;
  Config cfg = load_experiment_config(req.experiment_file, req.overrides);
  const Experiment exp = read_experiment(cfg);
  const std::vector<Variant> mine = requested_variants(req, exp.sweep);
  const fs::path exp_dir = fs::path(req.runs_dir) / exp.name;
  out.experiment_dir = exp_dir.string();
  const std::string config_dir =
      fs::absolute(fs::path(req.experiment_file)).parent_path().lexically_normal().string();

  // One rank of a data-parallel job: checked before anything is written; rank 0 writes.
  const DistributedEnv denv = read_distributed_env();
  std::unique_ptr<ProcessGroup> group;
  if (denv.active()) {
    refuse_jobs(req, denv.world_size);
    check_batch_split(cfg, mine, exp.sweep, denv.world_size);
    try {
      group = std::make_unique<ProcessGroup>(denv, rendezvous_timeout(),
                                             [] { return stop_requested().load(); });
    } catch (const UserError& e) {
      if (stop_requested().load()) throw Interrupted(e.what());
      throw;
    }
    group->agree(
        "experiment config",
        fmt::format("{}\nonly: {}\nshard: {}/{}\ntrain only: {}\n{}", req.experiment_file, req.only,
                    req.shard_index, req.shard_count, req.train_only, cfg.resolved_yaml()));
  }
  const bool writer = denv.rank == 0;

  std::map<std::string, std::string> crashed;
  if (req.only.empty() && writer) {
    crashed = preflight_variants(cfg, mine, exp.sweep, config_dir);
    check_init_sources(cfg, mine, exp.sweep, exp_dir, config_dir);
  }
  if (writer) {
    ensure_writable(exp_dir);
    write_expectations(exp_dir.string(), exp.expect);
    write_report_requests(exp_dir.string(), exp.report);
  }

  std::vector<RunJob> jobs;
  for (const auto& v : mine) {
    RunJob j;
    j.name = v.name;
    j.dir = (exp_dir / v.name).string();
    const Config vc = variant_config(cfg, v, exp.sweep);
    j.source = run_source_yaml(vc);
    const YAML::Node steps = vc.lookup("train.steps");
    j.steps = steps.IsDefined() && steps.IsScalar() ? steps.as<int64_t>() : exp.train.steps;
    j.id = RunIdentity{exp.name, v.name, v.labels, config_dir, v.tuned};
    const auto it = crashed.find(v.name);
    if (it != crashed.end()) j.crash = it->second;
    jobs.push_back(std::move(j));
  }
  if (!req.only.empty() && !group) {
    run_only_here(jobs[0], req, out);
    return out;
  }
  ScheduleOptions so;
  so.in_process = req.in_process;
  so.train_only = req.train_only;
  so.exe = req.self_exe.empty() ? self_exe() : req.self_exe;
  so.jobs = std::max<int64_t>(1, std::min<int64_t>(req.jobs, static_cast<int64_t>(jobs.size())));
  if (so.jobs > 1 || group) {
    // The cores are split between the runs at once, or between this host's ranks.
    const int64_t total = exp.runtime.threads > 0 ? exp.runtime.threads : hardware_threads();
    so.child_threads = std::max<int64_t>(1, total / (group ? denv.local_world_size : so.jobs));
  }
  so.group = group.get();
  so.quiet = req.quiet || !writer;
  schedule_runs(jobs, so, out);
  return out;
}

}  // namespace hybridlab
