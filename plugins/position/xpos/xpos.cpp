// xPos: rotary embedding with an exponential decay per pair (Sun et al., "A Length-Extrapolatable
// Transformer", ACL 2023, arXiv 2212.10554).
//
// RoPE (Su et al. 2021) rotates pair k of q and k by p·θ_k, θ_k = rope_theta^(−2k/d). xPos also
// scales both members of pair k: q at position n by ζ_k^(n/B) and k at position m by
// ζ_k^(−m/B), with
//   ζ_k = (2k/d + γ) / (1 + γ),   k = 0 … d/2 − 1,   γ = 0.4,   B = scale_base = 512,
// so that the pair's contribution to q·k is multiplied by ζ_k^((n−m)/B): a decay with distance
// for causal attention (ζ_k < 1, n ≥ m). For bidirectional attention (m > n) the factor grows
// instead, so the scheme is refused there (x-transformers asserts causal too).
//
// Storage: the scales are taken at positions relative to a centre c shared by the queries and
// keys of one call, ζ^((n−c)/B) and ζ^(−(m−c)/B); c cancels in every logit. Uncentred, the key
// scale (1/ζ_0)^(m/B) = 3.5^(m/512) passes the fp16 maximum at m ≈ 4.5K. The centre is the
// midpoint ⌊(min + max + 1)/2⌋ of the call's positions (x-transformers' max_pos // 2 when positions
// start at 0; torchscale centres the same way), so the scale stays within (1/ζ_0)^(S/2B) for a
// span S of positions: below fp16's maximum for spans up to about 9K tokens at B = 512 (fewer
// when q or k entries are large, since the scale multiplies them; an fp16 call past it throws),
// any length here in bf16 and fp32. Keys are cached unrotated, so a decoding step rescales every
// cached key with the step's centre: the logits are those of one forward up to rounding. Angles and
// scales are computed in float64 and cast to q's dtype.
//
// Layout: pairs (2k, 2k+1) by default, as torchscale (rotate_every_two) and x-transformers do;
// `layout: half` pairs (k, k + d/2) as the rope plugin's default.

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "hybridlab/position.h"
#include "hybridlab/rotary.h"

namespace {

using hybridlab::PositionContext;
using hybridlab::PositionTable;
using hybridlab::Section;

class Xpos : public hybridlab::PositionScheme {
 public:
  Xpos(int64_t head_dim, double theta, double scale_base, double gamma, bool interleaved,
       int64_t heads)
      : scale_base_(scale_base), interleaved_(interleaved), channels_(heads * head_dim) {
    const int64_t h = head_dim / 2;
    std::vector<double> inv(static_cast<size_t>(h)), zeta(static_cast<size_t>(h));
    for (int64_t k = 0; k < h; ++k) {
      inv[size_t(k)] = 1.0 / std::pow(theta, 2.0 * double(k) / double(head_dim));
      zeta[size_t(k)] = (2.0 * double(k) / double(head_dim) + gamma) / (1.0 + gamma);
    }
    inv_freq_ = torch::tensor(inv, torch::kDouble);
    log_zeta_ = torch::tensor(zeta, torch::kDouble).log();
    log_zeta0_ = std::log(zeta[0]);
  }

  std::string name() const override { return "xpos"; }
  uint32_t hooks() const override { return hybridlab::kHookRotate | hybridlab::kHookFlops; }

  /// Every channel of q and k (one token's): the rotation (2 multiplies, 1 add) and the scale.
  double flops_per_token(int64_t, double) const override {
    return 4.0 * static_cast<double>(channels_);
  }

  /// ζ_k, k = 0 … d/2 − 1 (float64).
  torch::Tensor zeta() const { return log_zeta_.exp(); }

  /// The lowest and highest position of a call.
  static std::pair<int64_t, int64_t> span(const torch::Tensor& q_pos, const torch::Tensor& k_pos) {
    return {std::min(q_pos.min().item<int64_t>(), k_pos.min().item<int64_t>()),
            std::max(q_pos.max().item<int64_t>(), k_pos.max().item<int64_t>())};
  }

  /// The centre of a call: the midpoint ⌊(lo + hi + 1)/2⌋ of every position it holds.
  static int64_t centre(int64_t lo, int64_t hi) {
    const int64_t s = lo + hi + 1;
    return s >= 0 ? s / 2 : -((-s + 1) / 2);  // floor division, right for negative sums too
  }

  /// cos·scale and sin·scale [T, d/2] for positions `pos`, with scale ζ^(sign·(pos − c)/B).
  std::pair<torch::Tensor, torch::Tensor> cos_sin(const torch::Tensor& pos, int64_t c, double sign,
                                                  torch::ScalarType dtype) const {
    const torch::Device dev = pos.device();
    const torch::Tensor p = pos.to(torch::kDouble).unsqueeze(1);
    const torch::Tensor angle = p * inv_freq_.to(dev).unsqueeze(0);
    const torch::Tensor scale =
        (((p - double(c)) * (sign / scale_base_)) * log_zeta_.to(dev).unsqueeze(0)).exp();
    return {(angle.cos() * scale).to(dtype), (angle.sin() * scale).to(dtype)};
  }

  // Rotates (and scales) every pair of x [..., T, head_dim] with c, s [T, head_dim/2].
  torch::Tensor apply(const torch::Tensor& x, const torch::Tensor& c,
                      const torch::Tensor& s) const {
    return hybridlab::rotate_pairs(x, c, s, interleaved_);
  }

  std::pair<torch::Tensor, torch::Tensor> rotate(const torch::Tensor& q, const torch::Tensor& k,
                                                 const torch::Tensor& q_pos,
                                                 const torch::Tensor& k_pos) override {
    const auto [lo, hi] = span(q_pos, k_pos);
    const int64_t c = centre(lo, hi);
    if (q.scalar_type() == torch::kHalf || k.scalar_type() == torch::kHalf) {
      // The largest scale, (1/ζ_0)^(max|p − c|/B), must stay below fp16's maximum; past it the
      // rotated q or k would hold infinities.
      const double worst = double(std::max(hi - c, c - lo)) / scale_base_ * -log_zeta0_;
      if (worst >= std::log(65504.0)) {
        throw std::runtime_error(
            "xpos: positions " + std::to_string(lo) + ".." + std::to_string(hi) +
            " need a scale of e^" + std::to_string(worst) +
            ", past the fp16 maximum 65504 (fp16 holds spans of about 2·B·ln(65504)/ln(1/zeta_0) "
            "positions); use bf16 or fp32, or a larger scale_base");
      }
    }
    const auto [cq, sq] = cos_sin(q_pos, c, +1.0, q.scalar_type());
    const auto [ck, sk] = cos_sin(k_pos, c, -1.0, k.scalar_type());
    return {apply(q, cq, sq), apply(k, ck, sk)};
  }

  std::vector<PositionTable> inspect(int64_t length) override {
    std::vector<PositionTable> out;
    PositionTable f;
    f.name = "zeta";
    f.description = "xPos per-pair decay zeta_k = (2k/d + gamma)/(1 + gamma) and theta_k";
    f.values = torch::stack({zeta(), inv_freq_}, 1).to(torch::kFloat);
    f.columns = {"zeta", "theta"};
    f.row_label = "pair k";
    out.push_back(f);
    const torch::Tensor pos = torch::arange(length, torch::kLong);
    const int64_t c = centre(0, length - 1);
    PositionTable s;
    s.name = "query_scale";
    s.description = "query scale zeta_k^((n - c)/B), centre c = " + std::to_string(c) +
                    " (keys: the reciprocal)";
    s.values =
        (((pos.to(torch::kDouble).unsqueeze(1) - double(c)) / scale_base_) * log_zeta_.unsqueeze(0))
            .exp()
            .to(torch::kFloat);
    s.row_label = "position n";
    s.column_label = "pair k";
    out.push_back(s);
    // As rope's table: q·k/(|q||k|) at distance r for q = k = ones is mean_k cos(rθ_k)·ζ_k^(r/B).
    PositionTable d;
    d.name = "relative_logit";
    d.description =
        "mean_k cos(r theta_k) zeta_k^(r/B): normalised q.k at distance r, q = k = ones";
    const torch::Tensor r = torch::arange(length, torch::kDouble).unsqueeze(1);
    d.values =
        ((r * inv_freq_.unsqueeze(0)).cos() * (r / scale_base_ * log_zeta_.unsqueeze(0)).exp())
            .mean(1)
            .to(torch::kFloat);
    d.columns = {"normalised_qk"};
    d.row_label = "distance r";
    out.push_back(d);
    return out;
  }

  // The largest scale a call over positions 0 … length − 1 applies, (1/ζ_0)^(⌊length/2⌋/B) with
  // centred positions, must be a finite float: past it the scaled q holds infinities, the key
  // scale underflows to 0, and every logit is NaN (inf · 0). Refused at scale_base, which sets it.
  // The float limit holds for fp32 and bf16 models alike (fp16's lower one is checked per call).
  static void check_scale_range(Section& params, double scale_base, double gamma, int64_t length) {
    if (length <= 0) return;  // no length known: nothing to check against
    const double zeta0 = gamma / (1.0 + gamma);
    const int64_t reach = length / 2;  // max |p − c| for c = ⌊length/2⌋ (centre())
    const double worst = double(reach) / scale_base * -std::log(zeta0);
    const double limit = std::log(double(std::numeric_limits<float>::max()));
    params.check(worst < limit, "scale_base",
                 fmt::format("{} makes the scale zeta^(n/B) overflow a float at length {}: "
                             "(1/zeta_0)^({}/B) = e^{:g}, past e^{:.2f}; use scale_base > {:.6g} "
                             "(the paper uses 512)",
                             scale_base, length, reach, worst, limit,
                             double(reach) * -std::log(zeta0) / limit));
  }

  static std::shared_ptr<hybridlab::PositionScheme> create(Section& params,
                                                           const PositionContext& ctx) {
    const double theta = params.get<double>("rope_theta", 10000.0);
    const double scale_base = params.get<double>("scale_base", 512.0);
    const double gamma = params.get<double>("gamma", 0.4);
    const std::string layout = params.get<std::string>("layout", "interleaved");
    params.check(std::isfinite(theta) && theta > 1, "rope_theta",
                 "must be a finite number > 1, got " + std::to_string(theta));
    params.check(std::isfinite(scale_base) && scale_base > 0, "scale_base",
                 "must be a finite number > 0 (B in zeta^(n/B); the paper uses 512), got " +
                     std::to_string(scale_base));
    params.check(std::isfinite(gamma) && gamma > 0, "gamma",
                 "must be a finite number > 0 (zeta_0 = gamma/(1+gamma) must be > 0; the paper "
                 "uses 0.4), got " +
                     std::to_string(gamma));
    if (std::isfinite(scale_base) && scale_base > 0 && std::isfinite(gamma) && gamma > 0)
      check_scale_range(params, scale_base, gamma, std::max(ctx.max_length, ctx.train_length));
    params.check(layout == "half" || layout == "interleaved", "layout",
                 "expected interleaved (pairs (2k, 2k+1), torchscale and x-transformers) or half "
                 "(pairs (k, k+d/2)), got '" +
                     layout + "'");
    params.check(ctx.head_dim > 0 && ctx.head_dim % 2 == 0, "scheme",
                 "xPos rotates channel pairs, so head_dim must be even and > 0; got head_dim " +
                     std::to_string(ctx.head_dim));
    params.check(ctx.causal, "scheme",
                 "xPos is for causal attention: with keys after the query its factor "
                 "zeta^((n-m)/B) grows with distance instead of decaying (x-transformers refuses "
                 "it too); use rope for bidirectional attention");
    params.done();
    const int64_t kv_heads = ctx.n_kv_heads > 0 ? ctx.n_kv_heads : ctx.n_heads;
    return std::make_shared<Xpos>(ctx.head_dim, theta, scale_base, gamma, layout == "interleaved",
                                  ctx.n_heads + kv_heads);
  }

 private:
  double scale_base_, log_zeta0_ = 0;  // ln ζ_0: the fastest-growing scale
  bool interleaved_;
  int64_t channels_;  // channels of one token's q and k together: (n_heads + n_kv_heads)·head_dim
  torch::Tensor inv_freq_, log_zeta_;  // [d/2] float64
};

}  // namespace

HYBRIDLAB_POSITION_PLUGIN("xpos", "1.0",
                          "xPos: rotary with a per-pair exponential decay, centred positions "
                          "(Sun et al. 2023)",
                          Xpos::create)
