// Mamba2: the SSD layer (Dao & Gu, "Transformers are SSMs: Generalized Models and Efficient
// Algorithms Through Structured State Space Duality", ICML 2024, arXiv 2405.21060, §6–7), as
// state-spaces/mamba@e9594ce1 `mamba_ssm/modules/mamba2.py` builds it:
//   [z | xBC | dt] = in_proj(u)                      z, x: d_inner; B, C: ngroups·d_state; dt: H
//   xBC = SiLU(conv1d(xBC) + bias)                   depthwise, kernel d_conv, causal (z, dt
//   bypass) Δ = softplus(dt + dt_bias);  A = −exp(A_log)     per head, in fp32 h_t = exp(Δ_t A)
//   h_{t−1} + Δ_t x_t B_tᵀ;  y_t = h_t C_t + D x_t        per head, h ∈ R^{P×N} out =
//   out_proj(RMSNorm(y ⊙ SiLU(z)) ⊙ w)         norm_before_gate = false: gate, then norm,
//                                                    over groups of d_inner / ngroups channels
// Heads H = d_inner / headdim; head h reads group h / (H / ngroups) of B and C. The scan is the
// SSD chunked form for whole sequences and the recurrence for one-token steps
// (hybridlab/mixer_ops.h: chunk_ssd, recurrent_ssd). Defaults and initialisation are the module's:
// d_state 128, d_conv 4 with bias, expand 2, headdim 64, ngroups 1, chunk 256, A = U(1, 16),
// dt = exp(U(ln 1e-3, ln 0.1)) ≥ 1e-4 with dt_bias its inverse softplus, D = 1, no proj biases.
// mamba_ssm's own language model has no MLP after the mixer; a hybridlab block always has one (as
// the hybrids that use Mamba2 do, e.g. the Gated DeltaNet paper's H2).

#include <torch/torch.h>

#include <cmath>
#include <string>
#include <vector>

#include "hybridlab/mixer.h"
#include "hybridlab/mixer_ops.h"
#include "hybridlab/recurrent_mixer.h"

namespace {

using hybridlab::Mixer;
using hybridlab::MixerCache;
using hybridlab::MixerContext;
using hybridlab::MixerInfo;
using hybridlab::Section;

struct Mamba2Options {
  int64_t d_state = 128;  ///< N
  int64_t d_conv = 4;
  double expand = 2.0;   ///< d_inner = expand · d_model
  int64_t headdim = 64;  ///< P
  int64_t ngroups = 1;   ///< G: groups of B and C
  int64_t chunk_size = 256;
  double dt_min = 1e-3, dt_max = 0.1, dt_init_floor = 1e-4;
  std::vector<double> A_init_range = {1.0, 16.0};
  bool conv_bias = true;
  bool norm_before_gate = false;
  double norm_eps = 1e-5;
  std::string mode = "chunk";  ///< whole sequences: "chunk" (SSD) or "recurrent" (the oracle)
};

struct Mamba2Cache : MixerCache {
  torch::Tensor conv;  ///< the last d_conv − 1 inputs of the convolution [B, d_conv − 1, conv_dim]
  torch::Tensor ssm;  ///< [B, H, N, P] (the [K,V] layout of mixer_ops.h), fp32
  int64_t nbytes() const override { return bytes_of({&conv, &ssm}); }
};

class Mamba2 : public hybridlab::RecurrentMixer<Mamba2Cache, &Mamba2Cache::ssm> {
 public:
  Mamba2(const Mamba2Options& o, int64_t d_model)
      : RecurrentMixer(o.chunk_size),
        o_(o),
        d_model_(d_model),
        d_inner_(std::llround(o.expand * d_model)),
        heads_(d_inner_ / o.headdim),
        conv_dim_(d_inner_ + 2 * o.ngroups * o.d_state) {
    using torch::nn::Linear;
    using torch::nn::LinearOptions;
    in_proj = register_module(
        "in_proj",
        Linear(
            LinearOptions(d_model, 2 * d_inner_ + 2 * o.ngroups * o.d_state + heads_).bias(false)));
    // nn.Conv1d's default init: weight and bias U(±1/sqrt(fan_in)), fan_in = d_conv (depthwise).
    const double bound = 1.0 / std::sqrt(static_cast<double>(o.d_conv));
    conv_weight = register_parameter(
        "conv_weight", torch::empty({conv_dim_, 1, o.d_conv}).uniform_(-bound, bound));
    if (o.conv_bias) {
      conv_bias =
          register_parameter("conv_bias", torch::empty({conv_dim_}).uniform_(-bound, bound));
    }
    A_log = register_parameter(
        "A_log", torch::empty({heads_}).uniform_(o.A_init_range[0], o.A_init_range[1]).log());
    const torch::Tensor dt =
        (torch::rand({heads_}) * (std::log(o.dt_max) - std::log(o.dt_min)) + std::log(o.dt_min))
            .exp()
            .clamp_min(o.dt_init_floor);
    dt_bias = register_parameter("dt_bias", dt + torch::log(-torch::expm1(-dt)));  // softplus⁻¹
    D = register_parameter("D", torch::ones({heads_}));
    norm_weight = register_parameter("norm_weight", torch::ones({d_inner_}));
    out_proj = register_module("out_proj", Linear(LinearOptions(d_inner_, d_model).bias(false)));
  }

  torch::Tensor forward(const torch::Tensor& u, const torch::Tensor& /*positions*/,
                        MixerCache* cache_base) override {
    TORCH_CHECK(u.dim() == 3 && u.size(2) == d_model_, "mamba2: x must be [B,T,", d_model_,
                "], got ", u.sizes());
    auto* cache = dynamic_cast<Mamba2Cache*>(cache_base);
    TORCH_CHECK(!cache_base || cache, "mamba2: the cache was not made by this mixer");
    const int64_t B = u.size(0), T = u.size(1), GN = o_.ngroups * o_.d_state;
    const torch::Tensor zxbcdt = in_proj(u);
    const torch::Tensor z = zxbcdt.narrow(-1, 0, d_inner_);
    const torch::Tensor xbc = conv(zxbcdt.narrow(-1, d_inner_, conv_dim_), cache);
    const torch::Tensor x = xbc.narrow(-1, 0, d_inner_).view({B, T, heads_, o_.headdim});
    auto groups = [&](int64_t at) {  // [B,G,T,N]
      return xbc.narrow(-1, at, GN).view({B, T, o_.ngroups, o_.d_state}).transpose(1, 2);
    };
    const torch::Tensor Bm = groups(d_inner_), Cm = groups(d_inner_ + GN);
    // Δ and A in fp32 at least (the module warns that A can reach −inf in fp16).
    const auto ft = u.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
    const torch::Tensor dt =
        torch::softplus(zxbcdt.narrow(-1, d_inner_ + conv_dim_, heads_).to(ft) + dt_bias.to(ft))
            .transpose(1, 2);                                               // [B,H,T]
    const torch::Tensor a = dt * -A_log.to(ft).exp().view({1, heads_, 1});  // Δ·A ≤ 0
    const torch::Tensor xh = x.transpose(1, 2);                             // [B,H,T,P]
    const torch::Tensor v = xh.to(ft) * dt.unsqueeze(-1);
    // Observers see the gates as (log decay Δ·A, Δ): the decay and the step size.
    if (probes().gates) probes().gates(a.to(torch::kFloat), dt.to(torch::kFloat));
    const torch::Tensor h0 = cache ? cache->ssm : torch::Tensor();
    const bool recurrent = o_.mode == "recurrent" || (cache && T == 1);
    const hybridlab::GatedDeltaResult r =
        recurrent ? hybridlab::recurrent_ssd(Cm, Bm, v, a, h0)
                  : hybridlab::chunk_ssd(Cm, Bm, v, a, h0, o_.chunk_size);
    if (cache) cache->ssm = r.state;
    torch::Tensor y = r.o.to(u.scalar_type()) + xh * D.view({1, heads_, 1, 1});
    y = y.transpose(1, 2).reshape({B, T, d_inner_});
    return out_proj(gated_norm(y, z));
  }

  std::unique_ptr<MixerCache> make_cache() const override {
    return std::make_unique<Mamba2Cache>();
  }

  MixerInfo info(int64_t length) const override {
    MixerInfo m;
    const int64_t N = o_.d_state, P = o_.headdim;
    m.state_floats = heads_ * N * P + (o_.d_conv - 1) * conv_dim_;
    const double C =
        static_cast<double>(std::min<int64_t>(o_.chunk_size, std::max<int64_t>(length, 1)));
    // SSD per head and token: scores and their use inside the chunk 2C(N + P), chunk state and
    // the carried state's read-out 4NP.
    const double scan = heads_ * (2 * C * (N + P) + 4.0 * N * P);
    const double proj =
        2.0 * d_model_ * (2 * d_inner_ + 2 * o_.ngroups * N + heads_) + 2.0 * d_inner_ * d_model_;
    m.flops_per_token = proj + 2.0 * o_.d_conv * conv_dim_ + scan;
    m.details = "H=" + std::to_string(heads_) + " P=" + std::to_string(P) +
                " N=" + std::to_string(N) + " G=" + std::to_string(o_.ngroups) +
                " conv=" + std::to_string(o_.d_conv) + " chunk=" + std::to_string(o_.chunk_size);
    return m;
  }

  torch::nn::Linear in_proj{nullptr}, out_proj{nullptr};
  torch::Tensor conv_weight, conv_bias, A_log, dt_bias, D, norm_weight;

 private:
  // SiLU(depthwise causal conv1d(xBC) + bias), continuing from (and updating) the cache's tail.
  torch::Tensor conv(const torch::Tensor& xbc, Mamba2Cache* cache) const {
    const int64_t B = xbc.size(0), T = xbc.size(1), K = o_.d_conv;
    const torch::Tensor tail = cache && cache->conv.defined()
                                   ? cache->conv
                                   : torch::zeros({B, K - 1, conv_dim_}, xbc.options());
    const torch::Tensor in = torch::cat({tail, xbc}, 1);  // [B, K−1+T, C]
    if (cache) cache->conv = in.narrow(1, T, K - 1);
    const torch::Tensor y =
        torch::conv1d(in.transpose(1, 2), conv_weight, conv_bias, torch::IntArrayRef{1},
                      torch::IntArrayRef{0}, torch::IntArrayRef{1}, conv_dim_);  // [B, C, T]
    return torch::silu(y.transpose(1, 2));
  }

  // RMSNorm over groups of d_inner / ngroups channels, with the SiLU(z) gate before it (the
  // default) or after it; computed in fp32 at least.
  torch::Tensor gated_norm(const torch::Tensor& y, const torch::Tensor& z) const {
    const auto ft = y.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
    torch::Tensor t = y.to(ft);
    const torch::Tensor gate = torch::silu(z.to(ft));
    if (!o_.norm_before_gate) t = t * gate;
    const auto sizes = t.sizes().vec();
    const int64_t group = d_inner_ / o_.ngroups;
    t = hybridlab::rms_norm(t.view({sizes[0], sizes[1], o_.ngroups, group}),
                            norm_weight.to(ft).view({o_.ngroups, group}), o_.norm_eps)
            .view(sizes);
    if (o_.norm_before_gate) t = t * gate;
    return t.to(y.scalar_type());
  }

  Mamba2Options o_;
  int64_t d_model_, d_inner_, heads_, conv_dim_;
};

std::shared_ptr<Mixer> create(Section& s, const MixerContext& ctx) {
  Mamba2Options o;
  o.d_state = s.get<int64_t>("d_state", o.d_state);
  o.d_conv = s.get<int64_t>("d_conv", o.d_conv);
  o.expand = s.get<double>("expand", o.expand);
  o.headdim = s.get<int64_t>("headdim", o.headdim);
  o.ngroups = s.get<int64_t>("ngroups", o.ngroups);
  o.chunk_size = s.get<int64_t>("chunk_size", o.chunk_size);
  o.dt_min = s.get<double>("dt_min", o.dt_min);
  o.dt_max = s.get<double>("dt_max", o.dt_max);
  o.dt_init_floor = s.get<double>("dt_init_floor", o.dt_init_floor);
  o.A_init_range = s.get<std::vector<double>>("A_init_range", o.A_init_range);
  o.conv_bias = s.get<bool>("conv_bias", o.conv_bias);
  o.norm_before_gate = s.get<bool>("norm_before_gate", o.norm_before_gate);
  o.norm_eps = s.get<double>("norm_eps", o.norm_eps);
  o.mode = s.get<std::string>("mode", o.mode);
  s.check(o.d_state >= 1 && o.d_state <= 4096, "d_state", "must be in [1, 4096]");
  s.check(o.d_conv >= 1 && o.d_conv <= 64, "d_conv", "must be in [1, 64]");
  s.check(o.expand > 0 && o.expand <= 16, "expand", "must be in (0, 16]");
  s.check(o.headdim >= 1 && o.headdim <= 4096, "headdim", "must be in [1, 4096]");
  s.check(o.ngroups >= 1 && o.ngroups <= 1024, "ngroups", "must be in [1, 1024]");
  s.check(o.chunk_size >= 1 && o.chunk_size <= 4096, "chunk_size", "must be in [1, 4096]");
  s.check(o.dt_min > 0 && o.dt_max >= o.dt_min && o.dt_max < 10, "dt_max",
          "needs 0 < dt_min <= dt_max < 10");
  s.check(o.dt_init_floor > 0 && o.dt_init_floor <= o.dt_max, "dt_init_floor",
          "must be in (0, dt_max]");
  // A = U(low, high) and A_log = ln A: a finite, positive range of moderate decay rates.
  s.check(o.A_init_range.size() == 2 && o.A_init_range[0] > 0 &&
              o.A_init_range[1] >= o.A_init_range[0] && o.A_init_range[1] <= 1e4,
          "A_init_range", "must be [low, high] with 0 < low <= high <= 1e4");
  s.check(o.norm_eps > 0 && o.norm_eps < 1, "norm_eps", "must be in (0, 1)");
  s.check(o.mode == "chunk" || o.mode == "recurrent", "mode",
          "must be 'chunk' or 'recurrent', got '" + o.mode + "'");
  if (o.headdim >= 1 && o.headdim <= 4096 && o.ngroups >= 1 && o.ngroups <= 1024 && o.expand > 0 &&
      o.expand <= 16) {
    const int64_t d_inner = std::llround(o.expand * ctx.d_model);
    const int64_t heads = d_inner / o.headdim;
    s.check(d_inner % o.headdim == 0 && heads >= 1, "headdim",
            "d_inner = expand · d_model = " + std::to_string(d_inner) +
                " must be a multiple of headdim = " + std::to_string(o.headdim));
    s.check(heads < 1 || heads % o.ngroups == 0, "ngroups",
            "the " + std::to_string(heads) +
                " heads must split into ngroups = " + std::to_string(o.ngroups) + " equal groups");
  }
  s.done();
  return std::make_shared<Mamba2>(o, ctx.d_model);
}

}  // namespace

// chunk_size: a way of computing the same map, so an evaluation variant may change it.
HYBRIDLAB_MIXER_PLUGIN_EVAL_SAFE(
    "mamba2", 'M', "1.0", "Mamba2: the SSD layer, scalar decay per head (Dao & Gu, ICML 2024)",
    "chunk_size", create)
