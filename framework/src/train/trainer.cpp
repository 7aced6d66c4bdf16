// The training loop. Batches are a pure function of (seed, step) and the checkpoint holds the
// model, the AdamW state, the step and the CPU RNG, so a resumed run takes the same steps as an
// uninterrupted one.

#include "hybridlab/trainer.h"

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <sstream>
#include <tuple>

#include "hybridlab/evaluator.h"
#include "hybridlab/run_record.h"
#include "hybridlab/runtime.h"
#include "train/weights_file.h"
#include "util/atomic_file.h"
#include "util/progress.h"

namespace hybridlab {
namespace fs = std::filesystem;

Interrupted::~Interrupted() = default;
TrainingDiverged::~TrainingDiverged() = default;
CheckpointUnreadable::CheckpointUnreadable(std::string path, std::string reason)
    : UserError(fmt::format(
          "checkpoint {} is unreadable ({}); delete it (or the run folder) to restart the run",
          path, reason)),
      path_(std::move(path)),
      reason_(std::move(reason)) {}
CheckpointUnreadable::~CheckpointUnreadable() = default;

namespace {

using Clock = std::chrono::steady_clock;
double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

std::unique_ptr<torch::optim::AdamW> make_optimizer(LanguageModel& model, const TrainOptions& o) {
  // Weight decay on matrices only (embeddings and projections), not on gains and biases, as in
  // GPT-2/nanoGPT's configure_optimizers.
  std::vector<torch::Tensor> decay, no_decay;
  for (auto& p : model.parameters()) {
    if (!p.requires_grad()) continue;
    (p.dim() >= 2 ? decay : no_decay).push_back(p);
  }
  auto opts = [&](double wd) {
    return std::make_unique<torch::optim::AdamWOptions>(
        torch::optim::AdamWOptions(o.lr).betas({o.beta1, o.beta2}).eps(o.eps).weight_decay(wd));
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, opts(o.weight_decay));
  groups.emplace_back(no_decay, opts(0.0));
  return std::make_unique<torch::optim::AdamW>(groups, torch::optim::AdamWOptions(o.lr));
}

void save_checkpoint(LanguageModel& model, torch::optim::Optimizer& opt, int64_t step,
                     const RunFolder& folder) {
  torch::serialize::OutputArchive top, m, o;
  model.save(m);
  opt.save(o);
  top.write("model", m);
  top.write("optimizer", o);
  top.write("step", torch::tensor(step, torch::kLong));
  top.write("rng", at::detail::getDefaultCPUGenerator().get_state());
  const std::string path = folder.checkpoint_path();
  // Serialized to memory first, then written by write_file_atomic: a full disk is then an
  // error from one checked write (temp file removed, free space named) instead of a failure
  // inside LibTorch's file writer, which aborts the process.
  std::ostringstream buffer;
  top.save_to(buffer);
  try {
    write_file_atomic(path, buffer.str());
  } catch (const UserError& e) {
    throw UserError(fmt::format("cannot write checkpoint: {}", e.what()));
  }
}

// Runs `read` over the checkpoint at `path`; a damaged or foreign file becomes a UserError that
// says how to recover instead of a LibTorch trace.
template <class F>
void read_checkpoint(const std::string& path, F&& read) {
  try {
    torch::serialize::InputArchive top;
    top.load_from(path);
    read(top);
  } catch (const c10::Error& e) {
    std::string reason = e.what_without_backtrace();
    reason = reason.substr(0, reason.find('\n'));
    throw CheckpointUnreadable(path, reason);
  }
}

// The reported training figures, from metrics.jsonl (what every step logged, resumed or not), so
// they are a function of the config alone: the mean loss of the last `window` steps up to
// `steps`, and tokens/s over all logged steps (every step has the same token count: the
// harmonic mean of the per-step rates).
std::pair<double, double> logged_loss_and_rate(const std::string& path, int64_t steps,
                                               int64_t window) {
  double loss_sum = 0, inv_rate_sum = 0;
  int64_t loss_n = 0, rate_n = 0;
  for (const MetricsRow& r : read_metrics(path)) {
    if (!r.has_loss) continue;
    if (r.step > steps - window && r.step <= steps) {
      loss_sum += r.loss;
      ++loss_n;
    }
    if (r.tokens_per_s > 0) {
      inv_rate_sum += 1.0 / r.tokens_per_s;
      ++rate_n;
    }
  }
  return {loss_n ? loss_sum / static_cast<double>(loss_n) : 0.0,
          inv_rate_sum > 0 ? static_cast<double>(rate_n) / inv_rate_sum : 0.0};
}

// Drops metrics lines past `step` (a killed run may have logged steps after its checkpoint).
void truncate_metrics(const std::string& path, int64_t step) {
  if (!std::ifstream(path)) return;
  std::string kept;
  for (const MetricsRow& r : read_metrics(path))
    if (r.step <= step) kept += r.line + "\n";
  write_file_atomic(path, kept);
}

}  // namespace

double learning_rate(const TrainOptions& o, int64_t step) {
  if (o.warmup_steps > 0 && step < o.warmup_steps) {
    return o.lr * static_cast<double>(step + 1) / static_cast<double>(o.warmup_steps);
  }
  const double span = static_cast<double>(std::max<int64_t>(1, o.steps - o.warmup_steps));
  const double progress = std::min(1.0, static_cast<double>(step - o.warmup_steps) / span);
  const double min_lr = o.lr * o.min_lr_ratio;
  return min_lr + 0.5 * (o.lr - min_lr) * (1.0 + std::cos(M_PI * progress));
}

int64_t load_model_checkpoint(LanguageModel& model, const std::string& run_dir,
                              const std::string& model_origin) {
  const std::string path = RunFolder(run_dir).checkpoint_path();
  require_plain_file(path);
  if (!fs::exists(path)) return -1;
  const std::string origin =
      model_origin.empty() ? (fs::path(run_dir) / "source.yaml").string() : model_origin;
  const auto unfit = [&](const std::string& why) {
    return UserError(
        fmt::format("checkpoint {} does not fit the model built from {}: {}", path, origin, why));
  };
  // The weights file of a run that finished training: the model alone, streamed.
  if (const std::string weights = weights_path(run_dir); fs::exists(weights)) {
    require_plain_file(weights);
    const auto unfit_weights = [&](const std::string& why) {
      return UserError(fmt::format("checkpoint {} does not fit the model built from {}: {}",
                                   weights, origin, why));
    };
    try {
      return load_weights(model, weights, unfit_weights);
    } catch (const DataError& e) {
      // A damaged file: reported as a damaged state.pt is, with the same advice.
      throw CheckpointUnreadable(weights, e.what());
    }
  }
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& p : model.named_parameters(true)) shapes[p.key()] = p.value().sizes().vec();
  int64_t step_value = -1;
  read_checkpoint(path, [&](torch::serialize::InputArchive& top) {
    torch::serialize::InputArchive m;
    top.read("model", m);
    try {
      model.load(m);
    } catch (const c10::Error& e) {
      const std::string why = e.what_without_backtrace();
      throw unfit(why.substr(0, why.find('\n')));
    }
    // LibTorch's loader replaces a parameter of another shape without a word: compare after it.
    for (const auto& p : model.named_parameters(true)) {
      if (p.value().sizes().vec() != shapes[p.key()]) {
        throw unfit(fmt::format("'{}' is {} in the checkpoint, {} in the model", p.key(),
                                fmt::join(p.value().sizes(), "×"),
                                fmt::join(shapes[p.key()], "×")));
      }
    }
    torch::Tensor step;
    top.read("step", step);
    step_value = step.item<int64_t>();
  });
  return step_value;
}

namespace {

// Loads the checkpoint at `ckpt` into `model` and `opt` (and the CPU generator's state) when there
// is one, and returns its step (0 without one). The writer drops metrics lines logged past it, or
// starts an empty metrics.jsonl.
int64_t resume_from_checkpoint(LanguageModel& model, torch::optim::Optimizer& opt,
                               const std::string& ckpt, const std::string& metrics_path,
                               bool writer) {
  int64_t start = 0;
  if (fs::exists(ckpt)) {
    read_checkpoint(ckpt, [&](torch::serialize::InputArchive& top) {
      torch::serialize::InputArchive m, oa;
      top.read("model", m);
      model.load(m);
      top.read("optimizer", oa);
      opt.load(oa);
      torch::Tensor step, rng;
      top.read("step", step);
      top.read("rng", rng);
      at::Generator cpu_gen = at::detail::getDefaultCPUGenerator();
      cpu_gen.set_state(rng);
      start = step.item<int64_t>();
    });
    if (writer) truncate_metrics(metrics_path, start);
  } else if (writer) {
    write_file_atomic(metrics_path, "");
  }
  return start;
}

// Data parallel: checks that every rank resumes from the same step (each read the checkpoint
// itself) and returns the reducer of the trainable parameters' gradients.
std::unique_ptr<GradientReducer> join_ranks(ProcessGroup& group, int64_t start,
                                            const std::vector<torch::Tensor>& params,
                                            const std::string& run_dir) {
  const int64_t world = group.world_size();
  const torch::Tensor s = torch::tensor(
      {static_cast<double>(start), static_cast<double>(start) * static_cast<double>(start)},
      torch::kDouble);
  group.all_reduce_sum(s);
  const double mean = s[0].item<double>() / static_cast<double>(world);
  if (s[1].item<double>() / static_cast<double>(world) != mean * mean) {
    throw UserError(fmt::format(
        "rank {} resumes from step {} but the ranks disagree (mean {:.1f}): the run folder "
        "'{}' must be the same folder for every rank (a shared filesystem across hosts)",
        group.rank(), start, mean, run_dir));
  }
  std::vector<torch::Tensor> trainable;
  for (const auto& p : params) {
    if (p.requires_grad()) trainable.push_back(p);
  }
  return std::make_unique<GradientReducer>(trainable, group);
}

// The evaluation during training (train.eval_every): every rank scores its share of the
// examples; the line goes to metrics.jsonl through `log_line` and the progress.
void evaluate_during_training(LanguageModel& model, Task& task, const Experiment& exp,
                              ProcessGroup* group, int64_t step,
                              const std::function<void(const MetricsRow&)>& log_line,
                              Progress& progress) {
  const LengthResult r = evaluate_length(model, task, exp.eval, task.seq_len(),
                                         exp.eval.examples_during_training, group);
  MetricsRow ev;
  ev.step = step;
  ev.eval_length = r.length;
  ev.eval = {r.metrics.begin(), r.metrics.end()};
  log_line(ev);
  progress.note(fmt::format("step {} eval@{} {} {:.4f}", step, r.length, task.primary_metric(),
                            r.metrics.at(task.primary_metric())));
  model.train();
}

// This rank's share of one global batch, on `device`; `scored` counts the scored tokens of the
// whole global batch (data parallel: the loss is summed per rank and divided by it).
struct StepBatch {
  torch::Tensor tokens, targets;
  torch::Tensor document_starts;  ///< packed documents (Batch::document_starts), or undefined
  int64_t global_tokens = 0;
  int64_t scored = 0;
};

StepBatch step_batch(Task& task, const TrainOptions& o, int64_t step, int64_t rank, int64_t world,
                     const torch::Device& device) {
  const Batch b = task.train_batch(step, o.batch_size, static_cast<uint64_t>(o.seed));
  StepBatch out{b.tokens, b.targets, b.document_starts, b.tokens.numel(), 0};
  const bool packed = out.document_starts.defined();
  if (world > 1) {
    out.scored = (b.targets != kIgnoreIndex).sum().item<int64_t>();
    const int64_t rows = o.batch_size / world;
    out.tokens = out.tokens.narrow(0, rank * rows, rows);
    out.targets = out.targets.narrow(0, rank * rows, rows);
    if (packed) out.document_starts = out.document_starts.narrow(0, rank * rows, rows);
  }
  out.tokens = out.tokens.to(device);
  out.targets = out.targets.to(device);
  if (packed) out.document_starts = out.document_starts.to(device);
  return out;
}

// The training loss of one batch: the forward pass and the cross entropy in runtime.precision
// (bf16: under autocast; the backward runs outside the scope). `check_vocab`: refuse a model
// whose vocabulary is smaller than the task's (checked on the first step). Data parallel: the
// summed loss over the global batch's scored tokens.
torch::Tensor batch_loss(LanguageModel& model, const Task& task, const StepBatch& b,
                         const Experiment& exp, const torch::Device& device, bool parallel,
                         bool check_vocab) {
  torch::Tensor loss;
  {
    const AutocastScope precision(exp.runtime.precision, device);
    const torch::Tensor logits = b.document_starts.defined()
                                     ? model.forward_packed(b.tokens, b.document_starts)
                                     : model.forward(b.tokens);
    if (check_vocab && logits.size(-1) < task.vocab_size()) {
      throw ConfigError(fmt::format(
          "model.vocab_size is {} but task {} uses {} token ids; set model.vocab_size >= {}",
          logits.size(-1), task.name(), task.vocab_size(), task.vocab_size()));
    }
    namespace F = torch::nn::functional;
    auto ce = F::CrossEntropyFuncOptions().ignore_index(kIgnoreIndex);
    if (parallel) ce.reduction(torch::kSum);
    loss = F::cross_entropy(logits.reshape({-1, logits.size(-1)}).to(torch::kFloat),
                            b.targets.reshape({-1}), ce);
  }
  if (parallel) loss = loss / static_cast<double>(std::max<int64_t>(b.scored, 1));
  return loss;
}

// Clips the gradients to train.grad_clip, sets the step's learning rate, steps the optimizer and
// clears the gradients. Returns {gradient norm before clipping, learning rate}.
std::pair<double, double> apply_update(torch::optim::Optimizer& opt,
                                       const std::vector<torch::Tensor>& params,
                                       const TrainOptions& o, int64_t step) {
  const double max_norm = o.grad_clip > 0 ? o.grad_clip : std::numeric_limits<double>::infinity();
  const double grad_norm = torch::nn::utils::clip_grad_norm_(params, max_norm);
  const double lr = learning_rate(o, step);
  for (auto& g : opt.param_groups()) static_cast<torch::optim::AdamWOptions&>(g.options()).lr(lr);
  opt.step();
  opt.zero_grad();
  return {grad_norm, lr};
}

// The loss of the whole global batch and, data parallel, whether any rank was asked to stop (set
// in `stop_agreed`): the gradients are reduced first, then loss and stop flag summed over the
// ranks.
double global_loss(const torch::Tensor& loss, GradientReducer* reducer, ProcessGroup* group,
                   bool& stop_agreed) {
  double value = loss.item<double>();
  if (!reducer) return value;
  reducer->finish();
  const torch::Tensor s =
      torch::tensor({value, stop_requested().load() ? 1.0 : 0.0}, torch::kDouble);
  group->all_reduce_sum(s);
  stop_agreed = s[1].item<double>() > 0;
  return s[0].item<double>();
}

// One metrics.jsonl line of a training step. Data parallel (`reducer` set): the ranks and the
// seconds this step waited for the all-reduce (`waited_before`: the total before it, updated).
MetricsRow step_line(int64_t step, double loss, double lr, double grad_norm, double tokens_per_s,
                     double time_s, const GradientReducer* reducer, int64_t world,
                     double& waited_before) {
  MetricsRow line;
  line.step = step;
  line.has_loss = true;
  line.loss = loss;
  line.lr = lr;
  line.grad_norm = grad_norm;
  line.tokens_per_s = tokens_per_s;
  line.time_s = time_s;
  if (reducer) {
    line.ranks = world;
    line.allreduce_wait_s = reducer->wait_seconds() - waited_before;
    waited_before = reducer->wait_seconds();
  }
  return line;
}

// metrics.jsonl, appended line by line and flushed (rank 0 only: `path` empty on the others).
class MetricsLog {
 public:
  explicit MetricsLog(const std::string& path) {
    if (path.empty()) return;
    file_ = std::fopen(path.c_str(), "a");
    if (!file_) {
      throw UserError(fmt::format("cannot append to '{}' (is the runs folder writable?)", path));
    }
  }
  ~MetricsLog() {
    if (file_) std::fclose(file_);
  }
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;
  void write(const MetricsRow& row) {
    if (!file_) return;
    std::fputs((metrics_line(row) + "\n").c_str(), file_);
    std::fflush(file_);
  }

 private:
  FILE* file_ = nullptr;
};

// This process's place in a data-parallel run: each rank trains on its slice of every global
// batch and rank 0 writes. Throws ConfigError when the batch does not split evenly.
struct RankPlace {
  bool parallel = false;
  int64_t world = 1, rank = 0;
  bool writer = true;
};
RankPlace rank_of(ProcessGroup* group, int64_t batch_size) {
  RankPlace r;
  r.parallel = group && group->world_size() > 1;
  r.world = r.parallel ? group->world_size() : 1;
  r.rank = r.parallel ? group->rank() : 0;
  r.writer = r.rank == 0;
  if (batch_size % r.world != 0) {
    throw ConfigError(
        fmt::format("train.batch_size {} is not a multiple of the {} ranks", batch_size, r.world));
  }
  return r;
}

// A non-finite loss: the step's forward runs again, checking each layer, so that a layer that
// turned finite values into non-finite ones is named. A layer running plugin code (a mixer or a
// positional hook) is the plugin's fault, not the learning rate's: a PluginError naming it.
// Otherwise the weights diverged: TrainingDiverged with the advice.
[[noreturn]] void throw_diverged(LanguageModel& model, const StepBatch& b, double loss,
                                 int64_t step, const std::string& last_checkpoint) {
  LanguageModel::NonFiniteLayer layer;
  try {
    layer = model.first_non_finite_layer(b.tokens, b.document_starts);
  } catch (const std::exception&) {
    // The forward that gave the loss ran; if it fails now, report the loss as it was.
  }
  if (layer.from_plugin) {
    throw PluginError(fmt::format(
        "{} returned non-finite values from finite inputs at step {} (the loss is {}); the last "
        "good checkpoint is {}; fix the plugin (the learning rate is not the cause)",
        layer.label, step + 1, loss, last_checkpoint));
  }
  throw TrainingDiverged(fmt::format(
      "training diverged: the loss is {} at step {}{}; the last good checkpoint is {}; lower "
      "train.lr or raise train.warmup_steps / train.grad_clip",
      loss, step + 1,
      layer.label.empty() ? "" : fmt::format(" (the first non-finite output: {})", layer.label),
      last_checkpoint));
}

}  // namespace

TrainSummary train(LanguageModel& model, Task& task, const Experiment& exp, const RunFolder& folder,
                   const TrainerHooks& hooks, ProcessGroup* group) {
  const std::string& run_dir = folder.dir();
  const TrainOptions& o = exp.train;
  TrainSummary summary;
  const auto params = model.parameters();
  const torch::Device device = model_device(model);
  auto opt = make_optimizer(model, o);
  const auto [parallel, world, rank, writer] = rank_of(group, o.batch_size);
  const std::string metrics_path = folder.metrics_path();
  const std::string ckpt = folder.checkpoint_path();
  // Appending through a link would write out of the runs folder; reading a pipe would block.
  require_plain_file(metrics_path);
  require_plain_file(ckpt);
  const bool had_checkpoint = fs::exists(ckpt);
  const int64_t start = resume_from_checkpoint(model, *opt, ckpt, metrics_path, writer);
  if (had_checkpoint) summary.resumed_from = start;
  const std::unique_ptr<GradientReducer> reducer =
      parallel ? join_ranks(*group, start, params, run_dir) : nullptr;
  std::string last_ckpt_text =
      fs::exists(ckpt) ? fmt::format("'{}' (step {})", ckpt, start) : "none yet";
  // Rank 0 logs; the other ranks of a data-parallel run write nothing.
  MetricsLog metrics(writer ? metrics_path : std::string());
  const std::function<void(const MetricsRow&)> log_line = [&metrics](const MetricsRow& row) {
    metrics.write(row);
  };

  Progress progress(o.steps, start, hooks.quiet || !writer, o.log_every);
  if (start > 0) progress.note(fmt::format("resuming from step {} ('{}')", start, ckpt));
  model.train();
  const auto t_begin = Clock::now();
  int64_t tokens_done = 0;
  int64_t step = start;
  bool stop_agreed = false;  // data parallel: a stop asked for on any rank, after the last step
  double allreduce_before = 0;
  for (; step < o.steps; ++step) {
    const bool stop = parallel ? stop_agreed : stop_requested().load();
    if (stop || (hooks.stop_after > 0 && step - start >= hooks.stop_after)) {
      if (writer) save_checkpoint(model, *opt, step, folder);
      progress.finish();
      throw Interrupted(
          fmt::format("stopped at step {}; checkpoint written to '{}'; rerun the same "
                      "command to resume",
                      step, ckpt));
    }
    const auto t0 = Clock::now();
    const StepBatch b = step_batch(task, o, step, rank, world, device);
    const auto t1 = Clock::now();
    const torch::Tensor loss = batch_loss(model, task, b, exp, device, parallel, step == start);
    loss.backward();
    const double loss_v = global_loss(loss, reducer.get(), group, stop_agreed);
    const auto t2 = Clock::now();
    summary.model_s += seconds(t2 - t1);
    if (!std::isfinite(loss_v)) {
      progress.finish();
      throw_diverged(model, b, loss_v, step, last_ckpt_text);
    }
    const auto [grad_norm, lr] = apply_update(*opt, params, o, step);
    const auto t3 = Clock::now();
    const int64_t ntok = b.global_tokens;
    tokens_done += ntok;
    log_line(step_line(step + 1, loss_v, lr, grad_norm, ntok / std::max(seconds(t3 - t0), 1e-9),
                       seconds(t3 - t_begin), reducer.get(), world, allreduce_before));
    progress.update(step + 1, loss_v, lr, tokens_done / std::max(seconds(t3 - t_begin), 1e-9));
    if (o.eval_every > 0 && (step + 1) % o.eval_every == 0 && step + 1 < o.steps)
      evaluate_during_training(model, task, exp, group, step + 1, log_line, progress);
    if (o.checkpoint_every > 0 && (step + 1) % o.checkpoint_every == 0 && step + 1 < o.steps) {
      if (writer) save_checkpoint(model, *opt, step + 1, folder);
      last_ckpt_text = fmt::format("'{}' (step {})", ckpt, step + 1);
    }
  }
  if (writer) {
    save_checkpoint(model, *opt, step, folder);
    save_weights(model, step, run_dir);  // what eval, analyze and export read (weights_file.h)
  }
  progress.finish();
  summary.steps = step;
  summary.wall_s = seconds(Clock::now() - t_begin);
  if (reducer) summary.allreduce_wait_s = reducer->wait_seconds();
  if (writer) {
    std::tie(summary.final_loss, summary.tokens_per_s) =
        logged_loss_and_rate(metrics_path, step, o.log_every);
  }
  // No step taken (train.steps 0: an imported model evaluated as it is): no training loss.
  if (step == 0) summary.final_loss = std::numeric_limits<double>::quiet_NaN();
  return summary;
}

}  // namespace hybridlab
