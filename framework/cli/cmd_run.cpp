// `hybridlab run | train | eval | sweep | report`: the main job.

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>

#include "commands.h"
#include "hybridlab/experiment.h"
#include "hybridlab/report.h"
#include "hybridlab/sweep.h"
#include "hybridlab/trainer.h"

namespace hybridlab::cli {
namespace {
namespace fs = std::filesystem;

struct RunArgs {
  std::string file;
  std::vector<std::string> overrides;
  std::string runs_dir = "runs";
  int64_t jobs = 1;
  std::string shard;
  std::string only;
  bool in_process = false;
  bool no_report = false;
  bool quiet = false;
};

void add_common_run_options(CLI::App* c, RunArgs& a) {
  c->add_option("experiment", a.file, "Experiment YAML file (e.g. experiments/quickstart.yaml)")
      ->required()
      ->check(CLI::ExistingFile);
  c->add_option(
      "overrides", a.overrides,
      "Dotted overrides applied before the sweep, e.g. train.steps=100 model.d_model=128");
  c->add_option("--runs-dir", a.runs_dir, "Folder of run folders: <runs-dir>/<experiment>/<run>/")
      ->capture_default_str();
  c->add_option(
       "--jobs,-j", a.jobs,
       "Variants trained at once, each in its own process; the threads are split between them")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  c->add_option("--shard", a.shard,
                "Run only slice i of n (0 <= i < n) of the variants, round robin, e.g. for SLURM: "
                "--shard $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT");
  c->add_option("--only", a.only, "Run only the named variant, in this process");
  c->add_flag("--in-process", a.in_process,
              "Run variants in this process instead of child processes (no crash isolation)");
  c->add_flag("--quiet,-q", a.quiet, "No progress output");
}

[[noreturn]] void exit_with(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  std::exit(code);
}

void print_report(const std::string& dir) {
  const ReportFiles f = write_report(dir);
  fmt::print("\n{}\n", f.markdown_text);
  fmt::print("summary: {}\n         {}\n", f.csv, f.markdown);
  for (const auto& p : f.plots) fmt::print("plot:    {}\n", p);
}

void do_run(const RunArgs& a, bool train_only) {
  install_stop_handlers();
  RunRequest req;
  req.experiment_file = a.file;
  req.overrides = a.overrides;
  req.runs_dir = a.runs_dir;
  req.jobs = a.jobs;
  if (!a.shard.empty()) std::tie(req.shard_index, req.shard_count) = parse_shard(a.shard);
  req.only = a.only;
  req.in_process = a.in_process;
  req.quiet = a.quiet;
  req.train_only = train_only;
  try {
    const SweepOutcome out = run_experiment(req);
    if (!a.only.empty()) return;  // a child (or a single run): the parent reports
    fmt::print("\n{} finished, {} skipped (finished before), {} failed, {} interrupted\n",
               out.finished, out.skipped, out.failed, out.interrupted);
    for (const auto& [name, err] : out.failures) fmt::print("  FAILED {}: {}\n", name, err);
    if (!train_only && !a.no_report && out.finished + out.skipped + out.failed > 0) {
      print_report(out.experiment_dir);
    }
    if (out.interrupted > 0) {
      fmt::print("interrupted: rerun the same command to resume\n");
      exit_with(130);
    }
    if (out.failed > 0) exit_with(1);
  } catch (const Interrupted& e) {
    std::fflush(stdout);
    std::cerr << "interrupted: " << e.what() << "\n";
    exit_with(130);
  }
}

}  // namespace

void add_run_commands(CLI::App& app) {
  // ---- run
  auto run_args = std::make_shared<RunArgs>();
  auto* run = app.add_subcommand(
      "run",
      "Train and evaluate every variant of an experiment (its sweep), then write and print the "
      "report.\nRuns go to <runs-dir>/<experiment>/<run>/ (config.yaml, metrics.jsonl, "
      "checkpoint/, "
      "results.json). Finished runs are skipped; interrupted ones resume from their checkpoint; a "
      "crashing variant is recorded as failed and the sweep goes on. Ctrl-C checkpoints and "
      "stops.\n"
      "Exit code: 0 all runs finished, 1 some failed, 2 bad input, 130 interrupted.");
  add_common_run_options(run, *run_args);
  run->add_flag("--no-report", run_args->no_report, "Do not write or print the report at the end");
  run->callback([run_args] { do_run(*run_args, false); });

  // ---- train
  auto train_args = std::make_shared<RunArgs>();
  auto* train = app.add_subcommand(
      "train", "Train every variant of an experiment without the final evaluation (see `eval`)");
  add_common_run_options(train, *train_args);
  train->callback([train_args] { do_run(*train_args, true); });

  // ---- eval
  struct EvalArgs {
    std::string run_dir;
    std::vector<int64_t> lengths;
  };
  auto eval_args = std::make_shared<EvalArgs>();
  auto* eval = app.add_subcommand(
      "eval", "Evaluate a trained run again from its checkpoint and rewrite its results.json");
  eval->add_option("run_dir", eval_args->run_dir,
                   "Run folder, e.g. runs/quickstart/pattern-GGGA_scheme-rope")
      ->required()
      ->check(CLI::ExistingDirectory);
  eval->add_option("--lengths", eval_args->lengths,
                   "Eval lengths instead of eval.lengths, e.g. --lengths 256 512 1024")
      ->delimiter(',');
  eval->callback([eval_args] {
    eval_run(eval_args->run_dir, eval_args->lengths);
    fmt::print("wrote {}\n", (fs::path(eval_args->run_dir) / "results.json").string());
  });

  // ---- sweep list / expand
  auto* sweep = app.add_subcommand("sweep", "Show the variants of an experiment's sweep");
  sweep->require_subcommand(1);
  struct SweepArgs {
    std::string file;
    std::vector<std::string> overrides;
    std::string runs_dir = "runs";
    std::string shard;
  };
  auto sweep_args = std::make_shared<SweepArgs>();
  auto add_sweep_sub = [&](const char* name, const char* help, bool expand) {
    auto* c = sweep->add_subcommand(name, help);
    c->add_option("experiment", sweep_args->file, "Experiment YAML file")
        ->required()
        ->check(CLI::ExistingFile);
    c->add_option("overrides", sweep_args->overrides, "Dotted overrides, e.g. train.steps=100");
    c->add_option("--runs-dir", sweep_args->runs_dir, "Folder of run folders (for the run states)")
        ->capture_default_str();
    c->add_option("--shard", sweep_args->shard, "Only slice i of n, as `run --shard` would run it");
    c->callback([sweep_args, expand] {
      Config cfg = load_experiment_config(sweep_args->file, sweep_args->overrides);
      const Experiment exp = read_experiment(cfg);
      std::vector<Variant> vs = expand_sweep(exp.sweep);
      const size_t total = vs.size();
      if (!sweep_args->shard.empty()) {
        const auto [i, n] = parse_shard(sweep_args->shard);
        vs = shard_variants(vs, i, n);
      }
      fmt::print("{}: {} run(s){}\n", exp.name, vs.size(),
                 vs.size() == total ? "" : fmt::format(" of {}", total));
      for (const auto& v : vs) {
        const std::string dir = (fs::path(sweep_args->runs_dir) / exp.name / v.name).string();
        fmt::print("{:<48} {}\n", v.name, run_state_name(run_state(dir)));
        if (expand) {
          for (const auto& [k, val] : v.assignments) {
            YAML::Emitter em;
            em << YAML::Flow << val;
            fmt::print("    {} = {}\n", k, em.c_str());
          }
        }
      }
    });
  };
  add_sweep_sub("list", "List the run names (and their states under --runs-dir)", false);
  add_sweep_sub("expand", "List the runs with the dotted assignments that make each", true);

  // ---- report
  auto report_dir = std::make_shared<std::string>();
  auto* report = app.add_subcommand(
      "report",
      "Write summary.csv, summary.md and plots/*.png for a folder of runs and print the summary");
  report->add_option("experiment_dir", *report_dir, "Folder of runs, e.g. runs/quickstart")
      ->required()
      ->check(CLI::ExistingDirectory);
  report->callback([report_dir] { print_report(*report_dir); });
}

}  // namespace hybridlab::cli
