#include "model/layer_positions.h"

#include "model/position_spec.h"

namespace hybridlab {

BuiltPosition LayerPositions::build(Section& position, const PositionContext& ctx) {
  const PositionSpec spec = read_position_spec(position);
  BuiltPosition out{build_position_scheme(spec, host_, ctx), false};
  check_scheme_length(*out.scheme, spec, lengths_);
  if (out.scheme->shared_across_layers()) {
    // Layers with the same settings (scheme, params, head layout) use one instance.
    const std::string key = spec.key() + "|H=" + std::to_string(ctx.n_heads) +
                            "|Hkv=" + std::to_string(ctx.n_kv_heads) +
                            "|Dh=" + std::to_string(ctx.head_dim) +
                            (ctx.causal ? "|causal" : "|bidir");
    auto [it, inserted] = shared_.emplace(key, out.scheme);
    if (!inserted) out.scheme = it->second;
    out.shared = true;
  }
  return out;
}

}  // namespace hybridlab
