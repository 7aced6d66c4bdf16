#pragma once
// Models in the Hugging Face layouts other tools read: flash-linear-attention's `gated_deltanet`
// (fla-org/flash-linear-attention@bc3b101d, fla/models/gated_deltanet/ and fla/models/hybrid.py),
// whose hybrid `attn` spec puts softmax attention with RoPE at chosen layers.

#include <torch/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "hybridlab/config.h"
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
/// that is bidirectional or has qk_norm, an output gate, a short convolution, stick-breaking
/// weights, a head_dim other
/// than d_model / n_heads, a scheme other than `rope` or rope with partial rotation or scaling,
/// Gated DeltaNet layers whose settings differ (fla has one set), a Gated DeltaNet output-norm eps
/// other than model.norm_eps (fla uses norm_eps for both), or a parameter with no place in it.
HfCheckpoint export_hf_fla(const LanguageModel& model, int64_t max_position_embeddings);

/// The `model:` keys (dotted, below `model.`) that describe the checkpoint in `dir`, read by the
/// layout its config.json's model_type names: `gated_deltanet` (fla), `qwen3_next`, `qwen3_5`,
/// `qwen3_5_text` (docs/interop.md). For fla (absent keys take fla's defaults): d_model,
/// vocab_size, the layer pattern (A at the `attn` spec's layers, G elsewhere), norm_eps,
/// tie_embeddings, mlp.intermediate_size, the gated_deltanet keys, the first attention spec as
/// `attention.*` with `position: {scheme: rope, rope_theta}` and the others as per-layer
/// `overrides`. Throws ConfigError naming config.json and the key for another model_type, a
/// key of a layout this importer does not read (mixture of experts, latent attention, vision
/// tower, rope_scaling, attnres_block_size), hidden_act other than swish, use_gate false,
/// qkv_bias, or a malformed `attn` spec; for a model_type no layout reads (naming the nearest).
std::vector<std::pair<std::string, YAML::Node>> hf_model_keys(const std::string& dir);

/// Expands `model.from: DIR` in `cfg`: DIR (relative: to `base_dir`, "" = the config file's
/// folder, else to the working directory) becomes absolute, and every key of hf_fla_model_keys(DIR)
/// the config leaves unset is set, located at DIR/config.json (a key the config sets wins).
/// Idempotent; does nothing without model.from. Throws ConfigError at model.from's location for a
/// folder without config.json, and what hf_fla_model_keys throws.
void expand_model_from(Config& cfg, const std::string& base_dir = "");

/// Loads the tensors of the checkpoint in `dir` (model.safetensors or its index) into `model`,
/// which was built from the keys of the same config.json, one tensor at a time (converted to the
/// parameter's dtype; fused and interleaved projections split, (1 + w) norms made plain, q/k rows
/// permuted for an interleaved RoPE layout). Throws DataError naming the file and the tensor for
/// a missing tensor, a shape other than the config's, a tensor that is not floating point, and a
/// tensor with no place in the model (a tied model's lm_head.weight excepted); and what
/// SafetensorsCheckpoint throws.
void load_hf_weights(LanguageModel& model, const std::string& dir);

}  // namespace hybridlab
