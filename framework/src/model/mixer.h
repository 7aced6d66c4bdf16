#pragma once
// The token-mixer interface of the layer graph and the registry of mixer types.
//
// A block is `x + mixer(norm(x))`, then `x + mlp(norm(x))`. The mixer is any registered type
// (attention, gated_deltanet, ...). Adding one is one new file (a Mixer subclass, its options
// reader and a `MixerType` describing it) plus one line in register_builtin_mixers()
// (mixer_registry.cpp).

#include <torch/nn/module.h>
#include <torch/types.h>

#include <any>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "hybridlab/config.h"
#include "hybridlab/model.h"
#include "hybridlab/plugin_host.h"

namespace hybridlab {

/// Per-layer decoding state (KV cache, recurrent state + conv cache). Owned by the caller; a
/// mixer's forward() reads and updates it in place.
struct MixerCache {
  virtual ~MixerCache();
  /// Bytes held by the cache's tensors (0 when empty).
  virtual int64_t nbytes() const = 0;
};

/// What `model summary` shows about one mixer.
struct MixerInfo {
  std::string position = "-";       ///< positional scheme name ("-" for mixers without one)
  uint32_t position_hooks = 0;      ///< PositionHook mask of that scheme
  bool pairwise = false;            ///< computes pairwise (softmax) attention scores
  int64_t state_floats = 0;         ///< fixed-size decoding state per sequence (recurrent + conv)
  int64_t kv_floats_per_token = 0;  ///< growing KV cache per token per sequence
  int64_t kv_max_tokens = 0;        ///< tokens the KV cache keeps at most (window), 0 = all
  double flops_per_token = 0;       ///< forward FLOPs per token at the asked length
  std::string details;              ///< one short line (heads, dims, window, ...)
};

/// A token mixer: [B,T,D] → [B,T,D], with explicit positions so it can run on a piece of a
/// sequence with a cache.
class Mixer : public torch::nn::Module {
 public:
  ~Mixer() override;
  /// x [B,T,D]; positions [T] int64 (absolute positions of x's tokens, consecutive; with a cache
  /// they continue the cached ones). cache: nullptr for a whole-sequence call; otherwise the
  /// state of the tokens before x, updated in place to include x.
  virtual torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& positions,
                                MixerCache* cache) = 0;
  /// A fresh (empty) cache for this mixer.
  virtual std::unique_ptr<MixerCache> make_cache() const = 0;
  /// Summary figures; `length` is the sequence length FLOPs are counted at.
  virtual MixerInfo info(int64_t length) const = 0;
};

/// Model dimensions a mixer's options reader needs for its checks.
struct ModelDims {
  int64_t d_model = 0;
};

/// Positional schemes shared across layers (PositionScheme::shared_across_layers()), keyed by
/// their settings; the model registers each of them once.
struct SharedSchemes {
  std::map<std::string, std::shared_ptr<PositionScheme>> by_key;
};

/// Everything a mixer needs to be built.
struct MixerBuildContext {
  int64_t d_model = 0;
  int64_t layer_index = 0;
  PluginHost* host = nullptr;
  ModelBuildContext lengths;
  SharedSchemes* shared = nullptr;
};

/// One registered mixer type.
struct MixerType {
  std::string name;  ///< YAML name and section under `model:` ("attention")
  char letter = 0;   ///< pattern letter ('A')
  std::string description;
  /// Reads options from `s` (the `model.<name>` section, or an override map). `base`: the options
  /// the section overrides (nullptr for `model.<name>` itself). Records problems in the config.
  std::function<std::any(Section s, const ModelDims& dims, const std::any* base)> read;
  /// Builds the mixer from what read() returned. Throws ConfigError / PluginError.
  std::function<std::shared_ptr<Mixer>(const std::any& options, const MixerBuildContext& ctx)>
      build;
};

/// The registry of mixer types (one per process, filled once by register_builtin_mixers()).
class MixerRegistry {
 public:
  /// The registry with the built-in mixers registered.
  static const MixerRegistry& instance();
  /// Adds a type. Throws std::logic_error for a duplicate name or letter.
  void add(MixerType type);
  /// The type for a letter ('A') or a name ("attention"); nullptr if none.
  const MixerType* find(const std::string& letter_or_name) const;
  const std::vector<MixerType>& types() const { return types_; }
  /// "A (attention), G (gated_deltanet)" for messages.
  std::string names() const;

 private:
  std::vector<MixerType> types_;
};

/// Registers every built-in mixer type: one line per type. Called once by instance().
void register_builtin_mixers(MixerRegistry& registry);

// One MixerType per built-in mixer, each defined in its own file.
MixerType attention_mixer_type();       // mixer_attention.cpp
MixerType gated_deltanet_mixer_type();  // mixer_gated_deltanet.cpp

}  // namespace hybridlab
