// selective_copy: selective copying (Gu & Dao 2023, Mamba, §3.1 and Table 1); the generator
// follows athms/mad-lab@0f49a45 mad/data/instances.py::generate_copying_instance(selective=True):
// `num_tokens` data tokens (ids in [1, vocab_size-1)) at random ordered positions among noise
// tokens (id 0) in the first L-num_tokens-1 positions, then a copy token (id vocab_size-1), then
// the data tokens again; only the num_tokens positions emitting them in order are scored.

#include <fmt/format.h>

#include <cmath>

#include "tasks/registry.h"
#include "tasks/synthetic.h"

namespace hybridlab::tasks {
namespace {

struct SelectiveCopyOptions {
  int64_t seq_len = 256;
  int64_t vocab_size = 16;
  int64_t num_tokens = 16;
};

class SelectiveCopyTask : public SyntheticTask {
 public:
  explicit SelectiveCopyTask(SelectiveCopyOptions o) : o_(o) {}
  std::string name() const override { return "selective_copy"; }
  int64_t vocab_size() const override { return o_.vocab_size; }
  int64_t seq_len() const override { return o_.seq_len; }
  bool answer_span() const override { return true; }
  std::string length_problem(int64_t L) const override {
    return short_length_problem(L, 2 * o_.num_tokens + 1,
                                "num_tokens data tokens, a copy token and num_tokens outputs");
  }

  Batch generate(at::Generator& gen, int64_t n, int64_t L, Split) override {
    using torch::indexing::Slice;
    const int64_t k = o_.num_tokens, C = L - k - 1;
    const torch::Tensor data = torch::randint(1, o_.vocab_size - 1, {n, k}, gen, torch::kLong);
    const torch::Tensor where = std::get<0>(
        torch::rand({n, C}, gen).argsort(int64_t{1}).index({Slice(), Slice(0, k)}).sort(1));
    torch::Tensor seq = torch::zeros({n, L}, torch::kLong);
    seq.scatter_(1, where, data);
    seq.index_put_({Slice(), C}, o_.vocab_size - 1);
    seq.index_put_({Slice(), Slice(C + 1, L)}, data);
    torch::Tensor targets = torch::full({n, L}, kIgnoreIndex, torch::kLong);
    targets.index_put_({Slice(), Slice(C, L - 1)}, data);
    return {seq, targets};
  }

  std::map<std::string, double> metrics(const ScoreSums& s) const override {
    return token_metrics(s);
  }
  std::string primary_metric() const override { return "accuracy"; }
  std::map<std::string, double> chance_levels() const override {
    // Data tokens are uniform over [1, vocab_size - 1).
    const double k = static_cast<double>(o_.vocab_size - 2);
    return {{"accuracy", 1.0 / k}, {"sequence_accuracy", 0.0}, {"loss", std::log(k)}};
  }

 private:
  SelectiveCopyOptions o_;
};

}  // namespace

TaskType selective_copy_task_type() {
  return {"selective_copy", "selective copying among noise tokens (Gu & Dao 2023, Mamba)",
          [](Section& s, const TaskContext&) -> std::shared_ptr<Task> {
            SelectiveCopyOptions o;
            o.seq_len = s.get<int64_t>("seq_len", o.seq_len);
            o.vocab_size = s.get<int64_t>("vocab_size", o.vocab_size);
            o.num_tokens = s.get<int64_t>("num_tokens", o.num_tokens);
            s.check(o.vocab_size >= 3, "vocab_size", "must be >= 3 (noise, copy and a data token)");
            s.check(o.num_tokens >= 1, "num_tokens", "must be >= 1");
            s.check(o.seq_len >= 2 * o.num_tokens + 1, "seq_len",
                    fmt::format("must be >= 2*num_tokens+1 = {}", 2 * o.num_tokens + 1));
            s.finish();
            return std::make_shared<SelectiveCopyTask>(o);
          }};
}

}  // namespace hybridlab::tasks
