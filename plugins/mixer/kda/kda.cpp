// Kimi Delta Attention (KDA; Kimi Team, "Kimi Linear: An Expressive, Efficient Attention
// Architecture", arXiv 2510.26692, §3–4), as fla-org/flash-linear-attention@bc3b101d
// `fla/layers/kda.py` and `fla/ops/kda/gate.py` build it:
//   q, k = L2Norm(SiLU(ShortConv(W x)));  v = SiLU(ShortConv(W_v x))     conv 4, no bias
//   β = σ(W_β x) per head (×2 with allow_neg_eigval, fla's option: β ∈ (0, 2))
//   g = −exp(A_log[h]) · softplus(W_f↑ W_f↓ x + dt_bias[h, c])   per key channel, in fp32
//       (eq. 10; with lower_bound < 0 the bounded "safe gate" lower_bound · σ(exp(A_log)(f +
//       dt_bias)))
//   h ← Diag(e^{g_t}) h;  h ← h + β_t k_t (v_t − hᵀ k_t)ᵀ;  o_t = hᵀ q_t / √d_k
//   out = W_o [σ(W_g↑ W_g↓ x) ⊙ RMSNorm_head(o)]        (a sigmoid gate: the report found swish
//   worse)
// The low-rank projections have rank head_dim (W_f↓, W_g↓: d_model → head_dim; W_g↑ has a bias).
// Inits: A_log = ln U(1, 16) (0 with the bounded gate), dt_bias as Mamba2's dt (inverse softplus of
// exp(U(ln 1e-3, ln 0.1)) ≥ 1e-4), per channel. Whole sequences run the chunked form, one-token
// steps the recurrence (hybridlab/mixer_ops.h: chunk_kda, recurrent_kda).

#include <torch/torch.h>

#include <cmath>
#include <string>

#include "hybridlab/mixer.h"
#include "hybridlab/mixer_ops.h"
#include "hybridlab/recurrent_mixer.h"

namespace {

using hybridlab::Mixer;
using hybridlab::MixerCache;
using hybridlab::MixerContext;
using hybridlab::MixerInfo;
using hybridlab::Section;

struct KdaOptions {
  int64_t num_heads = 4;
  int64_t head_dim = 0;   ///< d_k; 0 = d_model / num_heads
  double expand_v = 1.0;  ///< d_v = head_dim · expand_v
  int64_t conv_size = 4;
  double lower_bound = 0;  ///< < 0: the bounded gate lower_bound · σ(·); 0: the unbounded one
  double norm_eps = 1e-5;
  int64_t chunk_size = 16;
  std::string mode = "chunk";  ///< whole sequences: "chunk" or "recurrent" (the oracle)
  bool fused_kernels = true;
  bool allow_neg_eigval = false;  ///< β ∈ (0, 2): eigenvalues of I − βkkᵀ in (−1, 1]
};

struct KdaCache : MixerCache {
  torch::Tensor conv_q, conv_k, conv_v;  ///< [B, conv_size − 1, C]
  torch::Tensor state;                   ///< [B, H, d_k, d_v], fp32
  int64_t nbytes() const override { return bytes_of({&conv_q, &conv_k, &conv_v, &state}); }
};

class Kda : public hybridlab::RecurrentMixer<KdaCache> {
 public:
  Kda(const KdaOptions& o, int64_t d_model)
      : RecurrentMixer(o.chunk_size),
        o_(o),
        d_model_(d_model),
        dk_(o.head_dim > 0 ? o.head_dim : d_model / o.num_heads),
        dv_(std::llround(dk_ * o.expand_v)) {
    using torch::nn::Linear;
    using torch::nn::LinearOptions;
    const int64_t H = o.num_heads, kw = H * dk_, vw = H * dv_;
    auto linear = [&](const char* name, int64_t in, int64_t out, bool bias) {
      return register_module(name, Linear(LinearOptions(in, out).bias(bias)));
    };
    q_proj = linear("q_proj", d_model, kw, false);
    k_proj = linear("k_proj", d_model, kw, false);
    v_proj = linear("v_proj", d_model, vw, false);
    b_proj = linear("b_proj", d_model, H, false);
    f_down = linear("f_down", d_model, dk_, false);
    f_up = linear("f_up", dk_, kw, false);
    g_down = linear("g_down", d_model, dv_, false);
    g_up = linear("g_up", dv_, vw, true);
    o_proj = linear("o_proj", vw, d_model, false);
    const double bound = 1.0 / std::sqrt(static_cast<double>(o.conv_size));
    auto conv = [&](const char* name, int64_t width) {
      return register_parameter(name,
                                torch::empty({width, 1, o.conv_size}).uniform_(-bound, bound));
    };
    q_conv = conv("q_conv", kw);
    k_conv = conv("k_conv", kw);
    v_conv = conv("v_conv", vw);
    A_log = register_parameter(
        "A_log", o.lower_bound < 0 ? torch::zeros({H}) : torch::empty({H}).uniform_(1, 16).log());
    const torch::Tensor dt = (torch::rand({kw}) * (std::log(0.1) - std::log(1e-3)) + std::log(1e-3))
                                 .exp()
                                 .clamp_min(1e-4);
    dt_bias = register_parameter("dt_bias", dt + torch::log(-torch::expm1(-dt)));  // softplus⁻¹
    o_norm_weight = register_parameter("o_norm_weight", torch::ones({dv_}));
  }

  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& /*positions*/,
                        MixerCache* cache_base) override {
    TORCH_CHECK(x.dim() == 3 && x.size(2) == d_model_, "kda: x must be [B,T,", d_model_, "], got ",
                x.sizes());
    auto* cache = dynamic_cast<KdaCache*>(cache_base);
    TORCH_CHECK(!cache_base || cache, "kda: the cache was not made by this mixer");
    const int64_t B = x.size(0), T = x.size(1), H = o_.num_heads;
    const bool fused = o_.fused_kernels;
    auto conv = [&](torch::nn::Linear& p, const torch::Tensor& w, torch::Tensor* tail) {
      return hybridlab::short_conv_with_tail(p(x), w, tail, fused);
    };
    const torch::Tensor q = hybridlab::l2_normalize(
        conv(q_proj, q_conv, cache ? &cache->conv_q : nullptr).view({B, T, H, dk_}), 1e-6, fused);
    const torch::Tensor k = hybridlab::l2_normalize(
        conv(k_proj, k_conv, cache ? &cache->conv_k : nullptr).view({B, T, H, dk_}), 1e-6, fused);
    const torch::Tensor v =
        conv(v_proj, v_conv, cache ? &cache->conv_v : nullptr).view({B, T, H, dv_});
    const torch::Tensor g = gate(x).view({B, T, H, dk_}).transpose(1, 2);  // [B,H,T,dk]
    torch::Tensor beta = torch::sigmoid(b_proj(x)).transpose(1, 2);        // [B,H,T]
    if (o_.allow_neg_eigval) beta = beta * 2;
    // Observers get the per-channel log decay averaged over each head's channels, and β.
    if (probes().gates) probes().gates(g.mean(-1).to(torch::kFloat), beta.to(torch::kFloat));
    const double scale = 1.0 / std::sqrt(static_cast<double>(dk_));
    const torch::Tensor h0 = cache ? cache->state : torch::Tensor();
    const torch::Tensor qh = q.transpose(1, 2), kh = k.transpose(1, 2), vh = v.transpose(1, 2);
    const bool recurrent = o_.mode == "recurrent" || (cache && T == 1);
    const hybridlab::GatedDeltaResult r =
        recurrent ? hybridlab::recurrent_kda(qh, kh, vh, g, beta, scale, h0)
                  : hybridlab::chunk_kda(qh, kh, vh, g, beta, scale, h0, o_.chunk_size);
    if (cache) cache->state = r.state;
    torch::Tensor o = r.o.transpose(1, 2);                   // [B,T,H,dv]
    o = hybridlab::rms_norm(o, o_norm_weight, o_.norm_eps);  // per head, over d_v
    o = o * torch::sigmoid(g_up(g_down(x))).view({B, T, H, dv_});
    return o_proj(o.reshape({B, T, H * dv_}));
  }

  std::unique_ptr<MixerCache> make_cache() const override { return std::make_unique<KdaCache>(); }

  MixerInfo info(int64_t length) const override {
    MixerInfo m;
    const int64_t H = o_.num_heads, kw = H * dk_, vw = H * dv_;
    m.state_floats = H * dk_ * dv_ + (o_.conv_size - 1) * (2 * kw + vw);
    const double C =
        static_cast<double>(std::min<int64_t>(o_.chunk_size, std::max<int64_t>(length, 1)));
    const double dk = static_cast<double>(dk_), dv = static_cast<double>(dv_);
    // Per head and token: the pairwise A_qk and A_kk (4C·dk each with the decay), the solve
    // (C·(dk + dv)), W h, Q h, A_qk V' and the state update (2dk·dv each, C·dv).
    const double kernel = H * (8 * C * dk + C * (dk + dv) + 6 * dk * dv + 2 * C * dv);
    const double proj = 2.0 * d_model_ * (2 * kw + vw + H + dk_ + dv_) + 2.0 * dk_ * kw +
                        2.0 * dv_ * vw + 2.0 * vw * d_model_;
    m.flops_per_token = proj + 2.0 * o_.conv_size * (2 * kw + vw) + kernel;
    m.details = "H=" + std::to_string(H) + " dk=" + std::to_string(dk_) +
                " dv=" + std::to_string(dv_) + " chunk=" + std::to_string(o_.chunk_size) +
                (o_.lower_bound < 0 ? " safe_gate" : "") + (o_.allow_neg_eigval ? " beta<2" : "");
    return m;
  }

  torch::nn::Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, b_proj{nullptr},
      f_down{nullptr}, f_up{nullptr}, g_down{nullptr}, g_up{nullptr}, o_proj{nullptr};
  torch::Tensor q_conv, k_conv, v_conv, A_log, dt_bias, o_norm_weight;

 private:
  // The per-channel log decay [B,T,H·dk] in fp32 (fp64 for fp64 x): eq. 10, or the bounded form.
  torch::Tensor gate(const torch::Tensor& x) {
    const auto ft = x.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
    const int64_t H = o_.num_heads;
    const torch::Tensor f = (f_up(f_down(x)).to(ft) + dt_bias.to(ft)).unflatten(-1, {H, dk_});
    const torch::Tensor A = A_log.to(ft).exp().unsqueeze(-1);  // [H,1]
    const torch::Tensor g =
        o_.lower_bound < 0 ? o_.lower_bound * torch::sigmoid(A * f) : -A * torch::softplus(f);
    return g.flatten(-2);
  }

  KdaOptions o_;
  int64_t d_model_, dk_, dv_;
};

std::shared_ptr<Mixer> create(Section& s, const MixerContext& ctx) {
  KdaOptions o;
  o.num_heads = s.get<int64_t>("num_heads", o.num_heads);
  o.head_dim = s.get<int64_t>("head_dim", o.head_dim);
  o.expand_v = s.get<double>("expand_v", o.expand_v);
  o.conv_size = s.get<int64_t>("conv_size", o.conv_size);
  o.lower_bound = s.get<double>("lower_bound", o.lower_bound);
  o.norm_eps = s.get<double>("norm_eps", o.norm_eps);
  o.chunk_size = s.get<int64_t>("chunk_size", o.chunk_size);
  o.mode = s.get<std::string>("mode", o.mode);
  o.allow_neg_eigval = s.get<bool>("allow_neg_eigval", o.allow_neg_eigval);
  o.fused_kernels = ctx.fused_kernels;
  const bool heads_ok = o.num_heads >= 1 && o.num_heads <= 1024;
  s.check(heads_ok, "num_heads", "must be in [1, 1024]");
  s.check(o.head_dim >= 0 && o.head_dim <= 1024, "head_dim",
          "must be in [0, 1024] (0 = d_model / num_heads)");
  s.check(o.expand_v > 0 && o.expand_v <= 16, "expand_v", "must be in (0, 16]");
  if (heads_ok && o.head_dim == 0) {
    s.check(ctx.d_model % o.num_heads == 0, "num_heads",
            "must divide d_model = " + std::to_string(ctx.d_model) + " unless head_dim is set");
  }
  const int64_t dk = o.head_dim > 0 ? o.head_dim : ctx.d_model / std::max<int64_t>(o.num_heads, 1);
  if (heads_ok && o.head_dim >= 0 && o.head_dim <= 1024 && o.expand_v > 0 && o.expand_v <= 16) {
    s.check(dk >= 1 && std::llround(dk * o.expand_v) >= 1, "expand_v",
            "gives d_v = head_dim · expand_v = " + std::to_string(std::llround(dk * o.expand_v)) +
                "; it must be >= 1");
  }
  s.check(o.conv_size >= 1 && o.conv_size <= 64, "conv_size", "must be in [1, 64]");
  // The pairwise chunked form is exact for any gate (fla's exp2 kernels need |lower_bound| <=
  // 5.9); below -100 every key is forgotten at once, and the decay underflows.
  s.check(o.lower_bound >= -100 && o.lower_bound <= 0, "lower_bound",
          "must be 0 (the unbounded gate) or in [-100, 0) (the bounded gate; fla uses -5)");
  s.check(o.norm_eps > 0 && o.norm_eps < 1, "norm_eps", "must be in (0, 1)");
  s.check(o.chunk_size >= 1 && o.chunk_size <= 256, "chunk_size",
          "must be in [1, 256] (memory grows as T · chunk_size · head_dim)");
  s.check(o.mode == "chunk" || o.mode == "recurrent", "mode",
          "must be 'chunk' or 'recurrent', got '" + o.mode + "'");
  s.done();
  return std::make_shared<Kda>(o, ctx.d_model);
}

}  // namespace

// chunk_size: a way of computing the same map, so an evaluation variant may change it.
HYBRIDLAB_MIXER_PLUGIN_EVAL_SAFE(
    "kda", 'K', "1.0",
    "Kimi Delta Attention: the delta rule with per-channel decay (Kimi Linear, 2025)", "chunk_size",
    create)
