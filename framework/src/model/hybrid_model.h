#pragma once
// HybridModel: the LanguageModel built by build_model from ModelOptions.

#include <torch/nn/module.h>
#include <torch/nn/modules/embedding.h>
#include <torch/types.h>

#include <memory>
#include <vector>

#include "hybridlab/mixer.h"
#include "hybridlab/model.h"
#include "layers/mlp.h"
#include "layers/norm.h"
#include "model/autoencoder_head.h"
#include "model/mixer.h"
#include "model/model_options.h"
#include "model/packed_documents.h"

namespace hybridlab {

/// Pre-norm residual block: x + mixer(norm(x)), then x + mlp(norm(x)).
class Block : public torch::nn::Module {
 public:
  /// fused_kernels: ModelOptions::fused_kernels, for the two norms and the MLP.
  Block(std::shared_ptr<Mixer> mixer, int64_t d_model, int64_t mlp_hidden, double norm_eps,
        bool fused_kernels);
  /// x [B,T,D], positions [T] → [B,T,D], honouring `ablation`. `documents` (nullptr: none): the
  /// rows pack documents and the mixer models each alone (whole-sequence calls only).
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& positions, MixerCache* cache,
                        const PackedDocuments* documents = nullptr);
  std::shared_ptr<Mixer> mixer;
  std::shared_ptr<RMSNorm> mixer_norm, mlp_norm;
  std::shared_ptr<SwiGLU> mlp;
  LayerAblation ablation;  ///< set through HybridModel::set_ablation
  /// How faults in this layer are reported: "layer 2 (mixer 'q', plugin '/p/q.so')".
  std::string label = "a layer";
  /// The plugin library of the mixer ("" for a built-in one): its output's shape and dtype are
  /// checked after every call, and what its forward throws is reported naming `label`.
  std::string plugin_file;
  /// Whether this layer runs plugin code (its mixer, or the hooks of its positional scheme).
  bool runs_plugin = false;

 private:
  torch::Tensor mix(const torch::Tensor& x, const torch::Tensor& positions, MixerCache* cache,
                    const PackedDocuments* documents);
};

class HybridModel : public LanguageModel {
 public:
  /// Throws ConfigError / PluginError (see build_model).
  HybridModel(const ModelOptions& opts, PluginHost& host, const ModelBuildContext& ctx);

  torch::Tensor forward(const torch::Tensor& tokens) override;
  torch::Tensor forward(const torch::Tensor& tokens, DecodeCache& cache) override;
  torch::Tensor forward_packed(const torch::Tensor& tokens,
                               const torch::Tensor& document_starts) override;
  std::unique_ptr<DecodeCache> new_cache() const override;
  NonFiniteLayer first_non_finite_layer(const torch::Tensor& tokens,
                                        const torch::Tensor& document_starts) override;
  ModelSummary summary(int64_t length) const override;
  int64_t vocab_size() const override { return opts_.vocab_size; }
  int64_t d_model() const override { return opts_.d_model; }

  /// Feeds tokens [B,T] through every layer's decoding cache (positions cache.length ..
  /// cache.length+T-1) without the output head, and advances the cache: what the layers' states
  /// hold after a prefix, for any head (model.head autoencoder has no token-by-token logits).
  /// Throws c10::Error for a cache this model did not make.
  void advance(const torch::Tensor& tokens, DecodeCache& cache) override;
  /// Applies `a` to every later forward; ModelAblation{} restores the trained model. Throws
  /// std::invalid_argument when `a.layers` is neither empty nor one entry per layer, or asks for
  /// something a layer cannot do (a state window on an attention layer, an attention knock-out
  /// on another mixer, no_input_position without an input scheme).
  void set_ablation(const ModelAblation& a) override;
  /// Layer `layer`'s entry of a cache made by new_cache() (nullptr for another model's cache).
  static MixerCache* layer_cache(DecodeCache& cache, size_t layer);
  const MixerCache* layer_cache(const DecodeCache& cache, int64_t layer) const override;
  bool has_input_position() const { return input_position != nullptr; }
  int64_t num_layers() const override { return static_cast<int64_t>(blocks_.size()); }
  Mixer& layer_mixer(int64_t i) const override;
  std::string layer_mixer_name(int64_t i) const override;
  std::string input_scheme() const override;

  const std::vector<std::shared_ptr<Block>>& blocks() const { return blocks_; }
  const ModelOptions& options() const { return opts_; }

 private:
  // Throws ConfigError naming `setting` (task.packing's location) and the first layer whose
  // mixer cannot honour document boundaries.
  void check_document_boundaries(const std::string& setting) const;
  // `locate` (nullptr: none): checks every part's output and stops at the first that is
  // non-finite at a finite input, naming it there (first_non_finite_layer).
  // `head` false: returns the last block's output [B,T,D] instead of the logits.
  torch::Tensor run(const torch::Tensor& tokens, int64_t start, DecodeCache* cache,
                    const PackedDocuments* documents, NonFiniteLayer* locate = nullptr,
                    bool head = true);
  // One block's forward under its fault scope: what a plugin mixer throws becomes a PluginError
  // naming the layer and the plugin.
  torch::Tensor run_block(size_t i, const torch::Tensor& x, const torch::Tensor& positions,
                          MixerCache* cache, const PackedDocuments* documents);
  // Sets each block's label and plugin identity (for fault reports).
  void label_blocks();

  ModelOptions opts_;
  torch::nn::Embedding embedding{nullptr};
  torch::Tensor head_weight;  ///< untied head [V,D]; undefined when tied
  std::shared_ptr<PositionScheme> input_position;
  std::vector<std::shared_ptr<Block>> blocks_;
  std::vector<std::shared_ptr<PositionScheme>> shared_schemes_;
  std::shared_ptr<RMSNorm> final_norm;           ///< null with model.head autoencoder
  std::shared_ptr<AutoEncoderHead> autoencoder;  ///< model.head autoencoder only
  bool no_input_position_ = false;
};

}  // namespace hybridlab
