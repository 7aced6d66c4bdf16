#pragma once
// Training one run: AdamW + warmup/cosine, gradient clipping, metrics.jsonl, atomic checkpoints,
// resume, Ctrl-C, divergence detection.
//
// Run folder (runs/<experiment>/<run>/):
//   config.yaml     resolved config (written by the sweep driver / CLI)
//   metrics.jsonl   one JSON object per logged step: step, loss, lr, grad_norm, tokens_per_s
//                   (+ eval_<metric> lines at train.eval_every)
//   checkpoint/state.pt   model + optimizer + step, replaced atomically (temp file + rename)
//   results.json    written by the evaluator

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "hybridlab/distributed.h"
#include "hybridlab/error.h"
#include "hybridlab/experiment.h"
#include "hybridlab/model.h"
#include "hybridlab/run_record.h"

namespace hybridlab {

/// Thrown when Ctrl-C (SIGINT/SIGTERM) stopped training after a checkpoint was written.
class Interrupted : public UserError {
 public:
  using UserError::UserError;
  ~Interrupted() override;
};

/// Thrown when the loss becomes NaN or Inf; names the step and the last good checkpoint.
class TrainingDiverged : public UserError {
 public:
  using UserError::UserError;
  ~TrainingDiverged() override;
};

/// Thrown when a checkpoint file cannot be read (truncated, damaged, not a checkpoint): what()
/// names the file, the reason and how to restart the run that owns it; `path` and `reason` let
/// a reader of another run's checkpoint (train.init_from) say what fits there.
class CheckpointUnreadable : public UserError {
 public:
  CheckpointUnreadable(std::string path, std::string reason);
  ~CheckpointUnreadable() override;
  const std::string& path() const { return path_; }
  const std::string& reason() const { return reason_; }

 private:
  std::string path_, reason_;
};

/// The learning rate at `step` (0-based): linear warmup from lr/warmup to lr over warmup_steps,
/// then cosine decay to lr*min_lr_ratio at `steps` (Loshchilov & Hutter 2017, SGDR eq. 5 without
/// restarts).
double learning_rate(const TrainOptions& o, int64_t step);

struct TrainSummary {
  int64_t steps = 0;         ///< steps done in total (resumed ones included)
  int64_t resumed_from = 0;  ///< step of the checkpoint resumed from (0 = fresh)
  /// Mean train loss of the last train.log_every steps, read from metrics.jsonl: the same for a
  /// run resumed at any step as for an uninterrupted one.
  double final_loss = 0;
  double tokens_per_s = 0;  ///< training throughput over every logged step (metrics.jsonl)
  double wall_s = 0;
  double model_s = 0;  ///< seconds in forward + backward
  /// Seconds spent waiting for gradient all-reduces after backward (data-parallel runs).
  double allreduce_wait_s = 0;
};

struct TrainerHooks {
  /// Stop after this many steps in this process (tests simulate a kill); 0 = no limit.
  int64_t stop_after = 0;
  bool quiet = false;  ///< no progress output
};

/// Trains `model` on `task` per `exp.train` in the run folder `folder` (its metrics.jsonl and
/// checkpoint/, RunFolder's layout), resuming from its checkpoint if there is one. Throws
/// Interrupted (checkpoint written), TrainingDiverged, UserError for an unwritable folder,
/// DataError from the task.
///
/// With `group` (world size W > 1), this is one rank of a data-parallel run: every rank draws the
/// same global batch of train.batch_size sequences (a function of seed and step) and trains on
/// its slice [rank·B/W, (rank+1)·B/W); the loss is summed over the slice's scored tokens and
/// divided by the whole batch's count, so the all-reduced gradient (GradientReducer) is the one
/// a single process computes on the whole batch, and the data seen does not depend on W. Rank 0
/// alone writes metrics.jsonl and checkpoints; evaluations during training (train.eval_every)
/// are split between the ranks (evaluate_length with `group`); every rank reads
/// the checkpoint to resume (the run folder must be visible to all ranks), from any earlier W.
/// A stop request on any rank stops all of them after the same step. Throws ConfigError when W
/// does not divide train.batch_size, UserError when the ranks resume from different steps,
/// RankLost when another rank is gone.
TrainSummary train(LanguageModel& model, Task& task, const Experiment& exp, const RunFolder& folder,
                   const TrainerHooks& hooks = {}, ProcessGroup* group = nullptr);

/// Loads the run's trained weights into `model`: run_dir/checkpoint/weights.safetensors when
/// training wrote it (at its end; streamed, about the model's size in memory), else
/// run_dir/checkpoint/state.pt. Returns the step, or -1 when there is no checkpoint. Throws
/// CheckpointUnreadable ("checkpoint <path> is unreadable (...)") for a damaged or foreign file;
/// train() does the same when it resumes. A checkpoint whose parameters are not the model's (a name
/// missing, another shape: LibTorch's loader would replace the tensor silently) is a UserError
/// naming the checkpoint, the parameter, both shapes and `model_origin` (what the model was built
/// from; default run_dir/source.yaml), never a LibTorch error later in a forward.
int64_t load_model_checkpoint(LanguageModel& model, const std::string& run_dir,
                              const std::string& model_origin = "");

}  // namespace hybridlab
