#include "layers/gated_deltanet.h"

#include <torch/torch.h>

#include <cmath>

#include "layers/kernels/gated_deltanet_kernels.h"
#include "layers/kernels/linear_cpu.h"

namespace hybridlab {

GatedDeltaNet::GatedDeltaNet(const GatedDeltaNetOptions& opts, int64_t d_model)
    : RecurrentMixer(opts.chunk_size),
      opts_(opts),
      d_model_(d_model),
      n_heads_(opts.n_heads),
      n_v_heads_(opts.n_v_heads > 0 ? opts.n_v_heads : opts.n_heads),
      head_dim_(opts.head_dim > 0 ? opts.head_dim : d_model / opts.n_heads),
      v_dim_(static_cast<int64_t>(std::llround(head_dim_ * opts.expand_v))) {
  TORCH_CHECK(n_heads_ > 0 && n_v_heads_ % n_heads_ == 0 && head_dim_ > 0 && v_dim_ > 0,
              "GatedDeltaNet: bad head layout");
  using torch::nn::Linear;
  using torch::nn::LinearOptions;
  const int64_t key_width = n_heads_ * head_dim_, value_width = n_v_heads_ * v_dim_;
  q_proj = register_module("q_proj", Linear(LinearOptions(d_model, key_width).bias(false)));
  k_proj = register_module("k_proj", Linear(LinearOptions(d_model, key_width).bias(false)));
  v_proj = register_module("v_proj", Linear(LinearOptions(d_model, value_width).bias(false)));
  a_proj = register_module("a_proj", Linear(LinearOptions(d_model, n_v_heads_).bias(false)));
  b_proj = register_module("b_proj", Linear(LinearOptions(d_model, n_v_heads_).bias(false)));
  g_proj = register_module("g_proj", Linear(LinearOptions(d_model, value_width).bias(false)));
  o_proj = register_module("o_proj", Linear(LinearOptions(value_width, d_model).bias(false)));
  if (opts_.use_short_conv) {
    // nn.Conv1d's default init: U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = kernel size.
    const double bound = 1.0 / std::sqrt(static_cast<double>(opts_.conv_size));
    q_conv = register_parameter(
        "q_conv", torch::empty({key_width, 1, opts_.conv_size}).uniform_(-bound, bound));
    k_conv = register_parameter(
        "k_conv", torch::empty({key_width, 1, opts_.conv_size}).uniform_(-bound, bound));
    v_conv = register_parameter(
        "v_conv", torch::empty({value_width, 1, opts_.conv_size}).uniform_(-bound, bound));
  }
  // fla / NVlabs init: A = U(0,16) (kept away from 0 so log stays finite).
  A_log =
      register_parameter("A_log", torch::empty({n_v_heads_}).uniform_(0, 16).clamp_min(1e-4).log());
  const torch::Tensor dt =
      (torch::rand({n_v_heads_}) * (std::log(0.1) - std::log(1e-3)) + std::log(1e-3))
          .exp()
          .clamp_min(1e-4);
  dt_bias = register_parameter("dt_bias", dt + torch::log(-torch::expm1(-dt)));  // softplus⁻¹
  o_norm = register_module(
      "o_norm", std::make_shared<GatedRMSNorm>(v_dim_, opts_.norm_eps, opts_.fused_kernels));
}

int64_t GatedDeltaNetCache::nbytes() const { return bytes_of({&conv_q, &conv_k, &conv_v, &state}); }

std::unique_ptr<MixerCache> GatedDeltaNet::make_cache() const {
  return std::make_unique<GatedDeltaNetCache>();
}

torch::Tensor GatedDeltaNet::forward(const torch::Tensor& x, const torch::Tensor& /*positions*/,
                                     MixerCache* cache_base) {
  TORCH_CHECK(x.dim() == 3 && x.size(2) == d_model_, "GatedDeltaNet: x must be [B,T,", d_model_,
              "], got ", x.sizes());
  GatedDeltaNetCache* cache = nullptr;
  if (cache_base) {
    cache = dynamic_cast<GatedDeltaNetCache*>(cache_base);
    TORCH_CHECK(cache, "GatedDeltaNet: wrong cache type");
  }
  const int64_t B = x.size(0), T = x.size(1);
  auto proj = [this](const torch::nn::Linear& p, const torch::Tensor& in) {
    return project(p, in, opts_.fused_kernels);
  };
  torch::Tensor q = proj(q_proj, x), k = proj(k_proj, x), v = proj(v_proj, x);  // [B,T,C]
  const bool fused = opts_.fused_kernels;
  if (opts_.use_short_conv) {
    q = short_conv_with_tail(q, q_conv, cache ? &cache->conv_q : nullptr, fused);
    k = short_conv_with_tail(k, k_conv, cache ? &cache->conv_k : nullptr, fused);
    v = short_conv_with_tail(v, v_conv, cache ? &cache->conv_v : nullptr, fused);
  } else {
    q = torch::silu(q);
    k = torch::silu(k);
    v = torch::silu(v);
  }
  q = l2_normalize(q.view({B, T, n_heads_, head_dim_}), 1e-6, fused)
          .transpose(1, 2);  // [B,Hk,T,dk]
  k = l2_normalize(k.view({B, T, n_heads_, head_dim_}), 1e-6, fused).transpose(1, 2);
  v = v.view({B, T, n_v_heads_, v_dim_}).transpose(1, 2);  // [B,Hv,T,dv]
  const torch::Tensor g =
      gated_delta_gate(proj(a_proj, x), A_log, dt_bias).transpose(1, 2);  // [B,Hv,T]
  const auto gdt = g.scalar_type();
  torch::Tensor beta = torch::sigmoid(proj(b_proj, x).to(gdt)).transpose(1, 2);  // [B,Hv,T]
  if (opts_.allow_neg_eigval) beta = beta * 2;
  if (probes().gates) probes().gates(g, beta);
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim_));
  const torch::Tensor h0 = cache ? cache->state : torch::Tensor();
  const bool recurrent = opts_.mode == "recurrent" || (cache && T == 1);
  GatedDeltaResult r = recurrent ? recurrent_gated_delta_rule(q, k, v, g, beta, scale, h0)
                                 : chunk_gated_delta_rule(q, k, v, g, beta, scale, h0,
                                                          opts_.chunk_size, opts_.fused_kernels);
  if (cache) cache->state = r.state;
  const torch::Tensor z = proj(g_proj, x).view({B, T, n_v_heads_, v_dim_});
  const torch::Tensor o = o_norm->forward(r.o.transpose(1, 2), z);  // [B,T,Hv,dv]
  return proj(o_proj, o.reshape({B, T, n_v_heads_ * v_dim_}));
}

MixerInfo GatedDeltaNet::info(int64_t length) const {
  MixerInfo m;
  const int64_t key_width = n_heads_ * head_dim_, value_width = n_v_heads_ * v_dim_;
  const int64_t conv_taps = opts_.use_short_conv ? opts_.conv_size - 1 : 0;
  m.state_floats = n_v_heads_ * head_dim_ * v_dim_ + conv_taps * (2 * key_width + value_width);
  const double C =
      static_cast<double>(std::min<int64_t>(opts_.chunk_size, std::max<int64_t>(length, 1)));
  const double dk = static_cast<double>(head_dim_), dv = static_cast<double>(v_dim_);
  // Chunked kernel per head and token (reference notes §2.2): 6C·dk + 4C·dv + 6·dk·dv + C²/3.
  const double kernel = n_v_heads_ * (6 * C * dk + 4 * C * dv + 6 * dk * dv + C * C / 3);
  const double proj = 2.0 * d_model_ * (2 * key_width + 2 * value_width + 2 * n_v_heads_) +
                      2.0 * value_width * d_model_;
  const double conv =
      opts_.use_short_conv ? 2.0 * opts_.conv_size * (2 * key_width + value_width) : 0;
  m.flops_per_token = proj + conv + kernel;
  m.details =
      "Hk=" + std::to_string(n_heads_) + " Hv=" + std::to_string(n_v_heads_) +
      " dk=" + std::to_string(head_dim_) + " dv=" + std::to_string(v_dim_) +
      " conv=" + (opts_.use_short_conv ? std::to_string(opts_.conv_size) : std::string("off")) +
      " chunk=" + std::to_string(opts_.chunk_size) + (opts_.allow_neg_eigval ? " beta<2" : "");
  return m;
}

}  // namespace hybridlab
