// Evaluation at each length on the task's fixed eval set, without autograd.
// NoGradGuard rather than InferenceMode: evals also run between training steps, and a scheme that
// caches tables built under InferenceMode could not use them in training afterwards.

#include "hybridlab/evaluator.h"

#include <algorithm>

#include "eval/generated_scoring.h"

namespace hybridlab {

namespace {

LengthResult score_set(LanguageModel& model, Task& task, const EvalOptions& eval, int64_t length,
                       const Batch& set) {
  torch::NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  const auto params = model.parameters();
  const torch::Device device = params.empty() ? torch::Device(torch::kCPU) : params[0].device();
  const int64_t n = set.tokens.size(0);
  const int64_t bs =
      std::max<int64_t>(1, std::min(eval.batch_size, eval.max_batch_tokens / length));
  // Sliding-window evaluation: only the last `stride` targets of each window are scored.
  torch::Tensor all_targets = set.targets;
  if (eval.stride > 0 && eval.stride < length) {
    all_targets = all_targets.clone();
    all_targets.slice(1, 0, length - eval.stride).fill_(kIgnoreIndex);
  }
  ScoreSums sums;
  if (eval.scoring == EvalScoring::kGenerated) {
    score_generated(model, set, bs, sums);
  } else {
    for (int64_t i = 0; i < n; i += bs) {
      const int64_t j = std::min(n, i + bs);
      const torch::Tensor tokens = set.tokens.slice(0, i, j).to(device);
      const torch::Tensor targets = all_targets.slice(0, i, j).to(device);
      score_batch(model.forward(tokens), targets, sums, task.per_position_curve());
    }
  }
  LengthResult r;
  r.length = length;
  r.examples = n;
  r.metrics = task.metrics(sums);
  r.scoring = eval_scoring_name(eval.scoring);
  // A decoded answer has no teacher-forced likelihood: the loss is not reported for it.
  if (eval.scoring == EvalScoring::kGenerated) r.metrics.erase("loss");
  if (task.per_position_curve() && !sums.position_count.empty()) {
    // Mean loss per bucket of equal width (at most 64 buckets).
    const int64_t T = static_cast<int64_t>(sums.position_count.size());
    const int64_t buckets = std::min<int64_t>(64, T);
    for (int64_t b = 0; b < buckets; ++b) {
      double loss = 0;
      int64_t count = 0;
      for (int64_t t = b * T / buckets; t < (b + 1) * T / buckets; ++t) {
        loss += sums.position_loss_sum[t];
        count += sums.position_count[t];
      }
      r.position_loss.push_back(count ? loss / count : 0.0);
    }
  }
  if (was_training) model.train();
  return r;
}

}  // namespace

LengthResult evaluate_length(LanguageModel& model, Task& task, const EvalOptions& eval,
                             int64_t length, int64_t examples) {
  return score_set(model, task, eval, length,
                   task.eval_set(length, examples, static_cast<uint64_t>(eval.seed)));
}

LengthResult evaluate_validation(LanguageModel& model, Task& task, const Experiment& exp) {
  const int64_t L = task.seq_len();
  return score_set(model, task, exp.eval, L,
                   task.validation_set(L, exp.eval.examples, static_cast<uint64_t>(exp.eval.seed),
                                       exp.eval.lengths, exp.eval.examples));
}

std::vector<LengthResult> evaluate(LanguageModel& model, Task& task, const Experiment& exp) {
  std::vector<int64_t> lengths = exp.eval.lengths;
  std::sort(lengths.begin(), lengths.end());
  std::vector<LengthResult> out;
  for (int64_t L : lengths)
    out.push_back(evaluate_length(model, task, exp.eval, L, exp.eval.examples));
  return out;
}

}  // namespace hybridlab
