// copy: copy a random string after a separator (Jelassi et al. 2024, "Repeat After Me", ICML;
// sjelassi/transformers_ssm_copy@1188c47 synthetic_exps/data_utils.py). An example is
// `$ s | s .` with s uniform over the first `alphabet` lowercase letters (byte ids 'a'...), padded
// with 0 to the sequence length; only the copy of s after `|` is scored. Train strings have length
// uniform in [min_len, (seq_len-3)/2]; at eval length L strings fill the upper half of what L
// holds, uniform in [(L-3)/4 + 1, (L-3)/2], so longer eval lengths test longer strings.
// Metrics (test_utils.py): string accuracy (whole copy exact) and token (char) accuracy.

#include <fmt/format.h>

#include <cmath>

#include "tasks/registry.h"
#include "tasks/synthetic.h"

namespace hybridlab::tasks {
namespace {

struct CopyOptions {
  int64_t seq_len = 256;
  int64_t alphabet = 26;
  int64_t min_len = 1;
};

class CopyTask : public SyntheticTask {
 public:
  explicit CopyTask(CopyOptions o) : o_(o) {}
  std::string name() const override { return "copy"; }
  int64_t vocab_size() const override { return 256; }
  int64_t seq_len() const override { return o_.seq_len; }
  bool byte_level() const override { return true; }
  bool answer_span() const override { return true; }
  std::string length_problem(int64_t L) const override {
    return short_length_problem(L, 2 * o_.min_len + 3, "`$ s | s .` needs 2*min_len+3 tokens");
  }
  Batch generate(at::Generator& gen, int64_t n, int64_t L, Split split) override {
    const int64_t nmax = (L - 3) / 2;
    const int64_t lo = split == Split::kEval ? std::max(o_.min_len, (L - 3) / 4 + 1) : o_.min_len;
    const torch::Tensor len = torch::randint(lo, nmax + 1, {n, 1}, gen, torch::kLong);
    const torch::Tensor chars = torch::randint(0, o_.alphabet, {n, nmax}, gen, torch::kLong) + 'a';
    const torch::Tensor pos = torch::arange(L, torch::kLong).unsqueeze(0);  // [1,L]
    const torch::Tensor in_src = (pos >= 1) & (pos <= len);
    const torch::Tensor in_copy = (pos >= len + 2) & (pos <= 2 * len + 1);
    const torch::Tensor src_idx = (pos - 1).clamp(0, nmax - 1).expand({n, L});
    const torch::Tensor copy_idx = (pos - len - 2).clamp(0, nmax - 1);
    torch::Tensor seq = torch::zeros({n, L}, torch::kLong);
    seq = torch::where(in_src, chars.gather(1, src_idx), seq);
    seq = torch::where(in_copy, chars.gather(1, copy_idx), seq);
    seq = torch::where(pos == 0, torch::full_like(seq, '$'), seq);
    seq = torch::where(pos == len + 1, torch::full_like(seq, '|'), seq);
    seq = torch::where(pos == 2 * len + 2, torch::full_like(seq, '.'), seq);
    // Position p predicts p+1: the copied characters are predicted from [len+1, 2*len].
    const torch::Tensor scored = (pos >= len + 1) & (pos <= 2 * len);
    const torch::Tensor next = torch::roll(seq, -1, 1);
    const torch::Tensor targets = torch::where(scored, next, torch::full_like(seq, kIgnoreIndex));
    return {seq, targets};
  }

  std::map<std::string, double> metrics(const ScoreSums& s) const override {
    return {{"string_accuracy", s.examples ? double(s.correct_examples) / s.examples : 0.0},
            {"token_accuracy", s.tokens ? double(s.correct_tokens) / s.tokens : 0.0},
            {"loss", s.tokens ? s.loss_sum / s.tokens : 0.0}};
  }
  std::string primary_metric() const override { return "string_accuracy"; }
  std::map<std::string, double> chance_levels() const override {
    // One letter of `alphabet`; a whole string is alphabet^-length, 0 for any length scored here.
    const double a = static_cast<double>(o_.alphabet);
    return {{"token_accuracy", 1.0 / a}, {"string_accuracy", 0.0}, {"loss", std::log(a)}};
  }

 private:
  CopyOptions o_;
};

}  // namespace

TaskType copy_task_type() {
  return {"copy", "copy a random string after a separator (Jelassi et al. 2024, Repeat After Me)",
          [](Section& s, const TaskContext&) -> std::shared_ptr<Task> {
            CopyOptions o;
            o.seq_len = s.get<int64_t>("seq_len", o.seq_len);
            o.alphabet = s.get<int64_t>("alphabet", o.alphabet);
            o.min_len = s.get<int64_t>("min_len", o.min_len);
            s.check(o.alphabet >= 2 && o.alphabet <= 26, "alphabet", "must be in [2, 26] letters");
            s.check(o.min_len >= 1, "min_len", "must be >= 1");
            s.check(o.seq_len >= 2 * o.min_len + 3, "seq_len",
                    fmt::format("must be >= 2*min_len+3 = {}", 2 * o.min_len + 3));
            s.finish();
            return std::make_shared<CopyTask>(o);
          }};
}

}  // namespace hybridlab::tasks
