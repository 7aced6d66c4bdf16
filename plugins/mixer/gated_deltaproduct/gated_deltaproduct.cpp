// Gated DeltaProduct (Siems, Carstensen, Zela, Hutter, Pontil & Grazzi, "DeltaProduct: Improving
// State-Tracking in Linear RNNs via Householder Products", arXiv 2502.10297), as
// fla-org/flash-linear-attention@bc3b101d `fla/layers/gated_deltaproduct.py` builds it. Per token t
// the state decays once and then takes n_h = num_householder delta-rule steps, each with its own
// key, value and β:
//   S ← e^{g_t} S;   for j = 1..n_h:  S ← (I − β_{t,j} k_{t,j} k_{t,j}ᵀ) S + β_{t,j} k_{t,j}
//   v_{t,j}ᵀ o_t = Sᵀ (q_t / √d_k)          (read once, after the last step)
// so the transition is the gate times a product of n_h generalised Householder matrices: diagonal
// plus rank n_h, a rotation for n_h ≥ 2 (one reflection cannot rotate), norm ≤ 1 for β ∈ [0, 2].
// The layer: q = L2Norm(SiLU(ShortConv(W_q x))) once per token; k, v and β n_h times (one
// projection each of n_h·width channels, laid out (n_h, heads, dim) as fla's rearrange
// `(n h d)`); g = −exp(A_log)·softplus(W_a x + dt_bias) as Gated DeltaNet's; β = σ(W_β x), ×2 with
// allow_neg_eigval (fla's default for this layer: on); out = W_o (RMSNorm_head(o) ⊙ SiLU(W_g x)).
// Training runs the paper's chunked form: the n_h steps interleaved as tokens of a sequence n_h
// times longer (position t·n_h + j holds k_{t,j}, v_{t,j}, β_{t,j}; g_t sits at j = 0 and 0 at the
// others; q_t at the last step, zeros elsewhere), through Gated DeltaNet's chunked kernels
// (hybridlab/mixer_ops.h), and reads every n_h-th output. Decoding runs the recurrence over the
// same interleaved steps. With n_h = 1 the layer is Gated DeltaNet's.
// Defaults are fla's except the head size: n_h 2, expand_v 2, conv 4 without bias, output gate,
// forget gate, negative eigenvalues on, norm eps 1e-5, chunk 64; 4 heads of d_model / 4 (fla's
// head_dim 256 and 6 heads are sized for d_model 2048) as hybridlab's Gated DeltaNet.

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

struct GatedDeltaProductOptions {
  int64_t num_householder = 2;  ///< n_h: delta-rule (Householder) steps per token
  int64_t num_heads = 4;        ///< key (and query) heads
  int64_t num_v_heads = 0;      ///< value heads (GVA); 0 = num_heads; a multiple of num_heads
  int64_t head_dim = 0;         ///< d_k; 0 = d_model / num_heads
  double expand_v = 2.0;        ///< d_v = head_dim · expand_v
  int64_t conv_size = 4;
  bool use_short_conv = true;
  bool use_forget_gate = true;   ///< the decay e^{g_t}; off: the plain DeltaProduct
  bool use_output_gate = true;   ///< SiLU(W_g x) gates the normed output
  bool allow_neg_eigval = true;  ///< β ∈ (0, 2): each step's eigenvalue along k in (−1, 1]
  double norm_eps = 1e-5;
  int64_t chunk_size = 64;     ///< of the interleaved sequence (n_h steps per token)
  std::string mode = "chunk";  ///< whole sequences: "chunk" or "recurrent" (the oracle)
  bool fused_kernels = true;
};

struct GatedDeltaProductCache : MixerCache {
  torch::Tensor conv_q, conv_k, conv_v;  ///< [B,conv_size−1,C], undefined when empty
  torch::Tensor state;                   ///< [B,Hv,d_k,d_v], undefined when empty
  int64_t nbytes() const override { return bytes_of({&conv_q, &conv_k, &conv_v, &state}); }
};

// [B,T,C] → [B,T·n,C]: x at sub-step `at` of each token, zeros at the other n − 1 (differentiable).
torch::Tensor spread(const torch::Tensor& x, int64_t n, int64_t at) {
  if (n == 1) return x;
  std::vector<int64_t> zshape = x.sizes().vec();
  zshape.insert(zshape.begin() + 2, 1);
  const torch::Tensor zero = torch::zeros(zshape, x.options());
  std::vector<torch::Tensor> parts(static_cast<size_t>(n), zero);
  parts[static_cast<size_t>(at)] = x.unsqueeze(2);
  std::vector<int64_t> out = x.sizes().vec();
  out[1] *= n;
  return torch::cat(parts, 2).view(out);
}

class GatedDeltaProduct : public hybridlab::RecurrentMixer<GatedDeltaProductCache> {
 public:
  GatedDeltaProduct(const GatedDeltaProductOptions& o, int64_t d_model)
      // A state-reset knock-out restarts the state every chunk of interleaved steps (in tokens).
      : RecurrentMixer(std::max<int64_t>(1, o.chunk_size / o.num_householder)),
        o_(o),
        d_model_(d_model),
        nh_(o.num_householder),
        hk_(o.num_heads),
        hv_(o.num_v_heads > 0 ? o.num_v_heads : o.num_heads),
        dk_(o.head_dim > 0 ? o.head_dim : d_model / o.num_heads),
        dv_(std::llround(dk_ * o.expand_v)),
        kw_(hk_ * dk_),
        vw_(hv_ * dv_) {
    using torch::nn::Linear;
    using torch::nn::LinearOptions;
    auto linear = [&](const char* name, int64_t out) {
      return register_module(name, Linear(LinearOptions(d_model, out).bias(false)));
    };
    q_proj = linear("q_proj", kw_);
    k_proj = linear("k_proj", nh_ * kw_);
    v_proj = linear("v_proj", nh_ * vw_);
    b_proj = linear("b_proj", nh_ * hv_);
    if (o.use_forget_gate) {
      a_proj = linear("a_proj", hv_);
      // fla / NVlabs: A = U(0, 16) kept away from 0; dt_bias = softplus⁻¹(exp(U(ln 1e-3, ln 0.1)))
      // clamped ≥ 1e-4 (as hybridlab's Gated DeltaNet).
      A_log =
          register_parameter("A_log", torch::empty({hv_}).uniform_(0, 16).clamp_min(1e-4).log());
      const torch::Tensor dt =
          (torch::rand({hv_}) * (std::log(0.1) - std::log(1e-3)) + std::log(1e-3))
              .exp()
              .clamp_min(1e-4);
      dt_bias = register_parameter("dt_bias", dt + torch::log(-torch::expm1(-dt)));
    }
    if (o.use_output_gate) g_proj = linear("g_proj", vw_);
    o_proj = register_module("o_proj", Linear(LinearOptions(vw_, d_model).bias(false)));
    if (o.use_short_conv) {
      // nn.Conv1d's default init: U(±1/sqrt(fan_in)), fan_in = kernel size; no bias (fla).
      const double bound = 1.0 / std::sqrt(static_cast<double>(o.conv_size));
      auto conv = [&](const char* name, int64_t width) {
        return register_parameter(name,
                                  torch::empty({width, 1, o.conv_size}).uniform_(-bound, bound));
      };
      q_conv = conv("q_conv", kw_);
      k_conv = conv("k_conv", nh_ * kw_);
      v_conv = conv("v_conv", nh_ * vw_);
    }
    o_norm_weight = register_parameter("o_norm_weight", torch::ones({dv_}));
  }

  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& /*positions*/,
                        MixerCache* cache_base) override {
    TORCH_CHECK(x.dim() == 3 && x.size(2) == d_model_, "gated_deltaproduct: x must be [B,T,",
                d_model_, "], got ", x.sizes());
    auto* cache = dynamic_cast<GatedDeltaProductCache*>(cache_base);
    TORCH_CHECK(!cache_base || cache, "gated_deltaproduct: the cache was not made by this mixer");
    const int64_t B = x.size(0), T = x.size(1), TN = T * nh_;
    const bool fused = o_.fused_kernels;
    auto conv = [&](torch::nn::Linear& p, const torch::Tensor& w, torch::Tensor* tail) {
      if (!o_.use_short_conv) return torch::silu(p(x));
      return hybridlab::short_conv_with_tail(p(x), w, tail, fused);  // tail: null without a cache
    };
    torch::Tensor q = conv(q_proj, q_conv, cache ? &cache->conv_q : nullptr);  // [B,T,kw]
    torch::Tensor k = conv(k_proj, k_conv, cache ? &cache->conv_k : nullptr);  // [B,T,n_h·kw]
    torch::Tensor v = conv(v_proj, v_conv, cache ? &cache->conv_v : nullptr);  // [B,T,n_h·vw]
    q = hybridlab::l2_normalize(q.view({B, T, hk_, dk_}), 1e-6, fused);
    k = hybridlab::l2_normalize(k.view({B, TN, hk_, dk_}), 1e-6, fused);  // (t, j) → t·n_h + j
    q = spread(q, nh_, nh_ - 1).transpose(1, 2);                          // [B,Hk,TN,dk]
    k = k.transpose(1, 2);
    v = v.view({B, TN, hv_, dv_}).transpose(1, 2);  // [B,Hv,TN,dv]
    const auto ft = x.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
    // β in the gate's dtype, as Gated DeltaNet's layer computes it.
    torch::Tensor beta = torch::sigmoid(b_proj(x).to(ft)).view({B, TN, hv_});
    if (o_.allow_neg_eigval) beta = beta * 2;
    const torch::Tensor g_token = o_.use_forget_gate
                                      ? hybridlab::gated_delta_gate(a_proj(x), A_log, dt_bias)
                                      : torch::zeros({B, T, hv_}, x.options().dtype(ft));
    if (probes().gates) {  // per token: the gate and the mean β of its n_h steps
      probes().gates(g_token.transpose(1, 2).to(torch::kFloat),
                     beta.view({B, T, nh_, hv_}).mean(2).transpose(1, 2).to(torch::kFloat));
    }
    const torch::Tensor g = spread(g_token, nh_, 0).transpose(1, 2);  // [B,Hv,TN]
    beta = beta.transpose(1, 2);
    const double scale = 1.0 / std::sqrt(static_cast<double>(dk_));
    const torch::Tensor h0 = cache ? cache->state : torch::Tensor();
    const bool recurrent = o_.mode == "recurrent" || (cache && T == 1);
    const hybridlab::GatedDeltaResult r =
        recurrent
            ? hybridlab::recurrent_gated_delta_rule(q, k, v, g, beta, scale, h0)
            : hybridlab::chunk_gated_delta_rule(q, k, v, g, beta, scale, h0, o_.chunk_size, fused);
    if (cache) cache->state = r.state;
    // The output after each token's last step: [B,Hv,T,n_h,dv] at j = n_h − 1.
    torch::Tensor o = r.o.view({B, hv_, T, nh_, dv_}).select(3, nh_ - 1).transpose(1, 2);
    o = hybridlab::rms_norm(o, o_norm_weight, o_.norm_eps);  // per head, over d_v
    if (o_.use_output_gate) o = o * torch::silu(g_proj(x)).view({B, T, hv_, dv_});
    return o_proj(o.reshape({B, T, vw_}));
  }

  std::unique_ptr<MixerCache> make_cache() const override {
    return std::make_unique<GatedDeltaProductCache>();
  }

  MixerInfo info(int64_t length) const override {
    MixerInfo m;
    const int64_t taps = o_.use_short_conv ? o_.conv_size - 1 : 0;
    const int64_t conv_width = kw_ + nh_ * (kw_ + vw_);
    m.state_floats = hv_ * dk_ * dv_ + taps * conv_width;
    // The chunked kernel runs n_h interleaved steps per token, each costing Gated DeltaNet's
    // per-token count 6C·dk + 4C·dv + 6·dk·dv + C²/3 per value head (C the chunk of steps).
    const double C =
        static_cast<double>(std::min<int64_t>(o_.chunk_size, std::max<int64_t>(length * nh_, 1)));
    const double dk = static_cast<double>(dk_), dv = static_cast<double>(dv_);
    const double kernel = nh_ * hv_ * (6 * C * dk + 4 * C * dv + 6 * dk * dv + C * C / 3);
    const double proj = 2.0 * d_model_ *
                            (conv_width + nh_ * hv_ + (o_.use_forget_gate ? hv_ : 0) +
                             (o_.use_output_gate ? vw_ : 0)) +
                        2.0 * vw_ * d_model_;
    const double conv = o_.use_short_conv ? 2.0 * o_.conv_size * conv_width : 0;
    m.flops_per_token = proj + conv + kernel;
    m.details = "n_h=" + std::to_string(nh_) + " Hk=" + std::to_string(hk_) +
                " Hv=" + std::to_string(hv_) + " dk=" + std::to_string(dk_) +
                " dv=" + std::to_string(dv_) +
                " conv=" + (o_.use_short_conv ? std::to_string(o_.conv_size) : std::string("off")) +
                " chunk=" + std::to_string(o_.chunk_size) + (o_.allow_neg_eigval ? " beta<2" : "") +
                (o_.use_forget_gate ? "" : " no_decay");
    return m;
  }

  torch::nn::Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, a_proj{nullptr},
      b_proj{nullptr}, g_proj{nullptr}, o_proj{nullptr};
  torch::Tensor q_conv, k_conv, v_conv, A_log, dt_bias, o_norm_weight;

 private:
  GatedDeltaProductOptions o_;
  int64_t d_model_, nh_, hk_, hv_, dk_, dv_, kw_, vw_;
};

void read_options(Section& s, GatedDeltaProductOptions& o) {
  o.num_householder = s.get<int64_t>("num_householder", o.num_householder);
  o.num_heads = s.get<int64_t>("num_heads", o.num_heads);
  o.num_v_heads = s.get<int64_t>("num_v_heads", o.num_v_heads);
  o.head_dim = s.get<int64_t>("head_dim", o.head_dim);
  o.expand_v = s.get<double>("expand_v", o.expand_v);
  o.conv_size = s.get<int64_t>("conv_size", o.conv_size);
  o.use_short_conv = s.get<bool>("use_short_conv", o.use_short_conv);
  o.use_forget_gate = s.get<bool>("use_forget_gate", o.use_forget_gate);
  o.use_output_gate = s.get<bool>("use_output_gate", o.use_output_gate);
  o.allow_neg_eigval = s.get<bool>("allow_neg_eigval", o.allow_neg_eigval);
  o.norm_eps = s.get<double>("norm_eps", o.norm_eps);
  o.chunk_size = s.get<int64_t>("chunk_size", o.chunk_size);
  o.mode = s.get<std::string>("mode", o.mode);
}

// Reads `model.gated_deltaproduct` (with a layer's overrides applied); every problem is recorded
// at its key.
std::shared_ptr<Mixer> create(Section& s, const MixerContext& ctx) {
  GatedDeltaProductOptions o;
  read_options(s, o);
  o.fused_kernels = ctx.fused_kernels;
  // Siems et al. use n_h ≤ 4 (S5 needs 4; Thm 1: S_n in one layer needs n − 1); each step costs a
  // token of the chunked kernel, so more than 16 is a typo, not a model.
  s.check(o.num_householder >= 1 && o.num_householder <= 16, "num_householder",
          "must be in [1, 16] (Householder steps per token; the paper uses 1-4)");
  const bool heads_ok = o.num_heads >= 1 && o.num_heads <= 1024;
  s.check(heads_ok, "num_heads", "must be in [1, 1024]");
  s.check(o.num_v_heads >= 0 && o.num_v_heads <= 1024, "num_v_heads",
          "must be in [0, 1024] (0 = num_heads)");
  if (heads_ok && o.num_v_heads > 0 && o.num_v_heads <= 1024) {
    s.check(o.num_v_heads % o.num_heads == 0, "num_v_heads",
            "must be a multiple of num_heads = " + std::to_string(o.num_heads));
  }
  s.check(o.head_dim >= 0 && o.head_dim <= 1024, "head_dim",
          "must be in [0, 1024] (0 = d_model / num_heads)");
  if (heads_ok && o.head_dim == 0) {
    s.check(ctx.d_model % o.num_heads == 0, "num_heads",
            "must divide d_model = " + std::to_string(ctx.d_model) + " unless head_dim is set");
  }
  s.check(o.expand_v > 0 && o.expand_v <= 16, "expand_v", "must be in (0, 16]");
  const int64_t dk = o.head_dim > 0 ? o.head_dim : ctx.d_model / std::max<int64_t>(o.num_heads, 1);
  if (heads_ok && o.head_dim >= 0 && o.head_dim <= 1024 && o.expand_v > 0 && o.expand_v <= 16) {
    s.check(dk >= 1 && std::llround(dk * o.expand_v) >= 1, "expand_v",
            "gives d_v = head_dim · expand_v = " + std::to_string(std::llround(dk * o.expand_v)) +
                "; it must be >= 1");
  }
  s.check(o.conv_size >= 1 && o.conv_size <= 64, "conv_size", "must be in [1, 64]");
  s.check(o.norm_eps > 0 && o.norm_eps < 1, "norm_eps", "must be in (0, 1)");
  s.check(o.chunk_size >= 1 && o.chunk_size <= 4096, "chunk_size", "must be in [1, 4096]");
  s.check(o.mode == "chunk" || o.mode == "recurrent", "mode",
          "must be 'chunk' or 'recurrent', got '" + o.mode + "'");
  s.done();
  return std::make_shared<GatedDeltaProduct>(o, ctx.d_model);
}

}  // namespace

// chunk_size: a way of computing the same map, so an evaluation variant may change it.
HYBRIDLAB_MIXER_PLUGIN_EVAL_SAFE(
    "gated_deltaproduct", 'P', "1.0",
    "Gated DeltaProduct: n_h Householder steps per token (Siems et al., 2025)", "chunk_size",
    create)
