// Generation-scored evaluation. Passkey retrieval and RULER score what the model generates after
// the question, exact match against the reference (Mohtashami & Jaggi 2023, landmark-attention
// llama/run_test.py; Hsieh et al. 2024, RULER scripts/eval/synthetic/constants.py); teacher
// forcing instead feeds the reference answer, so a wrong first digit cannot derail the rest.
// Here the decoded span has exactly the reference's length: an answer is right only if every
// decoded token equals the reference token.

#include "eval/generated_scoring.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "hybridlab/error.h"
#include "hybridlab/generate.h"

namespace hybridlab {

void score_generated(LanguageModel& model, const Batch& set, int64_t batch_size, ScoreSums& sums) {
  const torch::Tensor tokens = set.tokens.to(torch::kCPU);
  const torch::Tensor targets = set.targets.to(torch::kCPU).contiguous();
  const int64_t N = targets.size(0), L = targets.size(1);
  const int64_t* tp = targets.data_ptr<int64_t>();
  // Rows by their answer span (first scored position, length).
  std::map<std::pair<int64_t, int64_t>, std::vector<int64_t>> groups;
  for (int64_t i = 0; i < N; ++i) {
    int64_t first = -1, count = 0, last = -1;
    for (int64_t t = 0; t < L; ++t) {
      if (tp[i * L + t] == kIgnoreIndex) continue;
      if (first < 0) first = t;
      last = t;
      ++count;
    }
    if (count == 0) continue;
    if (last - first + 1 != count) {
      throw UserError(fmt::format(
          "eval.scoring: generated decodes one contiguous answer span, but eval example {} "
          "scores {} positions spread over [{}, {}]",
          i, count, first, last));
    }
    groups[{first, count}].push_back(i);
  }
  for (const auto& [span, rows] : groups) {
    const auto [first, n] = span;
    GenerateOptions opts;
    opts.max_new_tokens = n;  // greedy: temperature 0
    for (size_t at = 0; at < rows.size(); at += static_cast<size_t>(batch_size)) {
      const size_t end = std::min(rows.size(), at + static_cast<size_t>(batch_size));
      const torch::Tensor idx =
          torch::tensor(std::vector<int64_t>(rows.begin() + static_cast<std::ptrdiff_t>(at),
                                             rows.begin() + static_cast<std::ptrdiff_t>(end)),
                        torch::kLong);
      const torch::Tensor prompt = tokens.index_select(0, idx).slice(1, 0, first + 1);  // [b,p+1]
      const torch::Tensor want = targets.index_select(0, idx).slice(1, first, first + n);  // [b,n]
      const torch::Tensor hit = generate(model, prompt, opts).tokens.eq(want);             // [b,n]
      sums.tokens += hit.numel();
      sums.correct_tokens += hit.sum().item<int64_t>();
      sums.examples += hit.size(0);
      sums.correct_examples += hit.all(1).sum().item<int64_t>();
      sums.example_accuracy_sum += hit.to(torch::kDouble).mean(1).sum().item<double>();
    }
  }
}

}  // namespace hybridlab
