#pragma once
// An experiment file read strictly: model + task + train + eval + runtime + plugins (+ sweep).
//
// read_experiment() is the one place that reads every top-level section. It records every
// problem in the config and throws one ConfigError listing them all (file:line:col, key, what
// was expected, nearest valid key). Sweep variants are validated too: each variant's config is
// read in full, so a sweep key that is not a config key is reported with a suggestion.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hybridlab/config.h"
#include "hybridlab/model.h"
#include "hybridlab/runtime.h"
#include "hybridlab/task.h"

namespace hybridlab {

struct ModelOptions;

/// `train:` — AdamW (Loshchilov & Hutter 2019) with linear warmup then cosine decay to
/// lr * min_lr_ratio, global-norm gradient clipping.
struct TrainOptions {
  int64_t steps = 200;
  int64_t batch_size = 16;
  double lr = 1e-3;
  double min_lr_ratio = 0.1;  ///< final lr = lr * min_lr_ratio
  int64_t warmup_steps = 20;
  double weight_decay = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double grad_clip = 1.0;         ///< max global L2 norm of the gradients; 0 = off
  int64_t seed = 0;               ///< model init and data order; `sweep.seeds` sets it
  int64_t eval_every = 0;         ///< steps between evals at seq_len during training; 0 = none
  int64_t checkpoint_every = 50;  ///< steps between checkpoints; 0 = only at the end / Ctrl-C
  int64_t log_every = 10;         ///< steps between plain log lines (no terminal)
};

/// `eval:` — the lengths to test and the fixed eval set at each.
struct EvalOptions {
  std::vector<int64_t> lengths;  ///< tokens; default [task.seq_len]
  int64_t examples = 128;        ///< examples per length (text: windows, capped by the corpus)
  int64_t batch_size = 16;
  int64_t max_batch_tokens = 32768;       ///< batch shrinks at long lengths to stay under this
  int64_t seed = 1234;                    ///< eval set seed (the same for every run of a sweep)
  int64_t examples_during_training = 32;  ///< examples per eval at `train.eval_every`
};

/// One axis of a sweep: a dotted config key and its values (YAML nodes, in file order).
struct SweepAxis {
  std::string key;
  std::vector<YAML::Node> values;
  Location where;
};

/// `sweep:` — grid (every combination), zip groups (lists varied together), seeds, exclude.
struct SweepOptions {
  std::vector<SweepAxis> grid;
  std::vector<std::vector<SweepAxis>> zip;  ///< each group: axes of equal length
  std::vector<int64_t> seeds;               ///< empty: one run with train.seed
  /// Partial assignments (dotted key -> value); a variant matching every entry of one is dropped.
  std::vector<std::vector<std::pair<std::string, YAML::Node>>> exclude;
  std::vector<Location> exclude_where;  ///< where each exclude entry is written
  bool empty() const { return grid.empty() && zip.empty() && seeds.empty(); }
};

struct Experiment {
  std::string name;  ///< `name:`, default: the file stem
  std::string description;
  std::shared_ptr<ModelOptions> model;
  std::shared_ptr<Task> task;
  TrainOptions train;
  EvalOptions eval;
  RuntimeOptions runtime;
  SweepOptions sweep;
  Config config;  ///< the config read (its resolved() is what the run used)
};

/// Reads and validates every section of `cfg`; throws one ConfigError listing every problem.
/// `validate_sweep` also reads every sweep variant (off when reading one variant of a sweep).
Experiment read_experiment(Config cfg, bool validate_sweep = true);

/// The lengths the model must serve: task.seq_len for training, the longest of it and
/// eval.lengths as the maximum (tokens). `exp.task` must be set.
ModelBuildContext model_build_context(const Experiment& exp);

/// Reads only `sweep:` (records problems in its config).
SweepOptions read_sweep_options(Section s);

/// The experiment name for a file: `name:` if set, else the file stem ("quickstart").
std::string experiment_name(const Config& cfg);

}  // namespace hybridlab
