#pragma once
// The token-mixer interface every layer of the layer graph implements: a module from [B,T,D] to
// [B,T,D] with explicit positions, its decoding cache and its summary figures. The layer graph
// (framework/src/model) builds mixers through its registry; the layers here know nothing of it.

#include <torch/nn/module.h>
#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "hybridlab/position.h"

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
};

}  // namespace hybridlab
