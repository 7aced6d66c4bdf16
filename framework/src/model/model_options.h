#pragma once
// ModelOptions: the `model:` section read by read_model_options (model_options.cpp).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hybridlab/model.h"
#include "layers/mlp.h"
#include "model/builtin_mixers.h"
#include "model/mixer.h"
#include "model/position_spec.h"

namespace hybridlab {

/// One layer of the graph: its mixer type and that mixer's settings, which its factory reads
/// when the model is built (build_mixer).
struct LayerSpec {
  const MixerType* type = nullptr;
  /// `model.<name>`, or this layer's override over it (Section::over).
  Section settings;
  bool overridden = false;
};

/// What the model outputs (`model.head`).
enum class ModelHead {
  kCausalLM,     ///< `causal_lm`: next-token logits at every position from that position's state
  kAutoEncoder,  ///< `autoencoder`: every position decoded from the last (model/autoencoder_head.h)
};

/// The YAML name of `h` ("causal_lm", "autoencoder").
const char* model_head_name(ModelHead h);

struct ModelOptions {
  int64_t d_model = 256;
  int64_t vocab_size = 256;
  std::vector<LayerSpec> layers;
  /// Sections of mixer plugins that no layer uses: built once (and dropped) with the model, so
  /// that their settings are checked as a used section's are (built-in sections are checked by
  /// their readers).
  std::vector<LayerSpec> unused_plugin_mixers;
  MlpOptions mlp;
  double norm_eps = 1e-5;  ///< eps of the block and final RMSNorms
  /// Fused CPU passes in training for the block and final RMSNorms and the SwiGLU gating; false
  /// keeps their LibTorch tensor forms (the reference for tests and benches).
  bool fused_kernels = true;
  ModelHead head = ModelHead::kCausalLM;
  bool tie_embeddings = true;            ///< the head reuses the token embedding matrix
  double init_std = 0.02;                ///< std of the token embedding (and untied head) init
  std::optional<PositionSpec> position;  ///< model-level input scheme (embed hook)
  std::string layers_text;               ///< the layer letters, e.g. "GGGAGGGA"
  /// `model.from`: a checkpoint folder in fla's gated_deltanet layout whose tensors the built
  /// model takes (load_hf_fla_weights; its config.json filled the other keys through
  /// expand_model_from). "" = none: the model starts from its initialisation.
  std::string from;
};

/// The context a mixer of `opts` is read in: its width and model.fused_kernels (no position
/// service, no lengths).
MixerContext mixer_read_context(const ModelOptions& opts);

/// The options of `layer` (an attention or a Gated DeltaNet layer of `opts`), read again from its
/// settings as its factory reads them: what export and import map onto other layouts. Problems
/// were reported when the model section was read.
AttentionMixerOptions attention_options(const LayerSpec& layer, const ModelOptions& opts);
GatedDeltaNetOptions gated_deltanet_options(const LayerSpec& layer, const ModelOptions& opts);

}  // namespace hybridlab
