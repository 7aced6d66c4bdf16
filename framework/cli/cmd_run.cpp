// `hybridlab run | train | eval | sweep | report`: the main job.

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>

#include "cli_numbers.h"
#include "commands.h"
#include "hybridlab/analysis.h"
#include "hybridlab/distributed.h"
#include "hybridlab/experiment.h"
#include "hybridlab/report.h"
#include "hybridlab/run.h"
#include "hybridlab/runtime.h"
#include "hybridlab/sweep.h"
#include "hybridlab/trainer.h"
#include "util/fault_context.h"

namespace hybridlab::cli {
namespace {
namespace fs = std::filesystem;

// Counts of processes and hosts, with a bound far above any host or job this runs on.
constexpr int64_t kMaxCount = 1024;
const CLI::Validator kCountRange = integer_in(1, kMaxCount);
// An empty --runs-dir would put run folders in the working directory, beside the sources.
const CLI::Validator kFolderName(
    [](std::string& text) -> std::string {
      return text.empty() ? "an empty folder name (use '.' for the working directory)" : "";
    },
    "FOLDER");

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
  LaunchOptions launch;  ///< nproc_per_node > 0: start that many ranks of this command
};

// This process's command line, for the ranks: the same command without the launcher's options,
// run by this very binary.
std::vector<std::string> own_command() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::vector<std::string> argv;
  for (std::string arg; std::getline(in, arg, '\0');) argv.push_back(arg);
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!argv.empty() && !ec) argv[0] = exe.string();
  return rank_command(argv);
}

void add_common_run_options(CLI::App* c, RunArgs& a) {
  c->add_option("experiment", a.file, "Experiment YAML file (e.g. experiments/quickstart.yaml)")
      ->required()
      ->check(CLI::ExistingFile);
  c->add_option(
      "overrides", a.overrides,
      "Dotted overrides applied before the sweep, e.g. train.steps=100 model.d_model=128");
  c->add_option("--runs-dir", a.runs_dir, "Folder of run folders: <runs-dir>/<experiment>/<run>/")
      ->check(kFolderName)
      ->capture_default_str();
  c->add_option(
       "--jobs,-j", a.jobs,
       "Variants trained at once, each in its own process; the threads are split between them")
      ->check(kCountRange)
      ->capture_default_str();
  c->add_option("--shard", a.shard,
                "Run only slice i of n (0 <= i < n) of the variants, round robin, e.g. for SLURM: "
                "--shard $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT");
  c->add_option("--only", a.only,
                "Run only the named variant, in this process (the same rules for its folder as "
                "every run: finished is final, a changed config restarts an interrupted run)");
  c->add_flag("--in-process", a.in_process,
              "Run variants in this process instead of child processes (no crash isolation)");
  c->add_flag("--quiet,-q", a.quiet, "No progress output");
  a.launch.nproc_per_node = 0;
  const char* dp = "Data parallel (torchrun's options)";
  c->add_option(
       "--nproc-per-node", a.launch.nproc_per_node,
       "Train each run on N ranks of this host (data parallel over c10d Gloo; "
       "train.batch_size is the global batch, split between them): starts N processes "
       "of this command with torchrun's RANK, WORLD_SIZE, MASTER_ADDR, ... (docs/cluster.md)")
      ->check(kCountRange)
      ->group(dp);
  c->add_option("--nnodes", a.launch.nnodes,
                "Hosts of the data-parallel job (run the same command on each, with --node-rank)")
      ->check(kCountRange)
      ->capture_default_str()
      ->group(dp);
  c->add_option("--node-rank", a.launch.node_rank, "This host's index, 0 .. nnodes-1")
      ->check(integer_in(0, kMaxCount - 1))
      ->capture_default_str()
      ->group(dp);
  c->add_option("--master-addr", a.launch.master_addr, "Address of the host of rank 0")
      ->capture_default_str()
      ->group(dp);
  c->add_option("--master-port", a.launch.master_port,
                "Port of rank 0's TCPStore (default: a free port on one host, 29500 on several)")
      ->check(integer_in(1, 65535))
      ->group(dp);
}

// `--nproc-per-node N`: checks what the ranks would refuse, then starts them and exits with
// their result.
[[noreturn]] void launch(const RunArgs& a, const RunRequest& req);

[[noreturn]] void exit_with(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  std::exit(code);
}

ReportFiles print_report(const std::string& dir) {
  const ReportFiles f = write_report(dir);
  fmt::print("\n{}\n", f.markdown_text);
  fmt::print("summary: {}\n         {}\n         {}\n", f.csv, f.by_variant_csv, f.markdown);
  if (!f.claims_csv.empty()) fmt::print("claims:  {}\n", f.claims_csv);
  for (const auto& p : f.plots) fmt::print("plot:    {}\n", p);
  return f;
}

// `report.analysis`: the knock-out analysis of every finished run not analysed yet with the same
// measurements, `jobs` runs at a time. False when one failed (each is printed).
bool analyze_finished_runs(const std::string& experiment_dir, int64_t jobs, bool quiet) {
  const ReportRequests asked = read_report_requests(experiment_dir);
  if (!asked.analysis) return true;
  AnalyzeOptions o = asked.analyze;
  o.quiet = quiet;
  o.head_stats = false;  // the report summarises knock-outs; `analyze RUN` gives the rest
  o.plots = false;
  const ExperimentAnalysis done = analyze_experiment(experiment_dir, o, jobs, own_command()[0]);
  if (!quiet && done.analysed + static_cast<int64_t>(done.failures.size()) > 0) {
    fmt::print("analysis: {} analysed, {} up to date, {} failed\n", done.analysed, done.up_to_date,
               done.failures.size());
  }
  for (const auto& [name, why] : done.failures) fmt::print("  ANALYSIS FAILED {}: {}\n", name, why);
  return done.failures.empty();
}

void launch(const RunArgs& a, const RunRequest& req) {
  const LaunchOptions& l = a.launch;
  if (read_distributed_env().active()) {
    throw UserError(
        "--nproc-per-node inside a data-parallel rank (WORLD_SIZE is set): start the "
        "ranks once, with either hybridlab's launcher or torchrun");
  }
  if (l.node_rank >= l.nnodes) {
    throw UserError(fmt::format("--node-rank {} is not below --nnodes {}", l.node_rank, l.nnodes));
  }
  if (!distributed_available()) {
    throw UserError(
        "this hybridlab was built without c10d Gloo, so it cannot train on several ranks; "
        "install libgloo-dev (scripts/setup.sh does) and rebuild");
  }
  LaunchOptions o = l;
  o.experiment_dir = check_data_parallel(req, l.nnodes * l.nproc_per_node);
  o.command = own_command();
  exit_with(launch_ranks(o));
}

void do_run(const RunArgs& a, bool train_only) {
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
  if (a.launch.nproc_per_node > 0) launch(a, req);
  // A rank is started with its peers by a launcher that forwards its stop: one stop per rank.
  install_stop_handlers(!read_distributed_env().active());
  try {
    const SweepOutcome out = run_experiment(req);
    bool analysis_failed = false;
    // A child or a single run (--only) leaves the report to its parent; of several data-parallel
    // ranks, rank 0 reports.
    const bool reports = a.only.empty() && read_distributed_env().rank == 0;
    if (reports) {
      fmt::print("\n{} finished, {} skipped (finished before), {} failed, {} interrupted\n",
                 out.finished, out.skipped, out.failed, out.interrupted);
      for (const auto& [name, err] : out.failures) fmt::print("  FAILED {}: {}\n", name, err);
      if (!train_only && out.interrupted == 0 &&
          !analyze_finished_runs(out.experiment_dir, a.jobs, a.quiet))
        analysis_failed = true;
      if (!train_only && !a.no_report && out.finished + out.skipped + out.failed > 0) {
        print_report(out.experiment_dir);
      }
    }
    if (out.interrupted > 0) {
      if (reports) fmt::print("interrupted: rerun the same command to resume\n");
      exit_with(130);
    }
    if (out.failed > 0 || analysis_failed) exit_with(1);
  } catch (const Interrupted& e) {
    std::fflush(stdout);
    std::cerr << "interrupted: " << e.what() << "\n";
    exit_with(130);
  }
}

// `run`: train and evaluate every variant, then the report.
void add_run_command(CLI::App& app) {
  auto run_args = std::make_shared<RunArgs>();
  auto* run = app.add_subcommand(
      "run",
      "Train and evaluate every variant of an experiment (its sweep), then write and print the "
      "report.\nRuns go to <runs-dir>/<experiment>/<run>/ (source.yaml, config.yaml, "
      "metrics.jsonl, checkpoint/, results.json). Finished runs are skipped and never "
      "overwritten; interrupted ones resume from their checkpoint (afresh if their config "
      "changed); a run folder has one writer at a time; a crashing variant is recorded as failed "
      "and the sweep goes on. Ctrl-C checkpoints and stops.\n"
      "Exit code: 0 all runs finished, 1 some failed, 2 bad input, 130 interrupted.");
  add_common_run_options(run, *run_args);
  run->add_flag("--no-report", run_args->no_report, "Do not write or print the report at the end");
  run->callback([run_args] { do_run(*run_args, false); });
}

// `train`: the same without the final evaluation.
void add_train_command(CLI::App& app) {
  auto train_args = std::make_shared<RunArgs>();
  auto* train = app.add_subcommand(
      "train",
      "Train every variant of an experiment without the final evaluation (see `eval`); runs end "
      "`trained`. Finished and trained runs are skipped and never overwritten");
  add_common_run_options(train, *train_args);
  train->callback([train_args] { do_run(*train_args, true); });
}

// `eval RUN_DIR`: evaluate a trained run, with --lengths and --variant.
void add_eval_command(CLI::App& app) {
  struct EvalArgs {
    std::string run_dir;
    std::vector<int64_t> lengths;
    std::vector<std::string> variants;
  };
  auto eval_args = std::make_shared<EvalArgs>();
  auto* eval = app.add_subcommand(
      "eval",
      "Evaluate a trained or finished run from its checkpoint; the eval results are added to its "
      "results.json (the training summary is kept) and the run ends `finished`");
  eval->add_option("run_dir", eval_args->run_dir,
                   "Run folder, e.g. runs/quickstart/pattern-GGGA_scheme-rope")
      ->required()
      ->check(CLI::ExistingDirectory);
  eval->add_option("--lengths", eval_args->lengths,
                   "Eval lengths instead of eval.lengths, e.g. --lengths 256 512 1024")
      ->check(integer_in(1, std::numeric_limits<int64_t>::max()))
      ->delimiter(',');
  eval->add_option(
      "--variant", eval_args->variants,
      "Evaluate the trained weights with settings changed, as the variant NAME (repeatable): "
      "NAME=KEY=VALUE[,KEY=VALUE...], e.g. --variant "
      "'ntk=model.attention.position.rope_scaling={type: ntk, factor: 4}'. Only positional-"
      "scheme settings, attention windows, chunk sizes, eval.stride and eval.scoring may change "
      "(docs/experiments.md). "
      "The run's own results are left as they are; the variant is stored beside them");
  eval->callback([eval_args] {
    // A crash in plugin code after its probe ends with a line naming the layer, not a bare signal;
    // results.json is written atomically, so the one before stays.
    install_fatal_signal_report("eval");
    std::vector<EvalVariant> variants;
    for (const auto& text : eval_args->variants) {
      variants.push_back(parse_eval_variant(text));
      for (size_t i = 0; i + 1 < variants.size(); ++i) {
        if (variants[i].name == variants.back().name)
          throw UserError(fmt::format("--variant: '{}' is given twice; name each variant once",
                                      variants.back().name));
      }
    }
    eval_run_folder(eval_args->run_dir, eval_args->lengths, variants);
    fmt::print("wrote {}\n", (fs::path(eval_args->run_dir) / "results.json").string());
  });
}

// `run-folder` (hidden): what `run` starts in each child process.
void add_run_folder_command(CLI::App& app) {
  struct FolderArgs {
    std::string dir;
    int lock_fd = -1;
    bool train_only = false;
    bool quiet = false;
    int64_t threads = 0;
  };
  auto folder_args = std::make_shared<FolderArgs>();
  auto* folder = app.add_subcommand(
      "run-folder", "Execute one run folder prepared by `run` (its child processes use this)");
  folder->group("");  // not listed in --help: an internal entry point
  folder->add_option("run_dir", folder_args->dir, "Run folder holding source.yaml and run.json")
      ->required();
  folder->add_option("--lock-fd", folder_args->lock_fd,
                     "Inherited descriptor holding the run's lock (else the lock is taken)");
  folder->add_flag("--train-only", folder_args->train_only, "No final eval");
  folder->add_flag("--quiet,-q", folder_args->quiet, "No progress output");
  folder->add_option("--threads", folder_args->threads, "Overrides runtime.threads");
  folder->callback([folder_args] {
    install_stop_handlers(/*second_signal_exits=*/false);  // see install_stop_handlers
    const FolderArgs& a = *folder_args;
    // A crash in plugin code: the parent records the signal and, from this note, the layer.
    install_fatal_signal_note(RunFolder(a.dir).fault_note_path());
    // A step that never ends must not keep a stopped or orphaned child alive with the lock.
    end_after_stop_grace(a.dir, stop_grace_seconds());
    const auto lock = a.lock_fd >= 0 ? std::make_unique<RunLock>(RunLock::adopt(a.lock_fd, a.dir))
                                     : std::make_unique<RunLock>(a.dir);
    ExecuteOptions opts;
    opts.train_only = a.train_only;
    opts.quiet = a.quiet;
    opts.threads = a.threads;
    try {
      execute_run_folder(RunFolder(a.dir), opts);
    } catch (const Interrupted& e) {
      std::fflush(stdout);
      std::cerr << "interrupted: " << e.what() << "\n";
      exit_with(130);
    }
  });
}

// `sweep list|expand`: the variants of a sweep and their states.
void add_sweep_command(CLI::App& app) {
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
        ->check(kFolderName)
        ->capture_default_str();
    c->add_option("--shard", sweep_args->shard, "Only slice i of n, as `run --shard` would run it");
    c->callback([sweep_args, expand] {
      Config cfg = load_experiment_config(sweep_args->file, sweep_args->overrides);
      check_experiment(cfg, sweep_args->file);  // refuses what `run` would refuse
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
        fmt::print("{:<48} {}\n", v.name, run_state_name(RunFolder(dir).status().state));
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
}

// `report DIR`: the report of a folder of runs.
void add_report_command(CLI::App& app) {
  auto report_dir = std::make_shared<std::string>();
  auto report_check = std::make_shared<bool>(false);
  auto* report = app.add_subcommand(
      "report",
      "Write summary.csv, summary_by_variant.csv, summary.md, claims.csv and plots/*.png for a "
      "folder of runs and print the summary.\nSeeds of a variant are shown as mean ± 95% "
      "confidence interval; every row carries its health (still learning, at chance, diverged); "
      "the experiment's `expect:` claims are judged holds / fails / inconclusive.\n"
      "Exit code: 0, or 1 with --check when a claim fails; 2 bad input.");
  report->add_option("experiment_dir", *report_dir, "Folder of runs, e.g. runs/quickstart")
      ->required()
      ->check(CLI::ExistingDirectory);
  report->add_flag("--check", *report_check,
                   "Exit with code 1 when a claim fails (inconclusive claims do not fail)");
  report->callback([report_dir, report_check] {
    const ReportFiles f = print_report(*report_dir);
    if (*report_check && f.claims_failed > 0) {
      fmt::print(stderr, "{} claim(s) fail\n", f.claims_failed);
      exit_with(1);
    }
  });
}

}  // namespace

void add_run_commands(CLI::App& app) {
  add_run_command(app);
  add_train_command(app);
  add_eval_command(app);
  add_run_folder_command(app);
  add_sweep_command(app);
  add_report_command(app);
}

}  // namespace hybridlab::cli
