#include "hybridlab/attention_maps.h"

#include <fmt/core.h>

#include <stdexcept>

#include "analysis/knockouts.h"
#include "hybridlab/error.h"
#include "hybridlab/mixer.h"

namespace hybridlab {

namespace {

using torch::indexing::Slice;

// The weights of row 0 of `layer` in one forward, gathered from its query blocks into [H,T,T].
torch::Tensor observed_weights(LanguageModel& model, int64_t layer, const torch::Tensor& tokens) {
  const int64_t T = tokens.size(1);
  torch::Tensor out;
  MixerProbes probes;
  probes.attention = [&](const torch::Tensor& p, const torch::Tensor& qp, const torch::Tensor& kp) {
    if (!out.defined()) out = torch::zeros({p.size(1), T, T}, torch::kFloat);
    const torch::Tensor rows = qp.to(torch::kCPU, torch::kLong).unsqueeze(1);
    const torch::Tensor cols = kp.to(torch::kCPU, torch::kLong).unsqueeze(0);
    out.index_put_({Slice(), rows, cols}, p[0].to(torch::kCPU, torch::kFloat));
  };
  Mixer& mixer = model.layer_mixer(layer);
  mixer.set_probes(probes);
  try {
    model.forward(tokens);
  } catch (...) {
    mixer.set_probes({});
    throw;
  }
  mixer.set_probes({});
  return out;
}

}  // namespace

torch::Tensor mean_key_distance(const torch::Tensor& weights) {
  TORCH_CHECK(weights.dim() == 3 && weights.size(1) == weights.size(2),
              "mean_key_distance: weights must be [H,T,T], got ", weights.sizes());
  const int64_t T = weights.size(1);
  const torch::Tensor i = torch::arange(T, weights.options()).unsqueeze(1);
  const torch::Tensor j = torch::arange(T, weights.options()).unsqueeze(0);
  return (weights * (i - j)).sum(-1).mean(-1);
}

std::vector<LayerAttentionMap> attention_maps(LanguageModel& model, const torch::Tensor& tokens,
                                              int64_t layer) {
  if (tokens.dim() != 2 || tokens.size(0) != 1)
    throw std::invalid_argument("attention_maps: tokens must be [1,T]");
  const int64_t n = model.num_layers();
  if (layer >= n)
    throw UserError(fmt::format("--layer {}: the model has {} layers (0 to {})", layer, n, n - 1));
  std::vector<int64_t> layers;
  for (int64_t i = 0; i < n; ++i) {
    if (layer >= 0 && i != layer) continue;
    if (model.layer_mixer(i).info(1).pairwise) {
      layers.push_back(i);
    } else if (layer >= 0) {
      throw UserError(fmt::format("--layer {} is {}, which computes no attention weights", layer,
                                  analysis::layer_label(model, static_cast<size_t>(i))));
    }
  }
  if (layers.empty()) throw UserError("the model has no pairwise (attention) layer to inspect");
  torch::NoGradGuard no_grad;
  model.eval();
  std::vector<LayerAttentionMap> out;
  for (int64_t i : layers) {
    LayerAttentionMap m;
    m.layer = i;
    m.target = analysis::layer_label(model, static_cast<size_t>(i));
    m.weights = observed_weights(model, i, tokens);
    if (carries_position(model.layer_mixer(i))) {
      ModelAblation a;
      a.layers.assign(static_cast<size_t>(n), LayerAblation{});
      a.layers[static_cast<size_t>(i)].attention.no_position = true;
      model.set_ablation(a);
      try {
        m.without_position = observed_weights(model, i, tokens);
      } catch (...) {
        model.set_ablation(ModelAblation{});
        throw;
      }
      model.set_ablation(ModelAblation{});
    }
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace hybridlab
