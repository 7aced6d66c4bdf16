#include "model/layer_options.h"

#include <cmath>
#include <string>

namespace hybridlab {

AttentionMixerOptions read_attention_options(Section s, int64_t d_model,
                                             const AttentionMixerOptions* base) {
  AttentionMixerOptions m = base ? *base : AttentionMixerOptions{};
  AttentionOptions& o = m.layer;
  o.n_heads = s.get<int64_t>("n_heads", o.n_heads);
  o.n_kv_heads = s.get<int64_t>("n_kv_heads", o.n_kv_heads);
  o.head_dim = s.get<int64_t>("head_dim", o.head_dim);
  o.causal = s.get<bool>("causal", o.causal);
  o.window = s.get<int64_t>("window", o.window);
  o.qk_norm = s.get<bool>("qk_norm", o.qk_norm);
  o.output_gate = s.get<bool>("output_gate", o.output_gate);
  o.block_size = s.get<int64_t>("block_size", o.block_size);
  o.norm_eps = s.get<double>("norm_eps", o.norm_eps);
  o.use_short_conv = s.get<bool>("use_short_conv", o.use_short_conv);
  o.conv_size = s.get<int64_t>("conv_size", o.conv_size);
  const std::string normalization =
      s.get<std::string>("normalization", normalization_name(o.normalization));
  if (normalization == "stick_breaking") {
    o.normalization = AttentionNormalization::kStickBreaking;
  } else {
    s.check(normalization == "softmax", "normalization",
            "must be 'softmax' or 'stick_breaking', got '" + normalization + "'");
    o.normalization = AttentionNormalization::kSoftmax;
  }
  o.path = s.get<bool>("path", o.path);
  o.path_w_shortconv = s.get<bool>("path_w_shortconv", o.path_w_shortconv);
  o.path_chunk_size = s.get<int64_t>("path_chunk_size", o.path_chunk_size);
  if (s.has("position") || !base) m.position = read_position_spec(s.child("position"));

  s.check(o.n_heads > 0, "n_heads", "must be > 0");
  s.check(o.n_kv_heads >= 0, "n_kv_heads", "must be >= 0 (0 = n_heads)");
  if (o.n_heads > 0 && o.n_kv_heads > 0) {
    s.check(o.n_heads % o.n_kv_heads == 0, s.has("n_kv_heads") ? "n_kv_heads" : "n_heads",
            "n_kv_heads (" + std::to_string(o.n_kv_heads) + ") must divide n_heads (" +
                std::to_string(o.n_heads) + ")");
  }
  s.check(o.head_dim >= 0, "head_dim", "must be >= 0 (0 = d_model / n_heads)");
  if (o.head_dim == 0 && o.n_heads > 0) {
    s.check(d_model % o.n_heads == 0, "n_heads",
            "n_heads (" + std::to_string(o.n_heads) + ") must divide d_model (" +
                std::to_string(d_model) + "), or set head_dim explicitly");
  }
  // 0 is full attention: the default, and what the resolved config writes back out.
  s.check(o.window >= 0, "window", "must be >= 0 (0 = full attention)");
  s.check(o.block_size > 0, "block_size", "must be > 0");
  s.check(o.norm_eps > 0, "norm_eps", "must be > 0");
  s.check(o.conv_size >= 1, "conv_size", "must be >= 1 (use use_short_conv: false to disable)");
  // Tan et al. define the stick for a causal order only (the nearest earlier key breaks first).
  s.check(o.causal || o.normalization == AttentionNormalization::kSoftmax,
          s.has("normalization") ? "normalization" : "causal",
          "stick_breaking needs causal: true (the stick breaks from the nearest earlier key)");
  s.check(o.path_chunk_size >= 1, "path_chunk_size", "must be >= 1");
  // PaTH's transforms accumulate between an earlier key and a later query (Yang et al. 2025, §2).
  s.check(o.causal || !o.path, s.has("path") ? "path" : "causal",
          "path needs causal: true (the transforms run from the key forward to the query)");
  s.finish();
  return m;
}

namespace {
constexpr double kMaxValueDim = 1099511627776.0;  // 2^40: far past any memory
}  // namespace

GatedDeltaNetOptions read_gated_deltanet_options(Section s, const ModelDims& dims,
                                                 const GatedDeltaNetOptions* base) {
  const int64_t d_model = dims.d_model;
  GatedDeltaNetOptions o = base ? *base : GatedDeltaNetOptions{};
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
    const bool own = s.get<bool>("fused_kernels", dims.fused_kernels);
    s.check(own == dims.fused_kernels, "fused_kernels",
            "model.fused_kernels switches every fused kernel, Gated DeltaNet's included: set it "
            "there and remove this key");
  }
  o.fused_kernels = dims.fused_kernels;
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

MlpOptions read_mlp_options(Section s) {
  MlpOptions o;
  o.intermediate_size = s.get<int64_t>("intermediate_size", o.intermediate_size);
  o.multiple_of = s.get<int64_t>("multiple_of", o.multiple_of);
  s.check(o.intermediate_size >= 0, "intermediate_size",
          "must be >= 0 (0 = round_up(8*d_model/3, multiple_of))");
  s.check(o.multiple_of > 0, "multiple_of", "must be > 0");
  s.finish();
  return o;
}

}  // namespace hybridlab
