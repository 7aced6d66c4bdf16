// NoPE with Llama 4's attention-temperature tuning: no positional encoding, but the queries of
// far positions are scaled up so that attention over a long context stays sharp.
//
//   q_i ← q_i · (1 + attn_scale · ln(⌊(i + 1)/floor_scale⌋ + 1)),   keys unchanged,
//
// with i the query's absolute 0-based position (HF `cache_position`), attn_scale = 0.1 and
// floor_scale = 8192 as HF Llama4TextConfig (transformers models/llama4, Llama4TextAttention, on
// its NoPE layers only; HF cites SSMax, arXiv 2501.19399). The factor is 1 below
// position floor_scale − 1 and grows by steps of floor_scale positions. It depends on the query
// position alone, so a decoding step must pass the true position (the attention layer passes
// absolute positions to every hook; ports that restart positions at 0 per call are wrong in
// decode). Used with per-layer overrides for Llama 4's iRoPE: RoPE on three layers of four, this
// scheme on every fourth (docs/position-schemes.md). The factor is computed in float64 and cast
// to q's dtype.

#include <cmath>

#include "hybridlab/position.h"

namespace {

using hybridlab::PositionContext;
using hybridlab::PositionTable;
using hybridlab::Section;

class NopeTemperature : public hybridlab::PositionScheme {
 public:
  NopeTemperature(double attn_scale, double floor_scale)
      : attn_scale_(attn_scale), floor_scale_(floor_scale) {}

  std::string name() const override { return "nope_temperature"; }
  uint32_t hooks() const override { return hybridlab::kHookRotate; }

  /// 1 + attn_scale·ln(⌊(pos + 1)/floor_scale⌋ + 1) for positions `pos` [T] -> [T] float64.
  torch::Tensor factor(const torch::Tensor& pos) const {
    const torch::Tensor steps = torch::floor((pos.to(torch::kDouble) + 1.0) / floor_scale_);
    return 1.0 + attn_scale_ * torch::log1p(steps);
  }

  // q [B,H,Tq,Dh] scaled per query position; k returned as it is.
  std::pair<torch::Tensor, torch::Tensor> rotate(const torch::Tensor& q, const torch::Tensor& k,
                                                 const torch::Tensor& q_pos,
                                                 const torch::Tensor&) override {
    const torch::Tensor f = factor(q_pos).to(q.scalar_type()).view({-1, 1});  // [Tq,1]
    return {q * f, k};
  }

  std::vector<PositionTable> inspect(int64_t length) override {
    std::vector<PositionTable> out;
    PositionTable f;
    f.name = "factor";
    f.description = "query scale 1 + attn_scale ln(floor((i+1)/floor_scale) + 1)";
    f.values = factor(torch::arange(length, torch::kLong)).to(torch::kFloat);
    f.columns = {"factor"};
    f.row_label = "query position i";
    out.push_back(f);
    // The first position of each of the first 16 steps (most lengths never reach a step).
    PositionTable s;
    s.name = "steps";
    s.description = "the factor at i = m floor_scale - 1, m = 1..16, where it steps up";
    const torch::Tensor pos = torch::arange(1, 17, torch::kDouble) * floor_scale_ - 1.0;
    s.values = torch::stack({pos, factor(pos.round().to(torch::kLong))}, 1);
    s.columns = {"position", "factor"};
    s.row_label = "step m - 1";
    out.push_back(s);
    return out;
  }

  static std::shared_ptr<hybridlab::PositionScheme> create(Section& params,
                                                           const PositionContext&) {
    const double attn_scale = params.get<double>("attn_scale", 0.1);
    const double floor_scale = params.get<double>("floor_scale", 8192.0);
    params.check(std::isfinite(attn_scale) && attn_scale >= 0, "attn_scale",
                 "must be a finite number >= 0 (Llama 4 uses 0.1; 0 is plain NoPE), got " +
                     std::to_string(attn_scale));
    params.check(std::isfinite(floor_scale) && floor_scale >= 1, "floor_scale",
                 "must be a finite number >= 1 (positions per step; Llama 4 uses 8192), got " +
                     std::to_string(floor_scale));
    params.done();
    return std::make_shared<NopeTemperature>(attn_scale, floor_scale);
  }

 private:
  double attn_scale_, floor_scale_;
};

}  // namespace

HYBRIDLAB_POSITION_PLUGIN("nope_temperature", "1.0",
                          "NoPE with Llama 4's attention-temperature tuning of the queries "
                          "(iRoPE's NoPE layers)",
                          NopeTemperature::create)
