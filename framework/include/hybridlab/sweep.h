#pragma once
// Sweep expansion, run naming, sharding and running a whole experiment.
//
// Expansion order is deterministic: grid axes in file order (the last varies fastest), then zip
// groups, then seeds; `exclude` entries drop variants. Run names join `<short key>-<value>` parts
// of the varied values with '_' (short key: the last component of the dotted key, or more when
// two varied keys share it), e.g. "pattern-GGGA_scheme-rope_seed-0"; an experiment without sweep
// has one run named "main".

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "hybridlab/config.h"
#include "hybridlab/experiment.h"

namespace hybridlab {

/// One run of a sweep: its name and the dotted assignments that make it.
struct Variant {
  std::string name;
  std::vector<std::pair<std::string, YAML::Node>> assignments;  ///< in expansion order
  std::vector<std::pair<std::string, std::string>> labels;      ///< short key -> value text
};

/// Every variant of `sweep` (one unnamed "main" variant when it is empty). Throws ConfigError for
/// zip groups of unequal length or two variants with the same name.
std::vector<Variant> expand_sweep(const SweepOptions& sweep);

/// A copy of `base` with the variant's assignments applied (locations point at the sweep).
Config variant_config(const Config& base, const Variant& v, const SweepOptions& sweep);

/// Parses "i/n" (0 <= i < n). Throws UserError otherwise.
std::pair<int64_t, int64_t> parse_shard(const std::string& text);

/// The variants of shard i of n: those whose index % n == i (round robin, so shards balance).
std::vector<Variant> shard_variants(const std::vector<Variant>& all, int64_t i, int64_t n);

/// State of a run folder, from its status.json.
enum class RunState { kNew, kRunning, kFinished, kFailed, kInterrupted };
RunState run_state(const std::string& run_dir);
std::string run_state_name(RunState s);

/// Writes run_dir/status.json atomically: {"state": ..., "error": ..., ...}.
void write_run_status(const std::string& run_dir, RunState state, const std::string& error = "",
                      double wall_s = 0);

struct RunRequest {
  std::string experiment_file;
  std::vector<std::string> overrides;  ///< command-line key=value, applied before the sweep
  std::string runs_dir = "runs";
  int64_t jobs = 1;
  int64_t shard_index = 0, shard_count = 1;
  std::string only;         ///< run just this variant, in this process (used by child processes)
  std::string self_exe;     ///< the CLI binary, for child processes ("" = /proc/self/exe)
  bool in_process = false;  ///< run variants in this process (no crash isolation)
  bool report = true;       ///< write and print the report at the end
  bool quiet = false;
  bool train_only = false;  ///< `hybridlab train`: skip the final eval and the report
};

struct SweepOutcome {
  int64_t finished = 0, skipped = 0, failed = 0, interrupted = 0;
  std::string experiment_dir;
  std::vector<std::pair<std::string, std::string>> failures;  ///< run name -> error
};

/// Runs (train + eval) every variant of this shard not yet finished, each in a child process
/// (`--jobs N` at a time, threads split between them), records failures and goes on.
SweepOutcome run_experiment(const RunRequest& req);

/// Train + eval of one variant in this process (`train_only`: no eval): writes config.yaml,
/// metrics.jsonl, checkpoint/, results.json, status.json under run_dir. Throws on failure
/// (status.json says why).
void run_single(const Config& variant_cfg, const Variant& variant, const std::string& experiment,
                const std::string& run_dir, bool quiet = false, bool train_only = false);

/// Evaluates a trained run again from its folder (source.yaml + checkpoint), optionally at other
/// lengths, and rewrites its results.json. Throws UserError when the folder holds no checkpoint.
void eval_run(const std::string& run_dir, const std::vector<int64_t>& lengths = {});

/// Loads `path` and applies `key=value` overrides in order.
Config load_experiment_config(const std::string& path, const std::vector<std::string>& overrides);

}  // namespace hybridlab
