#pragma once
// Models in the Hugging Face layouts other tools read: flash-linear-attention's `gated_deltanet`
// (fla-org/flash-linear-attention@bc3b101d, fla/models/gated_deltanet/ and fla/models/hybrid.py),
// whose hybrid `attn` spec puts softmax attention with RoPE at chosen layers.

#include <torch/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "hybridlab/model.h"

namespace hybridlab {

/// A model in a Hugging Face layout: the text of config.json and every tensor under its name in
/// that layout (CPU tensors in the model's dtype; views of the model's parameters where no
/// permutation is needed, so exporting costs no second copy of the weights).
struct HfCheckpoint {
  std::string config_json;
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
};

/// `model` in fla's `gated_deltanet` layout (model_type "gated_deltanet"): Gated DeltaNet layers
/// as fla's GatedDeltaNet, attention layers through the `attn` spec (one entry per distinct
/// setting), names `model.embeddings.weight`, `model.layers.{i}.{attn_norm,attn,mlp_norm,mlp}.*`,
/// `model.norm.weight`, `lm_head.weight` (absent when tied). Attention with RoPE in the
/// interleaved-pairs layout has its q and k projection rows permuted per head into fla's
/// rotate-half layout (q·k is unchanged: both sides get the same permutation).
/// `max_position_embeddings`: written to config.json (fla sizes its rotary table with it).
/// Throws UserError naming the layer and the setting fla's layout cannot express, never
/// approximating: a plugin mixer, a model-level input scheme, the autoencoder head, attention
/// that is bidirectional or has qk_norm, an output gate, a short convolution, a head_dim other
/// than d_model / n_heads, a scheme other than `rope` or rope with partial rotation or scaling,
/// Gated DeltaNet layers whose settings differ (fla has one set), a Gated DeltaNet output-norm eps
/// other than model.norm_eps (fla uses norm_eps for both), or a parameter with no place in it.
HfCheckpoint export_hf_fla(const LanguageModel& model, int64_t max_position_embeddings);

}  // namespace hybridlab
