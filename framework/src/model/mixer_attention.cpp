// The `attention` mixer type (letter A): options from `model.attention`, one positional scheme per
// layer (or one shared instance for schemes that ask for it).

#include "layers/attention.h"
#include "model/layer_options.h"
#include "model/mixer.h"

namespace hybridlab {

namespace {

std::shared_ptr<Mixer> build_attention(const std::any& any_opts, const MixerBuildContext& ctx) {
  const auto& mixer_opts = std::any_cast<const AttentionMixerOptions&>(any_opts);
  AttentionOptions opts = mixer_opts.layer;
  opts.fused_kernels = ctx.fused_kernels;  // model.fused_kernels owns every fused kernel
  PositionContext pc;
  pc.d_model = ctx.d_model;
  pc.n_heads = opts.n_heads;
  pc.n_kv_heads = resolved_kv_heads(opts);
  pc.head_dim = resolved_head_dim(opts, ctx.d_model);
  pc.causal = opts.causal;
  pc.train_length = ctx.lengths.train_length;
  pc.max_length = ctx.lengths.max_length;
  pc.layer_index = ctx.layer_index;
  const PositionSpec& spec = mixer_opts.position;
  std::shared_ptr<PositionScheme> scheme = build_position_scheme(spec, *ctx.host, pc);
  if (scheme->hooks() & kHookEmbed) {
    throw ConfigError(spec.where.str() + ": " + spec.path + ".scheme: scheme '" + scheme->name() +
                      "' acts on the input embeddings (embed hook); set it as model.position, "
                      "not as an attention layer's position");
  }
  if (opts.path && (scheme->hooks() & kHookRotate)) {
    throw ConfigError(spec.where.str() + ": " + spec.path + ".scheme: scheme '" + scheme->name() +
                      "' rotates queries and keys, which PaTH (model.attention.path: true) "
                      "replaces; use nope, or an additive scheme such as fox (PaTH-FoX)");
  }
  check_scheme_length(*scheme, spec, ctx.lengths);
  bool shared = false;
  if (scheme->shared_across_layers() && ctx.shared) {
    // Layers with the same settings (scheme, params, head layout) use one instance.
    const std::string key =
        spec.key() + "|H=" + std::to_string(pc.n_heads) + "|Hkv=" + std::to_string(pc.n_kv_heads) +
        "|Dh=" + std::to_string(pc.head_dim) + (pc.causal ? "|causal" : "|bidir");
    auto [it, inserted] = ctx.shared->by_key.emplace(key, scheme);
    if (!inserted) scheme = it->second;
    shared = true;
  }
  return std::make_shared<Attention>(opts, ctx.d_model, scheme, /*register_scheme=*/!shared);
}

}  // namespace

MixerType attention_mixer_type() {
  MixerType t;
  t.name = "attention";
  t.letter = 'A';
  t.description =
      "multi-head softmax attention (GQA, window, qk-norm, output gate, positional hooks)";
  t.read = [](Section s, const ModelDims& dims, const std::any* base) -> std::any {
    return read_attention_options(
        s, dims.d_model, base ? &std::any_cast<const AttentionMixerOptions&>(*base) : nullptr);
  };
  t.build = build_attention;
  // Neither the scheme's settings nor the window are parameters: a trained model runs with others.
  t.eval_safe_keys = {"position", "window"};
  return t;
}

}  // namespace hybridlab
