#pragma once
// The language model built from the `model:` section (owned by the layers work; docs/layers.md):
// embedding → [pre-norm block × N] → final RMSNorm → head. Each block is
// `x + mixer(norm(x))`, then `x + mlp(norm(x))`, with the mixer (attention, gated_deltanet, ...)
// chosen per layer by `model.layers`.

#include <torch/nn/module.h>
#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "hybridlab/config.h"
#include "hybridlab/plugin_host.h"

namespace hybridlab {

struct ModelOptions;  // framework/src/model/model_options.h

/// Lengths the model must serve, known from the task/eval sections.
struct ModelBuildContext {
  ModelBuildContext() = default;
  ModelBuildContext(int64_t train, int64_t max, std::string packed = "")
      : train_length(train), max_length(max), packed_documents(std::move(packed)) {}
  int64_t train_length = 0;  ///< task.seq_len; the longest setting's of a task mixture
  int64_t max_length = 0;    ///< longest eval length (>= train_length)
  /// Non-empty when training rows pack documents whose boundaries every mixer must honour
  /// (Task::packed_documents_setting): "file:line:col: task.packing", for the message that refuses
  /// a mixer that cannot (Mixer::document_boundaries).
  std::string packed_documents;
};

/// Decoding state of a whole model (one entry per layer: KV caches, recurrent states). Create with
/// LanguageModel::new_cache(); pass to forward(tokens, cache) for prefill and for each step.
struct DecodeCache {
  virtual ~DecodeCache();
  /// Bytes held by the cache's tensors (KV caches, recurrent and convolution states, cached
  /// positions) for all its sequences: the decoding memory beyond the weights. Default 0.
  virtual int64_t nbytes() const { return 0; }
  int64_t length = 0;  ///< tokens processed so far (the position of the next token)
};

/// One row of `hybridlab model summary`.
struct LayerSummary {
  int64_t index = 0;
  char letter = 0;                ///< pattern letter ('A', 'G')
  std::string mixer;              ///< mixer type name
  std::string position;           ///< MixerInfo::position: "rope", "path+fox", "-" without one
  uint32_t position_hooks = 0;    ///< PositionHook mask of that scheme
  bool carries_position = false;  ///< carries_position(): a hook or the mixer's own (PaTH)
  bool pairwise = false;          ///< the mixer computes pairwise (softmax) attention scores
  bool overridden = false;        ///< a per-layer override applies
  int64_t parameters =
      0;  ///< parameters of the block (mixer + MLP + norms), shared schemes excluded
  int64_t mixer_parameters = 0;
  int64_t state_floats = 0;         ///< fixed decoding state per sequence (recurrent + conv)
  int64_t kv_floats_per_token = 0;  ///< KV cache floats per cached token per sequence
  int64_t kv_max_tokens = 0;        ///< tokens the KV cache keeps at most (window); 0 = all
  double flops_per_token = 0;       ///< forward FLOPs per token (mixer + MLP) at the length asked
  std::string details;
};

struct ModelSummary {
  int64_t length = 0;  ///< the sequence length FLOPs were counted at
  int64_t d_model = 0, vocab_size = 0;
  bool tied_embeddings = true;
  std::string input_position;  ///< model-level (embed hook) scheme, "" if none
  std::vector<LayerSummary> layers;
  int64_t total_parameters = 0;            ///< every parameter once (tied and shared ones once)
  int64_t embedding_parameters = 0;        ///< token embedding (+ untied or autoencoder head)
  int64_t shared_position_parameters = 0;  ///< schemes shared across layers (counted once)
  double attention_share = 0;              ///< share of layers with pairwise attention
  /// Share of layers that carry position (carries_position(): a positional hook, or the mixer's
  /// own method such as PaTH's transforms).
  double position_share = 0;
  int64_t recurrent_state_floats = 0;  ///< sum of fixed per-sequence decoding state
  int64_t kv_floats_per_token = 0;     ///< sum of KV cache floats per cached token
  double flops_per_token = 0;          ///< forward FLOPs per token incl. the head
};

/// Evaluation-time knock-outs of one layer (ablation at inference, for analysis). The defaults
/// change nothing.
struct LayerAblation {
  /// The mixer's output replaced by zero: the residual stream passes through and the block is
  /// x + mlp(norm(x)).
  bool mixer_off = false;
  /// > 0: the mixer runs on consecutive segments of this many tokens, each from an empty state
  /// (token t sees tokens floor(t/w)·w .. t): a state reset every `state_window` tokens.
  /// Recurrent (non-pairwise) mixers only; whole-sequence calls only (no decoding cache).
  int64_t state_window = 0;
  AttentionAblation attention;  ///< attention layers only: positional hooks off, a window
};

/// Knock-outs of a whole model; `layers` is empty (none) or has one entry per layer.
struct ModelAblation {
  bool no_input_position = false;  ///< skip the input (embed-hook) scheme
  std::vector<LayerAblation> layers;
};

class LanguageModel;

/// The device of `model`'s parameters (its first one's; the CPU when it has none): where its
/// inputs go.
torch::Device model_device(const LanguageModel& model);

/// A causal language model over a token vocabulary.
class LanguageModel : public torch::nn::Module {
 public:
  ~LanguageModel() override;
  /// tokens [B,T] int64 → logits [B,T,vocab_size] float. Positions are 0..T-1.
  virtual torch::Tensor forward(const torch::Tensor& tokens) = 0;
  /// Continues `cache`: tokens [B,T] get positions cache.length .. cache.length+T-1; returns
  /// their logits [B,T,vocab_size] and advances the cache. Prefill then one-token steps equals one
  /// forward() over the whole sequence (tested per mixer and scheme). Throws UserError for a
  /// model that is not causal (`model.head: autoencoder`).
  virtual torch::Tensor forward(const torch::Tensor& tokens, DecodeCache& cache) = 0;
  /// Packed rows: tokens [B,T] int64 holding several documents per row, document_starts [B,T]
  /// bool true at each document's first token (a row's first token always starts one) → logits
  /// [B,T,vocab_size], each document modelled as if alone: positions from 0, an empty recurrent
  /// state and convolution history, attention inside the document (fla's `cu_seqlens` varlen
  /// semantics; Mixer::document_boundaries says how each mixer honours it). Equal to running every
  /// document as its own sequence (tested per mixer and scheme). Throws c10::Error when the
  /// shapes differ.
  virtual torch::Tensor forward_packed(const torch::Tensor& tokens,
                                       const torch::Tensor& document_starts) = 0;
  /// An empty cache for forward(tokens, cache).
  virtual std::unique_ptr<DecodeCache> new_cache() const = 0;
  /// The per-layer table and totals; FLOPs counted at sequence length `length`.
  virtual ModelSummary summary(int64_t length) const = 0;
  virtual int64_t vocab_size() const = 0;
  virtual int64_t d_model() const = 0;

  /// The first part of the model whose output is non-finite although its input is finite.
  struct NonFiniteLayer {
    std::string label;         ///< "layer 2 (mixer 'q', plugin '/p/q.so')"; "" when none
    bool from_plugin = false;  ///< the part runs plugin code (a mixer or a positional hook)
  };
  /// Runs forward (forward_packed when `document_starts` is defined) on tokens [B,T] without
  /// gradients, checking each part's output, and names the first that turned finite values into
  /// non-finite ones: what made a non-finite loss, when it was not the weights as a whole. The
  /// default (a model without parts to name) finds none. Throws what forward throws.
  virtual NonFiniteLayer first_non_finite_layer(const torch::Tensor& tokens,
                                                const torch::Tensor& document_starts) {
    (void)tokens;
    (void)document_starts;
    return {};
  }

  // What the analysis asks of a model's layers (knock-outs, head statistics, recurrent states)
  // without knowing its class. The defaults describe a model with no layers to name.

  /// The number of mixer layers (blocks).
  virtual int64_t num_layers() const { return 0; }
  /// Layer `i`'s mixer. Throws std::out_of_range unless 0 <= i < num_layers().
  virtual Mixer& layer_mixer(int64_t i) const;
  /// Layer `i`'s mixer type name ("attention", "gated_deltanet", a plugin's name). Throws
  /// std::out_of_range as layer_mixer().
  virtual std::string layer_mixer_name(int64_t i) const;
  /// The input (embed-hook) scheme's name; "" when the model has none.
  virtual std::string input_scheme() const { return ""; }
  /// Layer `i`'s entry of a cache that this model's new_cache() made; nullptr for another
  /// model's cache or a layer out of range.
  virtual const MixerCache* layer_cache(const DecodeCache& cache, int64_t i) const {
    (void)cache;
    (void)i;
    return nullptr;
  }
  /// Feeds tokens [B,T] through every layer's decoding cache (positions cache.length ..
  /// cache.length+T-1) without the output head, and advances the cache: what the layers' states
  /// hold after a prefix. Throws std::logic_error for a model without layers to name.
  virtual void advance(const torch::Tensor& tokens, DecodeCache& cache);
  /// Applies `a` to every later forward (ModelAblation{} restores the trained model). Throws
  /// std::invalid_argument for an ablation this model cannot apply (any non-empty one, for a
  /// model without layers to name).
  virtual void set_ablation(const ModelAblation& a);
};

/// Reads and validates `model:` (records problems in the config; see Config::raise_errors). Keys:
/// d_model, vocab_size, layers, attention, gated_deltanet, mlp, overrides, position, norm_eps,
/// tie_embeddings, init_std (docs/layers.md).
std::shared_ptr<ModelOptions> read_model_options(Section model);

/// The figures of a model's options that are checked before anything is built (the experiment
/// reader's memory bounds and task checks).
struct ModelShape {
  int64_t d_model = 0;
  int64_t vocab_size = 0;
  int64_t layers = 0;      ///< the layer count
  int64_t mlp_hidden = 0;  ///< SwiGLU's hidden width (d_model itself for widths of 2^40 or more)
  bool tie_embeddings = true;
  bool autoencoder = false;  ///< `model.head: autoencoder`
};

/// The shape of `opts`. Throws nothing.
ModelShape model_shape(const ModelOptions& opts);

/// Sets the vocabulary of `opts` (an unset `model.vocab_size` follows the task's). Throws nothing.
void set_vocab_size(ModelOptions& opts, int64_t vocab_size);

/// A mixer type a configuration can name in `model.layers`.
struct MixerTypeInfo {
  char letter = 0;     ///< its pattern letter ('A')
  std::string name;    ///< its section under `model:` ("attention")
  std::string origin;  ///< "built in", or its plugin library's path
  /// The keys of its section (and of a layer's override) its trained parameters do not depend on,
  /// which an evaluation variant may change ({"position", "window"}; each covers its subtree).
  std::vector<std::string> eval_safe_keys;
};

/// The mixer types `cfg` can name: the built-in ones, then, when `with_plugins`, the usable mixer
/// plugins on its search path (plugins.paths, HYBRIDLAB_PLUGIN_PATH, the installation's folder;
/// searching loads each library there once per process, first in a supervised child). `unused`,
/// when given, receives one line per mixer plugin found there but not used, because its name or
/// letter is taken, naming both types and origins. Throws nothing: a failed search lists the
/// built-in types.
std::vector<MixerTypeInfo> mixer_types(const Config& cfg, bool with_plugins,
                                       std::vector<std::string>* unused = nullptr);

/// Builds the model, instantiating positional schemes through `host`. Throws ConfigError /
/// PluginError for settings that cannot be built (e.g. an eval length past a learned table, an
/// embed-only scheme on an attention layer).
std::shared_ptr<LanguageModel> build_model(const ModelOptions& opts, PluginHost& host,
                                           const ModelBuildContext& ctx);

}  // namespace hybridlab
