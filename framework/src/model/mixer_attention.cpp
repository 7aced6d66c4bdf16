// The `attention` mixer type (letter A): options from `model.attention` (or a layer's override
// over it), one positional scheme per layer from MixerContext::position (one shared instance for
// the layers of a scheme that asks for it).

#include <stdexcept>

#include "layers/attention.h"
#include "model/builtin_mixers.h"
#include "model/mixer.h"

namespace hybridlab {

AttentionMixerOptions read_attention_options(Section& s, const MixerContext& ctx) {
  const int64_t d_model = ctx.d_model;
  AttentionMixerOptions m;
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
  m.position = read_position_spec(s.child("position"));  // an override's, or its base's

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

std::shared_ptr<Mixer> make_attention(const AttentionMixerOptions& mixer_opts,
                                      const MixerContext& ctx) {
  AttentionOptions opts = mixer_opts.layer;
  opts.fused_kernels = ctx.fused_kernels;  // model.fused_kernels owns every fused kernel
  // Only the layer graph builds a built-in mixer, and it always gives the service.
  if (!ctx.position) throw std::logic_error("attention is built without MixerContext::position");
  PositionContext pc;
  pc.d_model = ctx.d_model;
  pc.n_heads = opts.n_heads;
  pc.n_kv_heads = resolved_kv_heads(opts);
  pc.head_dim = resolved_head_dim(opts, ctx.d_model);
  pc.causal = opts.causal;
  pc.train_length = ctx.train_length;
  pc.max_length = ctx.max_length;
  pc.layer_index = ctx.layer_index;
  const PositionSpec& spec = mixer_opts.position;
  Section position = *spec.section;
  const BuiltPosition built = ctx.position->build(position, pc);
  const PositionScheme& scheme = *built.scheme;
  if (scheme.hooks() & kHookEmbed) {
    throw ConfigError(spec.where.str() + ": " + spec.path + ".scheme: scheme '" + scheme.name() +
                      "' acts on the input embeddings (embed hook); set it as model.position, "
                      "not as an attention layer's position");
  }
  if (opts.path && (scheme.hooks() & kHookRotate)) {
    throw ConfigError(spec.where.str() + ": " + spec.path + ".scheme: scheme '" + scheme.name() +
                      "' rotates queries and keys, which PaTH (model.attention.path: true) "
                      "replaces; use nope, or an additive scheme such as fox (PaTH-FoX)");
  }
  return std::make_shared<Attention>(opts, ctx.d_model, built.scheme,
                                     /*register_scheme=*/!built.shared);
}

}  // namespace

MixerType attention_mixer_type() {
  // Neither the scheme's settings nor the window are parameters: a trained model runs with others.
  return builtin_mixer_type<AttentionMixerOptions, read_attention_options, make_attention>(
      "attention", 'A',
      "multi-head softmax attention (GQA, window, qk-norm, output gate, positional hooks)",
      {"position", "window"});
}

}  // namespace hybridlab
