#pragma once
// The options readers of the built-in mixer types (`model.attention`, `model.gated_deltanet`, and
// a layer's override over either), each defined in its type's file (mixer_attention.cpp,
// mixer_gated_deltanet.cpp). The layers (layers/) take the plain option structs and know nothing
// of the config; the checks here name file:line:key.

#include <cstdint>

#include "hybridlab/config.h"
#include "hybridlab/mixer.h"
#include "layers/attention.h"
#include "layers/gated_deltanet.h"
#include "model/position_spec.h"

namespace hybridlab {

/// What the `attention` mixer type reads: the layer's options and its `position:` map.
struct AttentionMixerOptions {
  AttentionOptions layer;
  PositionSpec position;  ///< the positional scheme (`position: {scheme: NAME, ...params}`)
};

/// Reads an attention options map (for an override, a Section::over its base). Uses ctx.d_model.
/// Records (does not throw) problems: n_heads <= 0, n_kv_heads not dividing n_heads, n_heads not
/// dividing d_model (when head_dim is automatic), window < 0, block_size <= 0, norm_eps <= 0,
/// conv_size < 1, a normalization other than softmax / stick_breaking, stick_breaking or path
/// without causal, path_chunk_size < 1.
AttentionMixerOptions read_attention_options(Section& s, const MixerContext& ctx);

/// Reads a Gated DeltaNet options map; `s` as for read_attention_options. Uses ctx.d_model and
/// ctx.fused_kernels. Records problems: n_heads <= 0, n_v_heads not a multiple of n_heads,
/// n_heads not dividing d_model (automatic head_dim), head_dim·expand_v not a whole number,
/// conv_size < 1, chunk_size <= 0, bad mode, a `fused_kernels` key other than
/// model.fused_kernels: the model's key owns it; configurations resolved before it did carry
/// both, equal, and still load.
GatedDeltaNetOptions read_gated_deltanet_options(Section& s, const MixerContext& ctx);

}  // namespace hybridlab
