#pragma once
// The positional-scheme plugin interface: the SDK a scheme author writes against.
//
// Position can live in three places (the input, the geometry of q·k, the value of the score) plus
// Shaw's learned relative embeddings; these are the first four hooks below. API v2 adds a fifth,
// data_bias: a logit bias computed from the attention layer's input (the Forgetting Transformer's
// cumulative forget gate), with per-key state in the decoding cache; API v3 a sixth,
// content_bias: a term computed from the query and its whole row of logits (CoPE's contextual
// positions, counted by gates over the keys). A scheme implements the ones
// it needs and says so in hooks(); the attention layer calls them and never special-cases a scheme
// by name. Every hook takes explicit integer position tensors, so it works on a tile of a long
// sequence (query blocks), with an offset (shift tests) and on one decoding step with a cache.
//
// A plugin is one shared library that defines a PositionScheme subclass and ends with
//   HYBRIDLAB_POSITION_PLUGIN("my_scheme", "1.0", "one-line description", MyScheme::create)
// See docs/plugins.md for a walk-through.

#include <torch/nn/module.h>
#include <torch/types.h>
#include <torch/version.h>

#include <boost/config.hpp>
#include <boost/dll/alias.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "hybridlab/config.h"

namespace hybridlab {

/// Version of this interface. The host refuses a plugin built against a version outside
/// [kPluginApiOldest, kPluginApiVersion] before it calls anything in it. Bump on any change to
/// PositionScheme, PositionContext or PluginInfo.
///  - 1: the embed, rotate, logit_bias and relative hooks.
///  - 2: the data_bias hook (kHookDataBias, DataBias, PositionScheme::data_bias) and FLOP counts
///    (kHookFlops, PositionScheme::flops_per_token), appended after every v1 virtual so a v1
///    scheme's vtable is a prefix of a v2 one.
///  - 3: the content_bias hook (kHookContentBias, PositionScheme::content_bias): a logit term
///    computed from the query and the row of logits itself (CoPE), appended after every v2
///    virtual so a v1 or v2 scheme's vtable is a prefix of a v3 one.
constexpr int kPluginApiVersion = 3;

/// The oldest plugin API this host loads. A v1 plugin runs unchanged: the host calls only the
/// hooks its hooks() names, and refuses a v1 plugin that names a hook v1 did not have.
constexpr int kPluginApiOldest = 1;

/// The hooks a scheme can implement (bit flags for PositionScheme::hooks()).
enum PositionHook : uint32_t {
  kHookNone = 0,
  kHookEmbed = 1u << 0,      ///< adds to / transforms token embeddings (sinusoidal, learned)
  kHookRotate = 1u << 1,     ///< rotates q and k inside attention (RoPE family)
  kHookLogitBias = 1u << 2,  ///< adds a [H,Tq,Tk] bias to the logits before softmax (ALiBi, T5)
  kHookRelative = 1u << 3,   ///< Shaw-style relative key (and value) embeddings
  kHookDataBias = 1u << 4,   ///< (API v2) a logit bias from the layer input x (FoX's forget gate)
  kHookFlops = 1u << 5,      ///< (API v2) reports its own FLOPs (flops_per_token) to model summary
  kHookContentBias = 1u << 6,  ///< (API v3) a logit term from q and the logits themselves (CoPE)
};

/// "embed,rotate,..." for a hook mask ("none" for 0).
std::string hook_names(uint32_t hooks);

/// The hooks a plugin built against plugin API `api_version` may declare (0 for a version this
/// host does not load).
uint32_t known_hooks(int api_version);

/// What the data_bias hook returns: a logit bias separable per head as
///   bias[b,h,i,j] = query[b,h,i] + key[b,h,j],
/// added to the scaled logits of query i and key j (after the mask is known, before the softmax).
/// That is the form of the Forgetting Transformer's D_ij = c_i − c_j (Lin et al., ICLR 2025,
/// eq. 4 and §3.1): the attention kernels then read two vectors per head and never a [T,T] bias,
/// and the decoding cache keeps one number per key and head.
struct DataBias {
  torch::Tensor query;  ///< [B,H,T]: the term of each query (position i of this call)
  torch::Tensor key;    ///< [B,H,T]: the term of each key (position j of this call)
  /// The scheme's decoding state after this call's tokens (FoX: the running c_T per head,
  /// [B,H]), handed back to the next call on the same sequence; undefined when it keeps none.
  torch::Tensor state;
};

/// What a scheme is told when it is built. Lengths are in tokens.
struct PositionContext {
  int64_t d_model = 0;       ///< model width (the embed hook acts on [B,T,d_model])
  int64_t n_heads = 0;       ///< query heads of the attention layer (0 for a model-level scheme)
  int64_t n_kv_heads = 0;    ///< key/value heads (grouped-query attention)
  int64_t head_dim = 0;      ///< channels per head
  bool causal = true;        ///< whether the attention it serves is causal
  int64_t train_length = 0;  ///< task.seq_len: the length the model is trained at (0 = unknown)
  int64_t max_length = 0;    ///< the longest length the model will see (max of train and eval)
  int64_t layer_index = -1;  ///< the attention layer it serves; -1 for the model-level input scheme
};

/// A named table a scheme exposes for `hybridlab inspect position`: written as CSV with a header
/// row and, for 2-D tables, plotted as a heatmap.
struct PositionTable {
  std::string name;                  ///< file stem, e.g. "pe", "bias_head0", "inv_freq"
  std::string description;           ///< one line for the plot title
  torch::Tensor values;              ///< 1-D or 2-D, float
  std::vector<std::string> columns;  ///< header names (empty: "c0,c1,...")
  std::string row_label = "row";     ///< axis label of the first dimension
  std::string column_label = "column";
};

/// The inspect table of one head's logit bias: named "bias_head<head>", `values` [Tq,Tk] (rows:
/// query positions, columns: key positions), `description` the plot title.
inline PositionTable head_bias_table(int64_t head, torch::Tensor values, std::string description) {
  PositionTable t;
  t.name = "bias_head" + std::to_string(head);
  t.description = std::move(description);
  t.values = std::move(values);
  t.row_label = "query position i";
  t.column_label = "key position j";
  return t;
}

/// Base class of every positional scheme. A scheme is a torch::nn::Module so that learned schemes
/// train and their parameters go into checkpoints; register parameters and buffers in the
/// constructor. The default implementation of each hook throws std::logic_error: the attention
/// layer only calls the hooks that hooks() names.
class PositionScheme : public torch::nn::Module {
 public:
  PositionScheme() = default;
  ~PositionScheme() override;  // out of line: the key function, so typeinfo lives in the core

  /// The scheme's registered name (the name in YAML `position: {scheme: NAME}`).
  virtual std::string name() const = 0;

  /// Bit mask of PositionHook values this scheme implements.
  virtual uint32_t hooks() const = 0;

  /// The longest sequence the scheme can encode, 0 if unbounded (e.g. a learned table's size
  /// when it does not clamp). The framework refuses eval lengths past it at config time.
  virtual int64_t max_length() const { return 0; }

  /// True when one instance should serve every attention layer with the same settings (T5's
  /// relative bias is shared across layers). The layer graph then builds it once.
  virtual bool shared_across_layers() const { return false; }

  /// embed hook. x: token embeddings [B,T,D]; pos: positions [T] (int64). Returns [B,T,D].
  virtual torch::Tensor embed(const torch::Tensor& x, const torch::Tensor& pos);

  /// rotate hook. q [B,H,Tq,Dh], k [B,Hkv,Tk,Dh], q_pos [Tq], k_pos [Tk] (int64).
  /// Returns the rotated (q, k), same shapes. Called once per attention call with all keys.
  virtual std::pair<torch::Tensor, torch::Tensor> rotate(const torch::Tensor& q,
                                                         const torch::Tensor& k,
                                                         const torch::Tensor& q_pos,
                                                         const torch::Tensor& k_pos);

  /// logit_bias hook. q_pos [Tq], k_pos [Tk] (int64). Returns [H,Tq,Tk] (float), added to
  /// q·kᵀ/√Dh before the mask and softmax. May be called per query block.
  virtual torch::Tensor logit_bias(const torch::Tensor& q_pos, const torch::Tensor& k_pos);

  /// relative hook, key side (Shaw et al. 2018, eq. 4). q [B,H,Tq,Dh]. Returns [B,H,Tq,Tk]:
  /// q_i·a_ij^K, added to q·kᵀ before the 1/√Dh scaling.
  virtual torch::Tensor relative_logits(const torch::Tensor& q, const torch::Tensor& q_pos,
                                        const torch::Tensor& k_pos);

  /// relative hook, value side (Shaw et al. 2018, eq. 3). probs: attention weights
  /// [B,H,Tq,Tk]. Returns [B,H,Tq,Dh]: Σ_j p_ij a_ij^V, added to the attention output; an
  /// undefined tensor if the scheme has no value table.
  virtual torch::Tensor relative_values(const torch::Tensor& probs, const torch::Tensor& q_pos,
                                        const torch::Tensor& k_pos);

  /// Tables for `hybridlab inspect position` at sequence length `length` (PE matrix, bias per
  /// head, inverse frequencies, bucket indices, ...: whichever the scheme has).
  virtual std::vector<PositionTable> inspect(int64_t length);

  // ---- API v2 (append new virtuals below this line only: v1 plugins' vtables end above it).

  /// data_bias hook (API v2). x: the attention layer's input [B,T,d_model] (after the block's
  /// pre-norm; differentiable: parameters the scheme applies to it train with the model); pos [T]
  /// int64, the positions of these tokens; state: the DataBias::state this hook returned for the
  /// earlier tokens of the same sequences when decoding with a cache, undefined otherwise (a whole
  /// sequence, or the first call of a prefill). Returns query and key terms [B,H,T] (H = the
  /// context's n_heads) in x's dtype or float32, on x's device: the bias of query i and key j is
  /// query_i + key_j, so the kernels never build a [T,T] tensor. The attention layer caches each
  /// key's term beside its key, so a decoding step's bias against key j is the term returned when
  /// key j was new (per-key state). Called once per attention call.
  virtual DataBias data_bias(const torch::Tensor& x, const torch::Tensor& pos,
                             const torch::Tensor& state);

  /// (API v2, with kHookFlops in hooks()) The forward FLOPs per token this scheme adds to the
  /// attention layer it serves at sequence length `length`, where a query attends to `keys` keys
  /// on average (per-pair work: a bias per key and head). Counted by `model summary` into the
  /// layer's FLOPs. Returns a finite number >= 0; the default returns 0.
  virtual double flops_per_token(int64_t length, double keys) const;

  // ---- API v3 (append new virtuals below this line only: v2 plugins' vtables end above it).

  /// content_bias hook (API v3): a logit term that reads the content of every visible key
  /// through the logits (Golovneva et al. 2024, CoPE, eq. 3–5). q [B,H,Tq,Dh] (after rotate);
  /// logits [B,H,Tq,Tk], q·kᵀ before the 1/√Dh scaling (+ the relative hook's term); q_pos [Tq],
  /// k_pos [Tk] int64; visible [Tq,Tk] bool (false for keys the query may not see: causal mask,
  /// window) or undefined when every pair is visible. Returns [B,H,Tq,Tk] in logits' dtype, on its
  /// device, added to the logits before the scaling (where CoPE's reference adds it); entries at
  /// invisible pairs are ignored. Called per query block of the dense path with every key a
  /// query sees in the block's row, so a term that needs the whole row (CoPE's counts) is exact;
  /// attention takes no tiled or fused path for such a scheme. Differentiable: parameters the
  /// scheme applies train with the model, and gradients flow into q and logits.
  virtual torch::Tensor content_bias(const torch::Tensor& q, const torch::Tensor& logits,
                                     const torch::Tensor& q_pos, const torch::Tensor& k_pos,
                                     const torch::Tensor& visible);
};

/// The record every plugin exports (through HYBRIDLAB_POSITION_PLUGIN). Plain C data, read by the
/// host before anything else in the plugin runs.
struct PluginInfo {
  int api_version;            ///< kPluginApiVersion the plugin was built with
  const char* name;           ///< scheme name
  const char* version;        ///< the plugin's own version
  const char* description;    ///< one line
  const char* torch_version;  ///< TORCH_VERSION at build time: must equal the host's
  int cxx11_abi;              ///< _GLIBCXX_USE_CXX11_ABI at build time: must equal the host's
};

/// The factory every plugin exports. `params` reads the scheme's own keys (everything beside
/// `scheme:` in the YAML `position:` map): use params.get/check for every key; the host then
/// reports unknown keys. Throw ConfigError (or any std::exception) for bad settings.
using PositionFactory = std::shared_ptr<PositionScheme>(Section& params,
                                                        const PositionContext& ctx);

/// Returns the PluginInfo a host of this build expects (api version, torch version, ABI flag).
PluginInfo host_plugin_info();

}  // namespace hybridlab

#ifndef _GLIBCXX_USE_CXX11_ABI
#define HYBRIDLAB_CXX11_ABI_FLAG 0
#else
#define HYBRIDLAB_CXX11_ABI_FLAG _GLIBCXX_USE_CXX11_ABI
#endif

/// Declares a plugin: its info record and its factory, exported under fixed aliases.
/// NAME, VERSION and DESCRIPTION are string literals; FACTORY is a function with the
/// PositionFactory signature. Use once per plugin library, at global namespace scope.
#define HYBRIDLAB_POSITION_PLUGIN(NAME, VERSION, DESCRIPTION, FACTORY)                 \
  namespace hybridlab_plugin_exports {                                                 \
  extern const ::hybridlab::PluginInfo plugin_info_record;                             \
  const ::hybridlab::PluginInfo plugin_info_record = {                                 \
      ::hybridlab::kPluginApiVersion, NAME, VERSION, DESCRIPTION, TORCH_VERSION,       \
      HYBRIDLAB_CXX11_ABI_FLAG};                                                       \
  std::shared_ptr<::hybridlab::PositionScheme> position_factory(                       \
      ::hybridlab::Section& params, const ::hybridlab::PositionContext& ctx) {         \
    return FACTORY(params, ctx);                                                       \
  }                                                                                    \
  }                                                                                    \
  BOOST_DLL_ALIAS(hybridlab_plugin_exports::plugin_info_record, hybridlab_plugin_info) \
  BOOST_DLL_ALIAS(hybridlab_plugin_exports::position_factory, hybridlab_position_factory)
