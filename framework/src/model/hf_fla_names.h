#pragma once
// The names of a HybridModel's parameters in flash-linear-attention's `gated_deltanet` layout
// (fla-org/flash-linear-attention@bc3b101d, models/gated_deltanet/modeling_gated_deltanet.py),
// shared by export (hf_fla_export.cpp) and import (hf_fla_import.cpp).

#include <torch/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model/model_options.h"

namespace hybridlab {

/// What naming one layer's tensors needs.
struct HfFlaLayer {
  bool attention = false;    ///< attention (else Gated DeltaNet)
  bool interleaved = false;  ///< attention with RoPE in interleaved pairs: q/k rows permuted
  int64_t head_dim = 0;      ///< attention only
};

/// The layers of `opts` as fla names them. Throws UserError naming the first layer whose mixer
/// the layout has no place for (anything but attention and gated_deltanet).
std::vector<HfFlaLayer> hf_fla_layers(const ModelOptions& opts);

/// One parameter of the model and its tensor in the layout.
struct HfFlaTensor {
  std::string parameter;      ///< the model's name, e.g. "layers_0.mixer.q_conv"
  std::string name;           ///< fla's, e.g. "model.layers.0.attn.q_conv1d.weight"
  bool permute_rope = false;  ///< rows reordered between interleaved and rotate-half pairs
  int64_t head_dim = 0;       ///< the head size of that reordering
};

/// Every parameter of a model with `named` parameters (HybridModel::named_parameters order) and
/// layers `layers`, with its name in the layout. Throws UserError naming the first parameter the
/// layout has no place for.
std::vector<HfFlaTensor> hf_fla_tensors(const std::vector<std::string>& named,
                                        const std::vector<HfFlaLayer>& layers);

/// Rows of a [heads·D, d] projection reordered per head from interleaved pairs (2i, 2i+1) to
/// rotate-half pairs (i, i + D/2): row i of each new head is old row 2i, row D/2+i old 2i+1.
torch::Tensor interleaved_to_half(const torch::Tensor& w, int64_t head_dim);
/// The inverse of interleaved_to_half.
torch::Tensor half_to_interleaved(const torch::Tensor& w, int64_t head_dim);

}  // namespace hybridlab
