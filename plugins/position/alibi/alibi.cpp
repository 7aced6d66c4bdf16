// ALiBi: Attention with Linear Biases (Press, Smith & Lewis, "Train Short, Test Long", ICLR 2022).
//
// logit_ij += -m_h·(i − j)   (mode: causal; the paper's form, future keys are masked anyway)
// logit_ij += -m_h·|i − j|   (mode: symmetric; x-transformers' AlibiPositionalBias, for encoders)
//
// Slopes m_h follow get_slopes() in ofirpress/attention_with_linear_biases
// fairseq/models/transformer.py: for n a power of two m_h = 2^(−8h/n), h = 1..n; otherwise the
// slopes of the largest power of two P below n, then every other slope of 2P, n − P of them.
// The bias is added to q·kᵀ/√Dh (BLOOM's baddbmm with alpha = 1/√d, MPT after softmax_scale).

#include <cmath>

#include "hybridlab/position.h"

namespace {

using hybridlab::PositionContext;
using hybridlab::PositionTable;
using hybridlab::Section;

// get_slopes(n) of the reference implementation, in double.
std::vector<double> alibi_slopes(int64_t n) {
  auto power_of_two = [](int64_t p) {
    std::vector<double> s;
    for (int64_t h = 1; h <= p; ++h) s.push_back(std::exp2(-8.0 * static_cast<double>(h) / p));
    return s;
  };
  int64_t p = 1;
  while (p * 2 <= n) p *= 2;
  std::vector<double> slopes = power_of_two(p);
  if (p == n) return slopes;
  const std::vector<double> extra = power_of_two(2 * p);
  for (int64_t i = 0; i < n - p; ++i) slopes.push_back(extra[static_cast<size_t>(2 * i)]);
  return slopes;
}

class Alibi : public hybridlab::PositionScheme {
 public:
  Alibi(const std::vector<double>& slopes, bool symmetric) : symmetric_(symmetric) {
    slopes_ = register_buffer("slopes", torch::tensor(slopes, torch::kDouble).to(torch::kFloat));
  }

  std::string name() const override { return "alibi"; }
  uint32_t hooks() const override { return hybridlab::kHookLogitBias; }

  torch::Tensor logit_bias(const torch::Tensor& q_pos, const torch::Tensor& k_pos) override {
    // i − j as float: exact for positions below 2^24.
    torch::Tensor dist = (q_pos.unsqueeze(1) - k_pos.unsqueeze(0)).to(torch::kFloat);
    if (symmetric_) dist = dist.abs();
    const torch::Tensor m = slopes_.to(q_pos.device()).view({-1, 1, 1});
    return -m * dist.unsqueeze(0);
  }

  std::vector<PositionTable> inspect(int64_t length) override {
    std::vector<PositionTable> out;
    PositionTable s;
    s.name = "slopes";
    s.description = "ALiBi slope m_h per head";
    s.values = slopes_.clone();
    s.columns = {"slope"};
    s.row_label = "head";
    out.push_back(s);
    const torch::Tensor pos = torch::arange(length, torch::kLong);
    const torch::Tensor bias = logit_bias(pos, pos);
    for (int64_t h = 0; h < bias.size(0); ++h) {
      out.push_back(hybridlab::head_bias_table(h, bias[h],
                                               "ALiBi bias head " + std::to_string(h) + " (slope " +
                                                   std::to_string(slopes_[h].item<double>()) + ")" +
                                                   (symmetric_ ? ", -m|i-j|" : ", -m(i-j)")));
    }
    return out;
  }

  static std::shared_ptr<hybridlab::PositionScheme> create(Section& params,
                                                           const PositionContext& ctx) {
    const std::string mode = params.get<std::string>("mode", ctx.causal ? "causal" : "symmetric");
    std::vector<double> slopes = params.get<std::vector<double>>("slopes", {});
    params.check(
        ctx.n_heads > 0, "scheme",
        "ALiBi needs the number of attention heads (n_heads), got " + std::to_string(ctx.n_heads));
    if (mode != "causal" && mode != "symmetric") {
      params.error("mode",
                   "expected causal (-m·(i-j)) or symmetric (-m·|i-j|), got '" + mode + "'");
    } else if (mode == "causal" && !ctx.causal) {
      params.error("mode",
                   "ALiBi mode 'causal' (-m·(i-j)) is for causal attention, but this attention is "
                   "bidirectional: future keys would get a growing positive bias; use mode: "
                   "symmetric (-m·|i-j|), or make the model causal");
    }
    // [] (the default, and what the resolved config writes) means the paper's slopes.
    if (params.has("slopes") && !slopes.empty()) {
      params.check(static_cast<int64_t>(slopes.size()) == ctx.n_heads, "slopes",
                   "expected one slope per head: " + std::to_string(ctx.n_heads) + " values, got " +
                       std::to_string(slopes.size()));
      for (double m : slopes) {
        if (!std::isfinite(m) || m < 0) {
          params.error("slopes",
                       "every slope must be a finite number >= 0, got " + std::to_string(m));
          break;
        }
      }
    } else if (ctx.n_heads > 0) {
      slopes = alibi_slopes(ctx.n_heads);
    }
    params.done();
    return std::make_shared<Alibi>(slopes, mode == "symmetric");
  }

 private:
  bool symmetric_;
  torch::Tensor slopes_;  // [H], float
};

}  // namespace

HYBRIDLAB_POSITION_PLUGIN("alibi", "1.0",
                          "ALiBi linear attention biases -m_h(i-j) (Press et al. 2022)",
                          Alibi::create)
