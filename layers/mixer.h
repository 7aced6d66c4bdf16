#pragma once
// The token-mixer interface every layer of the layer graph implements: a module from [B,T,D] to
// [B,T,D] with explicit positions, its decoding cache and its summary figures. The layer graph
// (framework/src/model) builds mixers through its registry; the layers here know nothing of it.

#include <torch/nn/module.h>
#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <string>

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

}  // namespace hybridlab
