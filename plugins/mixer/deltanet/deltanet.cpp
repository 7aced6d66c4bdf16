// DeltaNet: linear attention with the delta rule (Yang, Wang, Zhang, Shen & Kim, "Parallelizing
// Linear Transformers with the Delta Rule over Sequence Length", NeurIPS 2024, arXiv 2406.06484),
// as its "DeltaNet Transformer" layer and fla's `fla/layers/delta_net.py` build it:
//   q, k = L2Norm(SiLU(ShortConv(W_q x))), L2Norm(SiLU(ShortConv(W_k x)))   per head
//   v    = SiLU(ShortConv(W_v x));  β = σ(W_β x) per head (×2 with allow_neg_eigval)
//   S_t  = S_{t−1} + k_t β_t (v_t − S_{t−1}ᵀ k_t)ᵀ;  o_t = S_tᵀ (q_t / √d_k)      (eq. 1, [K,V])
//   out  = W_o RMSNorm_head(o)  (or W_o (RMSNorm_head(o) ⊙ SiLU(W_g x)) with use_gate)
// It is Gated DeltaNet's rule without the decay (g ≡ 0), so it runs on the same chunked (WY form,
// paper §3) and recurrent kernels (hybridlab/mixer_ops.h). The L2 norm keeps β‖k‖² ≤ 2, the
// condition for a stable state (the eigenvalue 1 − β‖k‖² must lie in [−1, 1]).
// Defaults are fla's: expand_k = expand_v = 1, 4 heads, conv 4 without bias, norm eps 1e-5,
// no output gate, no negative eigenvalues; chunk 64.

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

struct DeltaNetOptions {
  int64_t num_heads = 4;
  double expand_k = 1.0;  ///< key width = d_model · expand_k, split over the heads
  double expand_v = 1.0;  ///< value width = d_model · expand_v
  int64_t conv_size = 4;
  bool use_short_conv = true;
  bool use_gate = false;          ///< SiLU(W_g x) gates the normed output (fla `use_gate`)
  bool allow_neg_eigval = false;  ///< β ∈ (0, 2): eigenvalues of I − βkkᵀ in (−1, 1]
  double norm_eps = 1e-5;
  int64_t chunk_size = 64;
  std::string mode = "chunk";  ///< whole sequences: "chunk" or "recurrent" (the oracle)
  bool fused_kernels = true;
};

struct DeltaNetCache : MixerCache {
  torch::Tensor conv_q, conv_k, conv_v;  ///< [B,conv_size−1,C], undefined when empty
  torch::Tensor state;                   ///< [B,H,d_k,d_v], undefined when empty
  int64_t nbytes() const override { return bytes_of({&conv_q, &conv_k, &conv_v, &state}); }
};

class DeltaNet : public hybridlab::RecurrentMixer<DeltaNetCache> {
 public:
  DeltaNet(const DeltaNetOptions& o, int64_t d_model)
      : RecurrentMixer(o.chunk_size),
        o_(o),
        d_model_(d_model),
        key_width_(std::llround(d_model * o.expand_k)),
        value_width_(std::llround(d_model * o.expand_v)),
        dk_(key_width_ / o.num_heads),
        dv_(value_width_ / o.num_heads) {
    using torch::nn::Linear;
    using torch::nn::LinearOptions;
    q_proj = register_module("q_proj", Linear(LinearOptions(d_model, key_width_).bias(false)));
    k_proj = register_module("k_proj", Linear(LinearOptions(d_model, key_width_).bias(false)));
    v_proj = register_module("v_proj", Linear(LinearOptions(d_model, value_width_).bias(false)));
    b_proj = register_module("b_proj", Linear(LinearOptions(d_model, o.num_heads).bias(false)));
    if (o.use_gate) {
      g_proj = register_module("g_proj", Linear(LinearOptions(d_model, value_width_).bias(false)));
    }
    o_proj = register_module("o_proj", Linear(LinearOptions(value_width_, d_model).bias(false)));
    if (o.use_short_conv) {
      // nn.Conv1d's default init: U(±1/sqrt(fan_in)), fan_in = kernel size; no bias (fla).
      const double bound = 1.0 / std::sqrt(static_cast<double>(o.conv_size));
      auto conv = [&](const char* name, int64_t width) {
        return register_parameter(name,
                                  torch::empty({width, 1, o.conv_size}).uniform_(-bound, bound));
      };
      q_conv = conv("q_conv", key_width_);
      k_conv = conv("k_conv", key_width_);
      v_conv = conv("v_conv", value_width_);
    }
    o_norm_weight = register_parameter("o_norm_weight", torch::ones({dv_}));
  }

  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& /*positions*/,
                        MixerCache* cache_base) override {
    TORCH_CHECK(x.dim() == 3 && x.size(2) == d_model_, "deltanet: x must be [B,T,", d_model_,
                "], got ", x.sizes());
    DeltaNetCache* cache = nullptr;
    if (cache_base) {
      cache = dynamic_cast<DeltaNetCache*>(cache_base);
      TORCH_CHECK(cache, "deltanet: the cache was not made by this mixer");
    }
    const int64_t B = x.size(0), T = x.size(1), H = o_.num_heads;
    torch::Tensor q = q_proj(x), k = k_proj(x), v = v_proj(x);  // [B,T,C]
    if (o_.use_short_conv) {
      const bool fused = o_.fused_kernels;
      q = hybridlab::short_conv_with_tail(q, q_conv, cache ? &cache->conv_q : nullptr, fused);
      k = hybridlab::short_conv_with_tail(k, k_conv, cache ? &cache->conv_k : nullptr, fused);
      v = hybridlab::short_conv_with_tail(v, v_conv, cache ? &cache->conv_v : nullptr, fused);
    } else {
      q = torch::silu(q);
      k = torch::silu(k);
      v = torch::silu(v);
    }
    q = hybridlab::l2_normalize(q.view({B, T, H, dk_}), 1e-6, o_.fused_kernels).transpose(1, 2);
    k = hybridlab::l2_normalize(k.view({B, T, H, dk_}), 1e-6, o_.fused_kernels).transpose(1, 2);
    v = v.view({B, T, H, dv_}).transpose(1, 2);                      // [B,H,T,dv]
    torch::Tensor beta = torch::sigmoid(b_proj(x)).transpose(1, 2);  // [B,H,T]
    if (o_.allow_neg_eigval) beta = beta * 2;
    const torch::Tensor g = torch::zeros_like(beta);  // no decay: the plain delta rule
    if (probes().gates) probes().gates(g.to(torch::kFloat), beta.to(torch::kFloat));
    const double scale = 1.0 / std::sqrt(static_cast<double>(dk_));
    const torch::Tensor h0 = cache ? cache->state : torch::Tensor();
    const bool recurrent = o_.mode == "recurrent" || (cache && T == 1);
    hybridlab::GatedDeltaResult r =
        recurrent ? hybridlab::recurrent_gated_delta_rule(q, k, v, g, beta, scale, h0)
                  : hybridlab::chunk_gated_delta_rule(q, k, v, g, beta, scale, h0, o_.chunk_size,
                                                      o_.fused_kernels);
    if (cache) cache->state = r.state;
    torch::Tensor o = r.o.transpose(1, 2);                   // [B,T,H,dv]
    o = hybridlab::rms_norm(o, o_norm_weight, o_.norm_eps);  // per head, over d_v
    if (o_.use_gate) o = o * torch::silu(g_proj(x)).view({B, T, H, dv_});
    return o_proj(o.reshape({B, T, value_width_}));
  }

  std::unique_ptr<MixerCache> make_cache() const override {
    return std::make_unique<DeltaNetCache>();
  }

  MixerInfo info(int64_t length) const override {
    MixerInfo m;
    const int64_t H = o_.num_heads, taps = o_.use_short_conv ? o_.conv_size - 1 : 0;
    m.state_floats = H * dk_ * dv_ + taps * (2 * key_width_ + value_width_);
    const double C =
        static_cast<double>(std::min<int64_t>(o_.chunk_size, std::max<int64_t>(length, 1)));
    const double dk = static_cast<double>(dk_), dv = static_cast<double>(dv_);
    // The chunked kernel per head and token, as for Gated DeltaNet: 6C·dk + 4C·dv + 6·dk·dv + C²/3.
    const double kernel = H * (6 * C * dk + 4 * C * dv + 6 * dk * dv + C * C / 3);
    const double proj = 2.0 * d_model_ * (2 * key_width_ + value_width_ + H) +
                        (o_.use_gate ? 2.0 * d_model_ * value_width_ : 0) +
                        2.0 * value_width_ * d_model_;
    const double conv =
        o_.use_short_conv ? 2.0 * o_.conv_size * (2 * key_width_ + value_width_) : 0;
    m.flops_per_token = proj + conv + kernel;
    m.details = "H=" + std::to_string(H) + " dk=" + std::to_string(dk_) +
                " dv=" + std::to_string(dv_) +
                " conv=" + (o_.use_short_conv ? std::to_string(o_.conv_size) : std::string("off")) +
                " chunk=" + std::to_string(o_.chunk_size) + (o_.use_gate ? " gate" : "") +
                (o_.allow_neg_eigval ? " beta<2" : "");
    return m;
  }

  torch::nn::Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, b_proj{nullptr},
      g_proj{nullptr}, o_proj{nullptr};
  torch::Tensor q_conv, k_conv, v_conv, o_norm_weight;

 private:
  DeltaNetOptions o_;
  int64_t d_model_, key_width_, value_width_, dk_, dv_;
};

// Reads `model.deltanet` (with a layer's overrides applied); every problem is recorded at its key.
std::shared_ptr<Mixer> create(Section& s, const MixerContext& ctx) {
  DeltaNetOptions o;
  o.num_heads = s.get<int64_t>("num_heads", o.num_heads);
  o.expand_k = s.get<double>("expand_k", o.expand_k);
  o.expand_v = s.get<double>("expand_v", o.expand_v);
  o.conv_size = s.get<int64_t>("conv_size", o.conv_size);
  o.use_short_conv = s.get<bool>("use_short_conv", o.use_short_conv);
  o.use_gate = s.get<bool>("use_gate", o.use_gate);
  o.allow_neg_eigval = s.get<bool>("allow_neg_eigval", o.allow_neg_eigval);
  o.norm_eps = s.get<double>("norm_eps", o.norm_eps);
  o.chunk_size = s.get<int64_t>("chunk_size", o.chunk_size);
  o.mode = s.get<std::string>("mode", o.mode);
  o.fused_kernels = ctx.fused_kernels;
  s.check(o.num_heads >= 1 && o.num_heads <= 1024, "num_heads", "must be in [1, 1024]");
  s.check(o.expand_k > 0 && o.expand_k <= 16, "expand_k", "must be in (0, 16]");
  s.check(o.expand_v > 0 && o.expand_v <= 16, "expand_v", "must be in (0, 16]");
  s.check(o.conv_size >= 1 && o.conv_size <= 64, "conv_size", "must be in [1, 64]");
  s.check(o.norm_eps > 0 && o.norm_eps < 1, "norm_eps", "must be in (0, 1)");
  s.check(o.chunk_size >= 1 && o.chunk_size <= 4096, "chunk_size", "must be in [1, 4096]");
  s.check(o.mode == "chunk" || o.mode == "recurrent", "mode",
          "must be 'chunk' or 'recurrent', got '" + o.mode + "'");
  // The widths only from values in range (a huge expand would overflow them and add a bogus
  // second problem).
  if (o.num_heads >= 1 && o.num_heads <= 1024 && o.expand_k > 0 && o.expand_k <= 16 &&
      o.expand_v > 0 && o.expand_v <= 16) {
    const int64_t kw = std::llround(ctx.d_model * o.expand_k);
    const int64_t vw = std::llround(ctx.d_model * o.expand_v);
    // Blame the key the user set: a head count that does not divide the widths, or a width.
    auto split = [&](int64_t width, const char* key) {
      s.check(width >= o.num_heads && width % o.num_heads == 0,
              s.has(key) || !s.has("num_heads") ? key : "num_heads",
              std::string("d_model · ") + key + " = " + std::to_string(width) +
                  " must split into num_heads = " + std::to_string(o.num_heads) + " equal heads");
    };
    split(kw, "expand_k");
    if (vw != kw || s.has("expand_v")) split(vw, "expand_v");
  }
  s.done();
  return std::make_shared<DeltaNet>(o, ctx.d_model);
}

}  // namespace

// chunk_size: a way of computing the same map, so an evaluation variant may change it.
HYBRIDLAB_MIXER_PLUGIN_EVAL_SAFE(
    "deltanet", 'D', "1.0", "DeltaNet: the delta rule without decay (Yang et al., NeurIPS 2024)",
    "chunk_size", create)
