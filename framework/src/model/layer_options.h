#pragma once
// Reading the layers' YAML sections (`model.attention`, `model.gated_deltanet`, `model.mlp` and
// per-layer overrides of them) into the layers' plain option structs. The layers (layers/) take
// those structs and know nothing of the config; the checks here name file:line:key.

#include <cstdint>

#include "hybridlab/config.h"
#include "layers/attention.h"
#include "layers/gated_deltanet.h"
#include "layers/mlp.h"
#include "model/mixer.h"
#include "model/position_spec.h"

namespace hybridlab {

/// What the `attention` mixer type reads: the layer's options and its `position:` map.
struct AttentionMixerOptions {
  AttentionOptions layer;
  PositionSpec position;  ///< the positional scheme (`position: {scheme: NAME, ...params}`)
};

/// Reads an attention options map. `base`: the options this map overrides (per-layer overrides),
/// nullptr for `model.attention` itself. Records (does not throw) problems: n_heads <= 0,
/// n_kv_heads not dividing n_heads, n_heads not dividing d_model (when head_dim is automatic),
/// window < 0, block_size <= 0, norm_eps <= 0, conv_size < 1, a normalization other than softmax /
/// stick_breaking, stick_breaking or path without causal, path_chunk_size < 1.
AttentionMixerOptions read_attention_options(Section s, int64_t d_model,
                                             const AttentionMixerOptions* base = nullptr);

/// Reads a Gated DeltaNet options map; `base` as for read_attention_options. Records problems:
/// n_heads <= 0, n_v_heads not a multiple of n_heads, n_heads not dividing d_model (automatic
/// head_dim), head_dim·expand_v not a whole number, conv_size < 1, chunk_size <= 0, bad mode, a
/// `fused_kernels` key other than model.fused_kernels (dims.fused_kernels): the model's key owns
/// it; configurations resolved before it did carry both, equal, and still load.
GatedDeltaNetOptions read_gated_deltanet_options(Section s, const ModelDims& dims,
                                                 const GatedDeltaNetOptions* base = nullptr);

/// Reads `model.mlp` (intermediate_size >= 0, multiple_of > 0). Records problems in the config.
MlpOptions read_mlp_options(Section s);

}  // namespace hybridlab
