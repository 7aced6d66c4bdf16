#pragma once
// The token-mixer interface every layer of the layer graph implements, and the SDK a mixer plugin
// is written against: a module from [B,T,D] to [B,T,D] with explicit positions, its decoding
// cache, its summary figures and what analysis asks of it. The layer graph (framework/src/model)
// builds the built-in mixers through its registry and plugin mixers through the plugin host; the
// mixers know nothing of either.
//
// A mixer plugin is one shared library that defines a Mixer subclass and ends with
//   HYBRIDLAB_MIXER_PLUGIN("my_mixer", 'M', "1.0", "one-line description", MyMixer::create)
// The name is its YAML section (`model.my_mixer`) and the letter its pattern letter. The building
// blocks of the built-in recurrent mixers (delta rule kernels, short convolution, L2 norm) are in
// hybridlab/mixer_ops.h. See docs/plugins.md, "Writing a mixer plugin".

#include <torch/nn/module.h>
#include <torch/types.h>
#include <torch/version.h>

#include <boost/dll/alias.hpp>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>

#include "hybridlab/config.h"
#include "hybridlab/position.h"

namespace hybridlab {

/// Per-layer decoding state (KV cache, recurrent state + conv cache). Owned by the caller; a
/// mixer's forward() reads and updates it in place.
struct MixerCache {
  virtual ~MixerCache();
  /// Bytes held by the cache's tensors (0 when empty).
  virtual int64_t nbytes() const = 0;
  /// The bytes of the defined tensors among `tensors`: what nbytes() of a cache of tensors sums.
  static int64_t bytes_of(std::initializer_list<const torch::Tensor*> tensors);
};

/// What `model summary` shows about one mixer.
struct MixerInfo {
  /// The position method of the mixer's scores: its positional scheme's name, or a method of the
  /// mixer's own before it ("path" for PaTH attention with NoPE, "path+fox" with FoX); "-" for
  /// mixers without one.
  std::string position = "-";
  uint32_t position_hooks = 0;      ///< PositionHook mask of that scheme
  bool pairwise = false;            ///< computes pairwise (softmax) attention scores
  int64_t state_floats = 0;         ///< fixed-size decoding state per sequence (recurrent + conv)
  int64_t kv_floats_per_token = 0;  ///< growing KV cache per token per sequence
  int64_t kv_max_tokens = 0;        ///< tokens the KV cache keeps at most (window), 0 = all
  double flops_per_token = 0;       ///< forward FLOPs per token at the asked length
  std::string details;              ///< one short line (heads, dims, window, ...)
};

/// Evaluation-time changes to a trained layer, for knock-out analysis (ablation at inference).
/// The defaults change nothing.
struct AttentionAblation {
  bool no_position = false;  ///< drop every hook of the positional scheme: NoPE at this layer
  /// > 0: a sliding window of this many keys, as AttentionOptions::window (causal: query i sees
  /// keys j with 0 <= i-j < window); with a trained window the smaller one applies. 0: the
  /// trained setting.
  int64_t window = 0;
};

/// Observer of attention weights: called once per query block of each forward with probs
/// [B,H,bq,bk] (softmax weights, fp32 for fp32 inputs; rows sum to 1), q_pos [bq] and k_pos [bk]
/// (int64 absolute positions of the block's queries and of the keys its columns belong to).
/// Positions outside the mask have weight 0.
using AttentionProbe = std::function<void(const torch::Tensor& probs, const torch::Tensor& q_pos,
                                          const torch::Tensor& k_pos)>;

/// Observer of a Gated DeltaNet layer's gates: called once per forward with g [B,Hv,T] (log
/// decay, α = exp(g) in (0,1]; eq. 10 of Yang et al. 2025) and beta [B,Hv,T] (writing strength
/// β in (0,1)), both fp32.
using GateProbe = std::function<void(const torch::Tensor& g, const torch::Tensor& beta)>;

/// The analysis observers a mixer may call during forward; each may be empty. A mixer calls those
/// that describe it (attention weights for pairwise mixers, gates for gated recurrent ones).
struct MixerProbes {
  AttentionProbe attention;
  GateProbe gates;
};

/// How a mixer honours the document boundaries of packed training rows (`task.packing:
/// documents`): every document must be modelled as if it were alone, from position 0, with an
/// empty recurrent state and convolution history, attending only inside itself (the `cu_seqlens`
/// semantics of flash-linear-attention's varlen kernels).
enum class DocumentBoundaries : int {
  /// The layer graph cuts the rows at the boundaries and runs each document as its own row of
  /// one batch (zero padding at its end, positions from 0, no cache), then puts the outputs back.
  /// Exact for every causal mixer whose rows do not interact: the default.
  kSeparateRows = 0,
  /// The mixer cannot honour them (it reads later tokens, so the padding would reach it, or its
  /// rows interact); training on packed documents is refused at `task.packing`.
  kUnsupported = 1,
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

  // What analysis (knock-outs, head statistics) asks of any mixer. The defaults describe a mixer
  // without a positional scheme, without recurrent state and without observers.

  /// The positional scheme applied to this mixer's scores; nullptr when it has none.
  virtual const PositionScheme* position_scheme() const { return nullptr; }
  /// Applies `a` to every later forward (AttentionAblation{} restores the trained mixer). Only
  /// mixers with pairwise scores (MixerInfo::pairwise) have a scheme or keys to ablate; the layer
  /// graph refuses a non-empty ablation for the others, whose default ignores it.
  virtual void set_ablation(const AttentionAblation& a) { (void)a; }
  /// Recurrent mixers: the window (tokens) of the state-reset knock-out, after which the state
  /// restarts (the chunk length is the natural one); 0 for mixers without recurrent state.
  virtual int64_t state_reset_window() const { return 0; }
  /// Sets (or, with empty functions, removes) the analysis observers.
  virtual void set_probes(const MixerProbes& probes) { (void)probes; }
  /// The recurrent state `cache` holds, [B,H,...] (per head first); undefined for mixers without
  /// one or before the first token.
  virtual torch::Tensor recurrent_state(const MixerCache& cache) const {
    (void)cache;
    return {};
  }
  /// How this mixer honours document boundaries in packed rows (DocumentBoundaries above).
  virtual DocumentBoundaries document_boundaries() const {
    return DocumentBoundaries::kSeparateRows;
  }
};

/// Whether `mixer`'s outputs depend on positions through something the position knock-out
/// (AttentionAblation::no_position) removes: MixerInfo::position_hooks or its scheme's hooks are
/// not kHookNone, or MixerInfo::position names a method of the mixer's own (anything but "-" and
/// its scheme's name, e.g. PaTH's "path"). ModelSummary::position_share counts these layers, and
/// `hybridlab analyze` plans a position knock-out for those with pairwise scores. Calls
/// mixer.info(1); throws what it throws.
bool carries_position(const Mixer& mixer);

/// Version of the mixer plugin interface. The host refuses a mixer plugin built against another
/// version before it calls anything in it. Bump on any change to Mixer, MixerCache, MixerInfo,
/// MixerProbes, AttentionAblation, MixerContext or MixerPluginInfo.
/// 2: Mixer::document_boundaries (packed documents).
/// 3: MixerPluginInfo::eval_safe_keys. Mixer and its vtable are as in 2, so a record of version 2
///    still loads (its mixer declares no keys that evaluation variants may change).
/// 4: MixerContext::position, appended: a plugin of version 2 or 3 reads the fields before it and
///    still loads.
constexpr int kMixerPluginApiVersion = 4;
/// The oldest mixer plugin API version this host loads.
constexpr int kMixerPluginApiOldest = 2;

/// The kinds of plugin a library can be (MixerPluginInfo::kind; a positional scheme's record is
/// PluginInfo, hybridlab/position.h).
enum PluginKind : int { kPluginKindPosition = 0, kPluginKindMixer = 1 };

/// A positional scheme built for a mixer by PositionService::build.
struct BuiltPosition {
  std::shared_ptr<PositionScheme> scheme;  ///< never null
  /// The model owns the instance (one for every layer with the same settings and head layout,
  /// PositionScheme::shared_across_layers): the mixer must not register it as its own module.
  /// false: the mixer registers it, so that its parameters are the mixer's.
  bool shared = false;
};

/// Builds positional schemes for the mixers of a model: the scheme a `position:` map names, from
/// the plugins on the model's search path, checked against the lengths the model serves, with
/// one instance for the layers that may share it. The layer graph provides it
/// (MixerContext::position); a mixer with pairwise scores uses it for its `position:` key.
class PositionService {
 public:
  virtual ~PositionService();
  /// Builds the scheme of `position` (a `position:` map: `scheme`, default nope, and the scheme's
  /// own keys, which its plugin reads) for scores of the shape `ctx` describes (n_heads,
  /// n_kv_heads, head_dim, causal, layer_index; the lengths are the model's). Throws ConfigError
  /// at the map's keys (a bad key, a scheme that encodes fewer positions than the model serves)
  /// and PluginError (no such plugin, a plugin that fails).
  virtual BuiltPosition build(Section& position, const PositionContext& ctx) = 0;
};

/// What a mixer is told when it is built. Lengths are in tokens.
struct MixerContext {
  int64_t d_model = 0;        ///< model width: the mixer maps [B,T,d_model] to [B,T,d_model]
  int64_t layer_index = 0;    ///< its layer in the layer graph, from 0
  int64_t train_length = 0;   ///< task.seq_len: the length the model is trained at (0 = unknown)
  int64_t max_length = 0;     ///< the longest length the model will see (max of train and eval)
  bool fused_kernels = true;  ///< model.fused_kernels: false asks for the reference tensor forms
  /// Since API 4: builds positional schemes. Set whenever the layer graph builds the mixer; null
  /// when the host first tries a library with default settings: a mixer given null uses no
  /// positional scheme.
  PositionService* position = nullptr;
};

/// The record every mixer plugin exports (through HYBRIDLAB_MIXER_PLUGIN). Plain C data, read by
/// the host in a supervised child before anything else in the plugin runs.
struct MixerPluginInfo {
  int api_version;            ///< kMixerPluginApiVersion the plugin was built with
  int kind;                   ///< kPluginKindMixer
  const char* name;           ///< mixer name: its YAML section under `model:`
  char letter;                ///< its letter in `model.layers` patterns (printable, not a space)
  const char* version;        ///< the plugin's own version
  const char* description;    ///< one line (the paper)
  const char* torch_version;  ///< TORCH_VERSION at build time: must equal the host's
  int cxx11_abi;              ///< _GLIBCXX_USE_CXX11_ABI at build time: must equal the host's
  /// Since API 3 (read only from records that say 3 or later): the keys of the mixer's section
  /// (`model.<name>.KEY`, and a layer override's `KEY`) its trained parameters do not depend on,
  /// comma-separated identifiers, e.g. "chunk_size": an evaluation variant may change them
  /// (docs/experiments.md). A key covers its whole subtree. nullptr or "" for none.
  const char* eval_safe_keys;
};

/// The factory every mixer plugin exports. `params` reads the mixer's keys (its `model.<name>`
/// section, with a layer's overrides applied): use params.get/check for every key; the host then
/// reports unknown keys. Throw ConfigError (or any std::exception) for bad settings.
using MixerFactory = std::shared_ptr<Mixer>(Section& params, const MixerContext& ctx);

}  // namespace hybridlab

#ifndef _GLIBCXX_USE_CXX11_ABI
#define HYBRIDLAB_MIXER_CXX11_ABI_FLAG 0
#else
#define HYBRIDLAB_MIXER_CXX11_ABI_FLAG _GLIBCXX_USE_CXX11_ABI
#endif

/// Declares a mixer plugin: its info record and its factory, exported under fixed aliases.
/// NAME, VERSION and DESCRIPTION are string literals, LETTER a character literal; FACTORY is a
/// function with the MixerFactory signature. Use once per plugin library, at global scope. The
/// mixer declares no evaluation-safe keys (HYBRIDLAB_MIXER_PLUGIN_EVAL_SAFE declares them).
#define HYBRIDLAB_MIXER_PLUGIN(NAME, LETTER, VERSION, DESCRIPTION, FACTORY) \
  HYBRIDLAB_MIXER_PLUGIN_EVAL_SAFE(NAME, LETTER, VERSION, DESCRIPTION, "", FACTORY)

/// HYBRIDLAB_MIXER_PLUGIN with MixerPluginInfo::eval_safe_keys: EVAL_SAFE_KEYS is a string
/// literal of comma-separated keys of the mixer's section, e.g. "chunk_size".
#define HYBRIDLAB_MIXER_PLUGIN_EVAL_SAFE(NAME, LETTER, VERSION, DESCRIPTION, EVAL_SAFE_KEYS,   \
                                         FACTORY)                                              \
  namespace hybridlab_mixer_plugin_exports {                                                   \
  extern const ::hybridlab::MixerPluginInfo mixer_info_record;                                 \
  const ::hybridlab::MixerPluginInfo mixer_info_record = {::hybridlab::kMixerPluginApiVersion, \
                                                          ::hybridlab::kPluginKindMixer,       \
                                                          NAME,                                \
                                                          LETTER,                              \
                                                          VERSION,                             \
                                                          DESCRIPTION,                         \
                                                          TORCH_VERSION,                       \
                                                          HYBRIDLAB_MIXER_CXX11_ABI_FLAG,      \
                                                          EVAL_SAFE_KEYS};                     \
  std::shared_ptr<::hybridlab::Mixer> mixer_factory(::hybridlab::Section& params,              \
                                                    const ::hybridlab::MixerContext& ctx) {    \
    return FACTORY(params, ctx);                                                               \
  }                                                                                            \
  }                                                                                            \
  BOOST_DLL_ALIAS(hybridlab_mixer_plugin_exports::mixer_info_record, hybridlab_mixer_info)     \
  BOOST_DLL_ALIAS(hybridlab_mixer_plugin_exports::mixer_factory, hybridlab_mixer_factory)
