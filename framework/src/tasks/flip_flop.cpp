// flip_flop: flip-flop language modelling, FFL(p) (Liu et al. 2023, "Exposing Attention
// Glitches with Flip-Flop Language Modeling", arXiv 2306.00946; splits as in the dataset card of
// synthseq/flipflop@91ef5c9; reference/order_and_state.md §1).
//
// A sequence is T/2 instruction-bit pairs over {w, r, i} x {0, 1}. `w b` writes b into a one-bit
// memory, `i b` is noise, and the bit after `r` must equal the last bit written. Instructions are
// i.i.d. with P(i) = p and P(w) = P(r) = (1 - p)/2; bits after `w` and `i` are uniform. The first
// instruction is always `w` (the memory is never empty), and the last is always `r`, so every
// sequence holds at least one scored read even in the sparse split (a read after the longest gap,
// which is the hard case the split exists for).
//
// Only the deterministic bits are scored (the target at each `r` position is the bit that
// follows), in training and evaluation alike, as one reimplementation of Liu's App. B.2 does; the
// error rate is the fraction of those bits wrong under argmax ("glitch rate"; PaTH Table 1).
//
// Splits (the card's names): train FFL(p_ignore = 0.8); `eval_split: id` evaluates on
// FFL(p_ignore), `sparse` on FFL(0.98) (long gaps between write and read), `dense` on FFL(0.1)
// (many reads).
//
// Token ids: 0 and 1 are the bits, 2 = w, 3 = r, 4 = i.

#include <fmt/format.h>

#include <cmath>

#include "tasks/registry.h"
#include "tasks/synthetic.h"

namespace hybridlab::tasks {
namespace {

constexpr int64_t kWrite = 2, kRead = 3, kIgnore = 4;

enum class FlipFlopSplit { kInDistribution, kSparse, kDense };

struct FlipFlopOptions {
  int64_t seq_len = 512;  ///< tokens (even: instruction-bit pairs)
  double p_ignore = 0.8;  ///< p of FFL(p) in training
  FlipFlopSplit eval_split = FlipFlopSplit::kInDistribution;  ///< distribution of eval sets
};

/// P(i) of the distribution `split` draws from (the card's val, val_sparse and val_dense).
double split_p_ignore(FlipFlopSplit split, double train_p) {
  switch (split) {
    case FlipFlopSplit::kSparse:
      return 0.98;
    case FlipFlopSplit::kDense:
      return 0.1;
    case FlipFlopSplit::kInDistribution:
      break;
  }
  return train_p;
}

class FlipFlopTask : public SyntheticTask {
 public:
  explicit FlipFlopTask(FlipFlopOptions o) : o_(o) {}
  std::string name() const override { return "flip_flop"; }
  int64_t vocab_size() const override { return 5; }
  int64_t seq_len() const override { return o_.seq_len; }
  std::string length_problem(int64_t L) const override {
    return short_length_problem(L, 4, "a write and a read, each an instruction-bit pair", true);
  }

  Batch generate(at::Generator& gen, int64_t n, int64_t L, Split split) override {
    using torch::indexing::Slice;
    const int64_t P = L / 2;
    const double p =
        split == Split::kEval ? split_p_ignore(o_.eval_split, o_.p_ignore) : o_.p_ignore;
    // Instructions by inverse CDF of one uniform: [0, p) ignore, then write, then read.
    const torch::Tensor u = torch::rand({n, P}, gen, torch::kDouble);
    torch::Tensor instr = torch::full({n, P}, kRead, torch::kLong);
    instr.masked_fill_(u < p + (1 - p) / 2, kWrite);
    instr.masked_fill_(u < p, kIgnore);
    instr.index_put_({Slice(), 0}, kWrite);
    instr.index_put_({Slice(), P - 1}, kRead);
    torch::Tensor bits = torch::randint(0, 2, {n, P}, gen, torch::kLong);
    // The bit after each read is the one written at the latest `w` before it (position 0 is one).
    const torch::Tensor idx = torch::arange(P, torch::kLong).expand({n, P});
    const torch::Tensor last_write =
        std::get<0>(torch::where(instr == kWrite, idx, torch::full_like(idx, -1)).cummax(1));
    const torch::Tensor is_read = instr == kRead;
    bits = torch::where(is_read, bits.gather(1, last_write), bits);
    torch::Tensor seq = torch::stack({instr, bits}, 2).reshape({n, L});
    torch::Tensor targets = torch::full({n, P}, kIgnoreIndex, torch::kLong);
    targets = torch::where(is_read, bits, targets);
    // Target of the instruction position: the bit after it; bit positions are never scored.
    targets = torch::stack({targets, torch::full_like(targets, kIgnoreIndex)}, 2).reshape({n, L});
    return {seq, targets};
  }

  std::map<std::string, double> metrics(const ScoreSums& s) const override {
    const double acc = s.tokens ? double(s.correct_tokens) / s.tokens : 0.0;
    return {{"error_rate", s.tokens ? 1.0 - acc : 0.0},
            {"accuracy", acc},
            {"sequence_accuracy", s.examples ? double(s.correct_examples) / s.examples : 0.0},
            {"loss", s.tokens ? s.loss_sum / s.tokens : 0.0}};
  }
  std::string primary_metric() const override { return "error_rate"; }
  bool higher_is_better() const override { return false; }
  std::map<std::string, double> chance_levels() const override {
    // The written bit is uniform: a model that cannot find it errs on half the reads.
    return {{"error_rate", 0.5}, {"accuracy", 0.5}, {"loss", std::log(2.0)}};
  }

 private:
  FlipFlopOptions o_;
};

FlipFlopSplit read_split(Section& s) {
  const std::string name = s.get<std::string>("eval_split", "id");
  if (name == "id") return FlipFlopSplit::kInDistribution;
  if (name == "sparse") return FlipFlopSplit::kSparse;
  if (name == "dense") return FlipFlopSplit::kDense;
  s.error("eval_split",
          fmt::format("'{}' is not a flip-flop split: id (FFL(p_ignore), the training "
                      "distribution), sparse (FFL(0.98)) or dense (FFL(0.1))",
                      name));
  return FlipFlopSplit::kInDistribution;
}

}  // namespace

TaskType flip_flop_task_type() {
  return {"flip_flop",
          "flip-flop language modelling, error rate on reads (Liu et al. 2023, attention glitches)",
          [](Section& s, const TaskContext&) -> std::shared_ptr<Task> {
            FlipFlopOptions o;
            o.seq_len = s.get<int64_t>("seq_len", o.seq_len);
            o.p_ignore = s.get<double>("p_ignore", o.p_ignore);
            o.eval_split = read_split(s);
            s.check(o.p_ignore >= 0 && o.p_ignore <= 1, "p_ignore",
                    "must be in [0, 1] (the probability of an ignore instruction; Liu et al. "
                    "train at 0.8)");
            s.check(o.seq_len >= 4 && o.seq_len % 2 == 0, "seq_len",
                    "must be even and >= 4 (instruction-bit pairs: a write and a read)");
            s.finish();
            return std::make_shared<FlipFlopTask>(o);
          }};
}

}  // namespace hybridlab::tasks
