// Evaluation at each length on the task's fixed eval set, without autograd.
// NoGradGuard rather than InferenceMode: evals also run between training steps, and a scheme that
// caches tables built under InferenceMode could not use them in training afterwards.

#include "hybridlab/evaluator.h"

#include <algorithm>
#include <cmath>

#include "eval/generated_scoring.h"

namespace hybridlab {

namespace {

// Data parallel: the sums of every rank's share, on every rank. Counts travel as doubles (exact
// below 2^53).
void all_reduce_sums(ScoreSums& s, int64_t length, ProcessGroup& group) {
  // Whether any rank has the per-position curve ([length] when filled; a rank with no examples
  // has none).
  torch::Tensor has_curve = torch::tensor({s.position_count.empty() ? 0.0 : 1.0}, torch::kDouble);
  group.all_reduce_sum(has_curve);
  const int64_t curve = has_curve.item<double>() > 0 ? length : 0;
  s.position_loss_sum.resize(static_cast<size_t>(curve), 0.0);
  s.position_count.resize(static_cast<size_t>(curve), 0);
  s.position_correct.resize(static_cast<size_t>(curve), 0);
  std::vector<double> flat = {s.loss_sum,
                              static_cast<double>(s.tokens),
                              static_cast<double>(s.correct_tokens),
                              static_cast<double>(s.target_bytes),
                              static_cast<double>(s.examples),
                              static_cast<double>(s.correct_examples),
                              s.example_accuracy_sum};
  flat.insert(flat.end(), s.position_loss_sum.begin(), s.position_loss_sum.end());
  for (int64_t c : s.position_count) flat.push_back(static_cast<double>(c));
  for (int64_t c : s.position_correct) flat.push_back(static_cast<double>(c));
  torch::Tensor t = torch::tensor(flat, torch::kDouble);
  group.all_reduce_sum(t);
  const double* v = t.data_ptr<double>();
  const auto count = [](double x) { return static_cast<int64_t>(std::llround(x)); };
  s.loss_sum = v[0];
  s.tokens = count(v[1]);
  s.correct_tokens = count(v[2]);
  s.target_bytes = count(v[3]);
  s.examples = count(v[4]);
  s.correct_examples = count(v[5]);
  s.example_accuracy_sum = v[6];
  constexpr int64_t kScalars = 7;
  for (int64_t i = 0; i < curve; ++i) {
    s.position_loss_sum[static_cast<size_t>(i)] = v[kScalars + i];
    s.position_count[static_cast<size_t>(i)] = count(v[kScalars + curve + i]);
    s.position_correct[static_cast<size_t>(i)] = count(v[kScalars + 2 * curve + i]);
  }
}

// Per bucket of equal width (at most 64 buckets), the sum of `values` over the sum of `counts`
// (0 for a bucket with no count); empty when there are no positions.
template <class V>
std::vector<double> bucket_means(const std::vector<V>& values, const std::vector<int64_t>& counts) {
  std::vector<double> out;
  const int64_t T = static_cast<int64_t>(counts.size());
  const int64_t buckets = std::min<int64_t>(64, T);
  for (int64_t b = 0; b < buckets; ++b) {
    double sum = 0;
    int64_t count = 0;
    for (int64_t t = b * T / buckets; t < (b + 1) * T / buckets; ++t) {
      sum += static_cast<double>(values[static_cast<size_t>(t)]);
      count += counts[static_cast<size_t>(t)];
    }
    out.push_back(count ? sum / static_cast<double>(count) : 0.0);
  }
  return out;
}

LengthResult score_set(LanguageModel& model, Task& task, const EvalOptions& eval, int64_t length,
                       Batch set, ProcessGroup* group) {
  torch::NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  const torch::Device device = model_device(model);
  const int64_t examples = set.tokens.size(0);
  const bool split = group && group->world_size() > 1;
  if (split) {
    // This rank's contiguous share of the examples.
    const int64_t r = group->rank(), w = group->world_size();
    const int64_t from = r * examples / w, to = (r + 1) * examples / w;
    set.tokens = set.tokens.slice(0, from, to);
    set.targets = set.targets.slice(0, from, to);
  }
  const int64_t n = set.tokens.size(0);
  const int64_t bs = eval.batch_rows(length, model.vocab_size());
  // Sliding-window evaluation: only the last `stride` targets of each window are scored.
  torch::Tensor all_targets = set.targets;
  if (eval.stride > 0 && eval.stride < length) {
    all_targets = all_targets.clone();
    all_targets.slice(1, 0, length - eval.stride).fill_(kIgnoreIndex);
  }
  ScoreSums sums;
  const torch::Tensor token_bytes = task.token_bytes();
  if (eval.scoring == EvalScoring::kGenerated) {
    score_generated(model, set, bs, sums);
  } else {
    for (int64_t i = 0; i < n; i += bs) {
      const int64_t j = std::min(n, i + bs);
      const torch::Tensor tokens = set.tokens.slice(0, i, j).to(device);
      const torch::Tensor targets = all_targets.slice(0, i, j).to(device);
      score_batch(model.forward(tokens), targets, sums,
                  task.per_position_curve() || task.position_accuracy_curve(), token_bytes);
    }
  }
  if (split) all_reduce_sums(sums, length, *group);
  LengthResult r;
  r.length = length;
  r.examples = examples;
  r.metrics = task.metrics(sums);
  r.scoring = eval_scoring_name(eval.scoring);
  // A decoded answer has no teacher-forced likelihood: the loss is not reported for it.
  if (eval.scoring == EvalScoring::kGenerated) r.metrics.erase("loss");
  if (task.per_position_curve())
    r.position_loss = bucket_means(sums.position_loss_sum, sums.position_count);
  if (task.position_accuracy_curve())
    r.position_accuracy = bucket_means(sums.position_correct, sums.position_count);
  if (was_training) model.train();
  return r;
}

}  // namespace

LengthResult evaluate_length(LanguageModel& model, Task& task, const EvalOptions& eval,
                             int64_t length, int64_t examples, ProcessGroup* group) {
  return score_set(model, task, eval, length,
                   task.eval_set(length, examples, static_cast<uint64_t>(eval.seed)), group);
}

LengthResult evaluate_validation(LanguageModel& model, Task& task, const Experiment& exp,
                                 ProcessGroup* group) {
  const int64_t L = task.seq_len();
  return score_set(model, task, exp.eval, L,
                   task.validation_set(L, exp.eval.examples, static_cast<uint64_t>(exp.eval.seed),
                                       exp.eval.lengths, exp.eval.examples),
                   group);
}

std::vector<LengthResult> evaluate(LanguageModel& model, Task& task, const Experiment& exp,
                                   ProcessGroup* group) {
  std::vector<int64_t> lengths = exp.eval.lengths;
  std::sort(lengths.begin(), lengths.end());
  std::vector<LengthResult> out;
  for (int64_t L : lengths)
    out.push_back(evaluate_length(model, task, exp.eval, L, exp.eval.examples, group));
  return out;
}

}  // namespace hybridlab
