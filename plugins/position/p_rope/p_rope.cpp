// p-RoPE: rotary embedding on the highest frequencies only (Barbero et al., "Round and Round We
// Go! What makes Rotary Positional Encodings useful?", ICLR 2025, arXiv 2410.06205).
//
// RoPE over the whole head: θ_k = rope_theta^(−2k/d), k = 0 … d/2 − 1, d = head_dim. p-RoPE keeps
// the top fraction p of this spectrum and sets the lowest 1 − p to θ = 0, so those pairs carry
// no position (NoPE channels: the paper finds the lowest frequencies used as semantic channels,
// which rotation corrupts over long distances). p = 1 is RoPE; p → 0 approaches NoPE. The kept
// count is ⌊p·d/2⌋ pairs (the paper's rounding of p·d/2 is not stated; HF's partial rotary
// truncates the same way).
//
// This is not the rope plugin's partial_rotary_factor at the same fraction: HF's partial rotary
// squeezes the whole range into d_rot = p·d channels, θ_k = base^(−2k/d_rot), k < d_rot/2. At
// d = 256, p = 0.25 both rotate 32 pairs, but p-RoPE's slowest is base^(−62/256) and partial's
// base^(−62/64).
//
// Pairs are (k, k + d/2) (layout half, rotate_half as in Gemma) or (2k, 2k + 1) (interleaved).
// The dropped pairs are multiplied by cos 0 = 1 and sin 0 = 0, which is exact, so they pass
// through bit for bit. Angles are computed in float64 and cast to q's dtype.

#include <cmath>

#include "hybridlab/position.h"
#include "hybridlab/rotary.h"

namespace {

using hybridlab::PositionContext;
using hybridlab::PositionTable;
using hybridlab::Section;

class PRope : public hybridlab::PositionScheme {
 public:
  PRope(int64_t head_dim, double theta, int64_t kept, bool interleaved, int64_t heads)
      : head_dim_(head_dim), kept_(kept), interleaved_(interleaved), heads_(heads) {
    std::vector<double> inv(static_cast<size_t>(head_dim / 2), 0.0);
    for (int64_t k = 0; k < kept; ++k)
      inv[size_t(k)] = 1.0 / std::pow(theta, 2.0 * double(k) / double(head_dim));
    inv_freq_ = torch::tensor(inv, torch::kDouble);
  }

  std::string name() const override { return "p_rope"; }
  uint32_t hooks() const override { return hybridlab::kHookRotate | hybridlab::kHookFlops; }

  /// Every pair of q and k is rotated (the dropped frequencies by angle 0): 3 per channel.
  double flops_per_token(int64_t, double) const override {
    return 3.0 * static_cast<double>(heads_ * head_dim_);
  }

  // cos and sin [T, d/2] of pos·θ (float64 angles) in `dtype`.
  std::pair<torch::Tensor, torch::Tensor> cos_sin(const torch::Tensor& pos,
                                                  torch::ScalarType dtype) const {
    const torch::Tensor angle =
        pos.to(torch::kDouble).unsqueeze(1) * inv_freq_.to(pos.device()).unsqueeze(0);
    return {angle.cos().to(dtype), angle.sin().to(dtype)};
  }

  // Rotates every pair of x [..., T, head_dim] with c, s [T, head_dim/2].
  torch::Tensor apply(const torch::Tensor& x, const torch::Tensor& c,
                      const torch::Tensor& s) const {
    return hybridlab::rotate_pairs(x, c, s, interleaved_);
  }

  std::pair<torch::Tensor, torch::Tensor> rotate(const torch::Tensor& q, const torch::Tensor& k,
                                                 const torch::Tensor& q_pos,
                                                 const torch::Tensor& k_pos) override {
    const auto [cq, sq] = cos_sin(q_pos, q.scalar_type());
    if (q_pos.is_same(k_pos) && q.scalar_type() == k.scalar_type()) {
      return {apply(q, cq, sq), apply(k, cq, sq)};
    }
    const auto [ck, sk] = cos_sin(k_pos, k.scalar_type());
    return {apply(q, cq, sq), apply(k, ck, sk)};
  }

  std::vector<PositionTable> inspect(int64_t length) override {
    std::vector<PositionTable> out;
    PositionTable f;
    f.name = "inv_freq";
    f.description = "p-RoPE theta_k: the top " + std::to_string(kept_) + " of " +
                    std::to_string(head_dim_ / 2) + " RoPE frequencies, the rest 0 (NoPE)";
    f.values = inv_freq_.clone();
    f.columns = {"theta"};
    f.row_label = "pair k";
    out.push_back(f);
    const torch::Tensor pos = torch::arange(length, torch::kLong);
    PositionTable c;
    c.name = "cos";
    c.description = "cos(p theta_k) (1 on the NoPE pairs)";
    c.values = cos_sin(pos, torch::kFloat).first;
    c.row_label = "position p";
    c.column_label = "pair k";
    out.push_back(c);
    PositionTable decay;
    decay.name = "relative_logit";
    decay.description = "mean_k cos(r theta_k): normalised q.k at distance r for q = k = ones";
    const torch::Tensor r = torch::arange(length, torch::kDouble).unsqueeze(1);
    decay.values = (r * inv_freq_.unsqueeze(0)).cos().mean(1).to(torch::kFloat);
    decay.columns = {"normalised_qk"};
    decay.row_label = "distance r";
    out.push_back(decay);
    return out;
  }

  static std::shared_ptr<hybridlab::PositionScheme> create(Section& params,
                                                           const PositionContext& ctx) {
    const double theta = params.get<double>("rope_theta", 10000.0);
    const double p = params.get<double>("p", 0.75);
    const std::string layout = params.get<std::string>("layout", "half");
    params.check(std::isfinite(theta) && theta > 1, "rope_theta",
                 "must be a finite number > 1, got " + std::to_string(theta));
    params.check(
        layout == "half" || layout == "interleaved", "layout",
        "expected half (pairs (k, k+d/2)) or interleaved (pairs (2k, 2k+1)), got '" + layout + "'");
    int64_t kept = 0;
    if (ctx.head_dim <= 0 || ctx.head_dim % 2 != 0) {
      params.error("scheme",
                   "p-RoPE rotates channel pairs, so head_dim must be even and > 0; got head_dim " +
                       std::to_string(ctx.head_dim));
    } else if (!(p > 0 && p <= 1)) {  // also refuses NaN
      params.error("p", "must be in (0, 1] (the share of RoPE frequencies kept; 1 is RoPE), got " +
                            std::to_string(p));
    } else {
      kept = static_cast<int64_t>(p * double(ctx.head_dim / 2));
      params.check(kept >= 1, "p",
                   "keeps no frequency: floor(p * head_dim/2) = floor(" + std::to_string(p) +
                       " * " + std::to_string(ctx.head_dim / 2) +
                       ") = 0; use p >= " + std::to_string(2.0 / double(ctx.head_dim)) +
                       ", or nope for no rotary at all");
    }
    params.done();
    const int64_t kv_heads = ctx.n_kv_heads > 0 ? ctx.n_kv_heads : ctx.n_heads;
    return std::make_shared<PRope>(ctx.head_dim, theta, kept, layout == "interleaved",
                                   ctx.n_heads + kv_heads);
  }

 private:
  int64_t head_dim_, kept_;
  bool interleaved_;
  int64_t heads_;           // query plus key heads: the rows rotated per token
  torch::Tensor inv_freq_;  // [d/2] float64, 0 past the kept pairs
};

}  // namespace

HYBRIDLAB_POSITION_PLUGIN("p_rope", "1.0",
                          "p-RoPE: RoPE on the top fraction p of frequencies, the rest NoPE "
                          "(Barbero et al. 2025)",
                          PRope::create)
