// The compression task of the MAD suite (Poli et al. 2024, "Mechanistic Design and Scaling of
// Hybrid Architectures", arXiv 2403.17844 §3.1; generator as athms/mad-lab@6e7e4c9
// mad/data/instances.py, model as mad/model/auto_encoder.py; reference/order_and_state.md §5).
//
// A row is seq_len - 1 uniform tokens from [0, V-1) and the compression token V-1 last; the target
// at every position is that position's input token, the compression token included (MAD's targets
// are the whole input). The model is MAD's AutoEncoder (`model.head: autoencoder`): its last
// position is the only summary of the row, and a position-wise MLP decodes every position from it,
// so the task measures how much of a sequence a mixer stack packs into one token's state.
//
// Metric: `accuracy` per token (MAD reports torchmetrics' macro average over classes: with
// uniform tokens the two agree up to sampling noise), `sequence_accuracy`. Chance: a model that
// ignores the row guesses each random token with probability 1/(V-1) and always gets the
// compression token, ((L-1)/(V-1) + 1)/L at the training length L.

#include <cmath>

#include "tasks/registry.h"
#include "tasks/synthetic.h"

namespace hybridlab::tasks {
namespace {

struct CompressionOptions {
  int64_t seq_len = 32;
  int64_t vocab_size = 16;
};

class CompressionTask : public SyntheticTask {
 public:
  explicit CompressionTask(CompressionOptions o) : o_(o) {}
  std::string name() const override { return "compression"; }
  int64_t vocab_size() const override { return o_.vocab_size; }
  int64_t seq_len() const override { return o_.seq_len; }
  bool autoencoder() const override { return true; }
  std::string length_problem(int64_t L) const override {
    return short_length_problem(L, 2, "a token and the compression token");
  }
  Batch generate(at::Generator& gen, int64_t n, int64_t L, Split) override {
    const torch::Tensor data = torch::randint(0, o_.vocab_size - 1, {n, L - 1}, gen, torch::kLong);
    const torch::Tensor seq =
        torch::cat({data, torch::full({n, 1}, o_.vocab_size - 1, torch::kLong)}, 1);
    return {seq, seq.clone()};
  }
  std::map<std::string, double> metrics(const ScoreSums& s) const override {
    return token_metrics(s);
  }
  std::string primary_metric() const override { return "accuracy"; }
  std::map<std::string, double> chance_levels() const override {
    const double symbols = static_cast<double>(o_.vocab_size - 1);
    const double L = static_cast<double>(o_.seq_len);
    return {{"accuracy", ((L - 1) / symbols + 1) / L},
            {"sequence_accuracy", 0.0},
            {"loss", (L - 1) / L * std::log(symbols)}};
  }

 private:
  CompressionOptions o_;
};

}  // namespace

TaskType compression_task_type() {
  return {"compression",
          "a row encoded into its last position and decoded at every position, MAD defaults "
          "(Poli et al. 2024, MAD; needs model.head autoencoder)",
          [](Section& s, const TaskContext&) -> std::shared_ptr<Task> {
            CompressionOptions o;
            o.seq_len = s.get<int64_t>("seq_len", o.seq_len);
            o.vocab_size = s.get<int64_t>("vocab_size", o.vocab_size);
            s.check(o.vocab_size >= 3, "vocab_size",
                    "must be >= 3 (two symbols and the compression token)");
            s.check(o.seq_len >= 2, "seq_len", "must be >= 2 (a token and the compression token)");
            s.finish();
            return std::make_shared<CompressionTask>(o);
          }};
}

}  // namespace hybridlab::tasks
