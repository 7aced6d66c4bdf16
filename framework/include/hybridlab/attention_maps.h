#pragma once
// The attention weights of a trained model on one input, per pairwise layer and head, beside the
// same weights with that layer's position knocked out: what `hybridlab inspect attention` draws.
// It shows the position methods that have no table of their own (PaTH's transforms, CoPE's
// counted positions, stick-breaking's weights) by the weights they produce (docs/analysis.md).

#include <torch/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "hybridlab/model.h"

namespace hybridlab {

/// One pairwise layer's weights on one sequence of T tokens.
struct LayerAttentionMap {
  int64_t layer = 0;
  std::string target;     ///< "layer 3 (attention, path+fox)", as knock-outs name it
  torch::Tensor weights;  ///< [H,T,T] fp32: row i holds query i's weights over keys j (0: masked)
  /// [H,T,T]: the same input with this layer's position knocked out (AttentionAblation::
  /// no_position: no hooks, no PaTH transforms), the rest of the model as trained; undefined when
  /// the layer carries no position (carries_position()).
  torch::Tensor without_position;
};

/// The mean distance Σ_j w_ij (i − j) of each head's weights, averaged over the queries: [H]
/// (tokens). weights [H,T,T], rows summing to 1. Throws c10::Error for another shape.
torch::Tensor mean_key_distance(const torch::Tensor& weights);

/// Runs `model` on `tokens` [1,T] (int64, on the model's device) under NoGradGuard, with an
/// attention observer (MixerProbes::attention) on every pairwise layer, or on `layer` alone when
/// it is >= 0, and once more per observed layer that carries position with that layer's position
/// knocked out. Returns the layers in order. Leaves the model unablated and unobserved, in eval
/// mode. Throws UserError when `layer` is out of range or not pairwise, or when the model has no
/// pairwise layer; std::invalid_argument when `tokens` is not [1,T].
std::vector<LayerAttentionMap> attention_maps(LanguageModel& model, const torch::Tensor& tokens,
                                              int64_t layer = -1);

}  // namespace hybridlab
