// `hybridlab analyze RUN_DIR`: knock-outs and head statistics of a trained run.

#include <fmt/core.h>

#include <cstdlib>
#include <filesystem>
#include <limits>
#include <memory>

#include "cli_numbers.h"
#include "commands.h"
#include "hybridlab/analysis.h"
#include "hybridlab/error.h"
#include "util/fault_context.h"

namespace hybridlab::cli {

namespace {

struct AnalyzeArgs {
  std::string run_dir;
  AnalyzeOptions opts;
  bool no_plots = false, no_heads = false;
  int64_t jobs = 1;
};

// One run folder, or every finished run of an experiment's folder (each in its own process).
void run_analyze(AnalyzeArgs& a) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(a.run_dir)) {
    throw UserError(fmt::format(
        "'{}' is not a folder; give a run folder, e.g. runs/<experiment>/<run>", a.run_dir));
  }
  a.opts.plots = !a.no_plots;
  a.opts.head_stats = !a.no_heads;
  if (!fs::exists(fs::path(a.run_dir) / "status.json")) {
    std::error_code ec;
    const std::string exe = fs::read_symlink("/proc/self/exe", ec).string();
    const ExperimentAnalysis done =
        analyze_experiment(a.run_dir, a.opts, a.jobs, ec ? std::string("hybridlab") : exe);
    fmt::print("{} analysed, {} up to date, {} not trained, {} failed\n", done.analysed,
               done.up_to_date, done.not_trained, done.failures.size());
    for (const auto& [name, why] : done.failures) fmt::print("  FAILED {}: {}\n", name, why);
    if (!done.failures.empty()) std::exit(1);
    return;
  }
  const AnalysisResult r = analyze_run(a.run_dir, a.opts);
  if (a.opts.quiet) return;
  fmt::print("{}\n\n", r.summary);
  fmt::print("wrote {} files in {} ({:.0f} s)\n", r.files.size(),
             (fs::path(a.run_dir) / "analysis").string(), r.seconds);
}

}  // namespace

void add_analyze_command(CLI::App& app) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  auto args = std::make_shared<AnalyzeArgs>();
  auto* cmd = app.add_subcommand(
      "analyze",
      "Measure on one trained run how much each part of its depth matters: zero each layer's "
      "mixer, reset each recurrent mixer's state every few tokens, remove each attention layer's "
      "position information, and restrict each attention layer to sliding windows (its reach); "
      "plus per-head statistics of attention weights and gates. Writes RUN_DIR/analysis/ "
      "(CSV tables, heatmaps, summary.md); docs/analysis.md explains each measure");
  cmd->add_option(
         "run_dir", args->run_dir,
         "Finished run folder, e.g. runs/quickstart/task-mqar_layers-GA_scheme-rope_seed-0; "
         "or an experiment's folder of runs (runs/quickstart): every finished run not "
         "analysed yet with the same measurements, --jobs at a time")
      ->required();
  cmd->add_option("-j,--jobs", args->jobs,
                  "Runs analysed at once, each in its own process (a folder of runs only)")
      ->check(CLI::Range(1, 1024));
  cmd->add_flag("-q,--quiet", args->opts.quiet, "No progress output");
  cmd->add_option("--lengths", args->opts.lengths,
                  "Eval lengths (tokens) instead of the run's eval.lengths, e.g. --lengths 64,256")
      ->check(integer_in(1, kMax))
      ->delimiter(',');
  cmd->add_option("--examples", args->opts.examples,
                  "Eval examples per length (default: the run's eval.examples, the same examples "
                  "as its results)")
      ->check(integer_in(1, kMax));
  cmd->add_option("--kinds", args->opts.kinds,
                  "Knock-outs to run, comma-separated: mixer, state_reset, position, reach "
                  "(default: all)")
      ->delimiter(',');
  cmd->add_option("--state-window", args->opts.state_window,
                  "Tokens between recurrent state resets (default: each layer's chunk length)")
      ->check(integer_in(1, kMax));
  cmd->add_option("--windows", args->opts.reach_windows,
                  "Attention windows tried for the reach (default: 16,64,256,... below the "
                  "longest length)")
      ->check(integer_in(1, kMax))
      ->delimiter(',');
  cmd->add_option("--tolerance", args->opts.reach_tolerance,
                  "Damage (primary-metric units) within which a window counts as sufficient")
      ->check(number_in(0, std::numeric_limits<double>::infinity()))
      ->capture_default_str();
  cmd->add_flag("--no-heads", args->no_heads, "Skip the per-head statistics");
  cmd->add_flag("--no-plots", args->no_plots, "Write the tables only (no gnuplot)");
  cmd->callback([args] {
    install_fatal_signal_report("analyze");  // a plugin's crash is named (util/fault_context.h)
    run_analyze(*args);
  });
}

}  // namespace hybridlab::cli
