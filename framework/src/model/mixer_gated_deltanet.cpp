// The `gated_deltanet` mixer type (letter G): options from `model.gated_deltanet` (or a layer's
// override over it).

#include <cmath>
#include <string>

#include "layers/gated_deltanet.h"
#include "model/builtin_mixers.h"
#include "model/mixer.h"

namespace hybridlab {

namespace {
constexpr double kMaxValueDim = 1099511627776.0;  // 2^40: far past any memory
}  // namespace

GatedDeltaNetOptions read_gated_deltanet_options(Section& s, const MixerContext& ctx) {
  const int64_t d_model = ctx.d_model;
  GatedDeltaNetOptions o;
  o.n_heads = s.get<int64_t>("n_heads", o.n_heads);
  o.n_v_heads = s.get<int64_t>("n_v_heads", o.n_v_heads);
  o.head_dim = s.get<int64_t>("head_dim", o.head_dim);
  o.expand_v = s.get<double>("expand_v", o.expand_v);
  o.conv_size = s.get<int64_t>("conv_size", o.conv_size);
  o.use_short_conv = s.get<bool>("use_short_conv", o.use_short_conv);
  o.chunk_size = s.get<int64_t>("chunk_size", o.chunk_size);
  o.mode = s.get<std::string>("mode", o.mode);
  o.norm_eps = s.get<double>("norm_eps", o.norm_eps);
  if (s.has("fused_kernels")) {  // resolved configurations written before carry it
    const bool own = s.get<bool>("fused_kernels", ctx.fused_kernels);
    s.check(own == ctx.fused_kernels, "fused_kernels",
            "model.fused_kernels switches every fused kernel, Gated DeltaNet's included: set it "
            "there and remove this key");
  }
  o.fused_kernels = ctx.fused_kernels;
  o.allow_neg_eigval = s.get<bool>("allow_neg_eigval", o.allow_neg_eigval);

  s.check(o.n_heads > 0, "n_heads", "must be > 0");
  s.check(o.n_v_heads >= 0, "n_v_heads", "must be >= 0 (0 = n_heads)");
  if (o.n_heads > 0 && o.n_v_heads > 0) {
    s.check(o.n_v_heads % o.n_heads == 0, "n_v_heads",
            "must be a multiple of n_heads (" + std::to_string(o.n_heads) + "), got " +
                std::to_string(o.n_v_heads));
  }
  s.check(o.head_dim >= 0, "head_dim", "must be >= 0 (0 = d_model / n_heads)");
  if (o.head_dim == 0 && o.n_heads > 0) {
    s.check(d_model % o.n_heads == 0, "n_heads",
            "n_heads (" + std::to_string(o.n_heads) + ") must divide d_model (" +
                std::to_string(d_model) + "), or set head_dim explicitly");
  }
  const int64_t dk = o.head_dim > 0 ? o.head_dim : (o.n_heads > 0 ? d_model / o.n_heads : 0);
  const double dv = dk * o.expand_v;
  // Bounded before it becomes a width: 99999999999999999999 would overflow llround below.
  s.check(o.expand_v > 0 && dv >= 1 && dv <= kMaxValueDim && std::abs(dv - std::round(dv)) < 1e-9,
          "expand_v",
          "head_dim * expand_v must be a whole number from 1 to 2^40 (head_dim " +
              std::to_string(dk) + ")");
  s.check(o.conv_size >= 1, "conv_size", "must be >= 1 (use use_short_conv: false to disable)");
  s.check(o.chunk_size > 0, "chunk_size", "must be > 0 (64 is the reference value)");
  s.check(o.mode == "chunk" || o.mode == "recurrent", "mode",
          "must be 'chunk' or 'recurrent', got '" + o.mode + "'");
  s.check(o.norm_eps > 0, "norm_eps", "must be > 0");
  s.finish();
  return o;
}

namespace {

std::shared_ptr<Mixer> make_gated_deltanet(const GatedDeltaNetOptions& options,
                                           const MixerContext& ctx) {
  GatedDeltaNetOptions o = options;
  o.fused_kernels = ctx.fused_kernels;  // model.fused_kernels owns every fused kernel
  return std::make_shared<GatedDeltaNet>(o, ctx.d_model);
}

}  // namespace

MixerType gated_deltanet_mixer_type() {
  // The chunk is a way of computing the same map, not a parameter.
  return builtin_mixer_type<GatedDeltaNetOptions, read_gated_deltanet_options, make_gated_deltanet>(
      "gated_deltanet", 'G', "Gated DeltaNet (Yang, Kautz & Hatamizadeh, ICLR 2025)",
      {"chunk_size"});
}

}  // namespace hybridlab
