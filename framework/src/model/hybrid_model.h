#pragma once
// HybridModel: the LanguageModel built by build_model from ModelOptions.

#include <torch/nn/module.h>
#include <torch/nn/modules/embedding.h>
#include <torch/types.h>

#include <memory>
#include <vector>

#include "hybridlab/model.h"
#include "layers/mlp.h"
#include "layers/norm.h"
#include "model/mixer.h"
#include "model/model_options.h"

namespace hybridlab {

/// Pre-norm residual block: x + mixer(norm(x)), then x + mlp(norm(x)).
class Block : public torch::nn::Module {
 public:
  Block(std::shared_ptr<Mixer> mixer, int64_t d_model, int64_t mlp_hidden, double norm_eps);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& positions, MixerCache* cache);
  std::shared_ptr<Mixer> mixer;
  std::shared_ptr<RMSNorm> mixer_norm, mlp_norm;
  std::shared_ptr<SwiGLU> mlp;
};

class HybridModel : public LanguageModel {
 public:
  /// Throws ConfigError / PluginError (see build_model).
  HybridModel(const ModelOptions& opts, PluginHost& host, const ModelBuildContext& ctx);

  torch::Tensor forward(const torch::Tensor& tokens) override;
  torch::Tensor forward(const torch::Tensor& tokens, DecodeCache& cache) override;
  std::unique_ptr<DecodeCache> new_cache() const override;
  ModelSummary summary(int64_t length) const override;
  int64_t vocab_size() const override { return opts_.vocab_size; }
  int64_t d_model() const override { return opts_.d_model; }

  const std::vector<std::shared_ptr<Block>>& blocks() const { return blocks_; }
  const ModelOptions& options() const { return opts_; }

 private:
  torch::Tensor run(const torch::Tensor& tokens, int64_t start, DecodeCache* cache);

  ModelOptions opts_;
  torch::nn::Embedding embedding{nullptr};
  torch::Tensor head_weight;  ///< untied head [V,D]; undefined when tied
  std::shared_ptr<PositionScheme> input_position;
  std::vector<std::shared_ptr<Block>> blocks_;
  std::vector<std::shared_ptr<PositionScheme>> shared_schemes_;
  std::shared_ptr<RMSNorm> final_norm;
};

}  // namespace hybridlab
