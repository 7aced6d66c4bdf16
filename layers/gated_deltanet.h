#pragma once
// The Gated DeltaNet token mixer (Yang, Kautz & Hatamizadeh, ICLR 2025, §3.4 and Fig. 1; fla
// `fla/layers/gated_deltanet.py`): q/k/v projections, causal depthwise short convolutions with
// SiLU, L2-normalised q and k (eps inside the sqrt), q scaled by d_k^-1/2, β = sigmoid(W_β x),
// g = −exp(A_log)·softplus(W_a x + dt_bias) in fp32, the gated delta rule (chunked for whole
// sequences, recurrent for one-token decoding steps), a per-value-head RMSNorm gated by
// SiLU(W_g x), and the output projection. No biases.

#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "hybridlab/mixer.h"
#include "hybridlab/recurrent_mixer.h"
#include "layers/norm.h"

namespace hybridlab {

/// The `model.gated_deltanet` section (and per-layer overrides of it).
struct GatedDeltaNetOptions {
  int64_t n_heads = 4;    ///< key (and query) heads
  int64_t n_v_heads = 0;  ///< value heads (GVA); 0 = n_heads. A multiple of n_heads.
  int64_t head_dim = 0;   ///< key head dim d_k; 0 = d_model / n_heads
  double expand_v = 2.0;  ///< d_v = head_dim · expand_v (fla default 2)
  int64_t conv_size = 4;  ///< short convolution kernel size (>= 1)
  bool use_short_conv = true;
  int64_t chunk_size = 64;     ///< chunk length of the chunkwise-parallel kernel
  std::string mode = "chunk";  ///< kernel for whole sequences: "chunk" or "recurrent" (oracle)
  double norm_eps = 1e-5;      ///< eps of the gated output RMSNorm (fla, NVlabs)
  /// Fused CPU kernels for the chunked rule (chunk_gated_delta_rule's `fused`, forward and
  /// backward) and the gated output norm in training; false runs the LibTorch tensor form
  /// everywhere, the reference path. Set from model.fused_kernels when the model is built (not a
  /// key of `model.gated_deltanet`).
  bool fused_kernels = true;
  /// β = 2·σ(·) ∈ (0, 2) instead of σ(·): the transition α(I − βkkᵀ) then has eigenvalue
  /// α(1 − β) ∈ (−α, α) along k, so the layer can flip a sign per token (parity, modular counting;
  /// Grazzi et al. 2025, arXiv 2411.12537, §4.2; fla's `allow_neg_eigval`). The chunked algorithm
  /// is unchanged (its (I + StrictTril(diag(β)KKᵀ))⁻¹ keeps a unit diagonal).
  bool allow_neg_eigval = false;
};

/// Decoding state of one layer: the last conv_size−1 inputs of each short convolution and the
/// recurrent state [B,Hv,d_k,d_v] (fp32).
struct GatedDeltaNetCache : MixerCache {
  torch::Tensor conv_q, conv_k, conv_v;  ///< [B,conv_size−1,C], undefined when empty
  torch::Tensor state;                   ///< [B,Hv,d_k,d_v], undefined when empty
  int64_t nbytes() const override;
};

class GatedDeltaNet : public RecurrentMixer<GatedDeltaNetCache> {
 public:
  /// Parameters are initialised as in fla/NVlabs: A_log = log U(0,16) (clamped away from 0),
  /// dt_bias = softplus⁻¹(dt) with dt = exp(U(log 1e-3, log 0.1)) clamped ≥ 1e-4.
  GatedDeltaNet(const GatedDeltaNetOptions& opts, int64_t d_model);

  /// x [B,T,d_model] → [B,T,d_model]; positions are unused (the recurrence orders the tokens).
  /// With a cache: continues from its state and updates it (one-token calls use the recurrent
  /// kernel, longer ones the chunked kernel).
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& positions,
                        MixerCache* cache) override;
  std::unique_ptr<MixerCache> make_cache() const override;
  MixerInfo info(int64_t length) const override;

  /// Sets (or, with an empty function, removes) the observer of the gates (set_probes with only
  /// `gates`). The state-reset window is the chunk length; the recurrent state is the cache's
  /// state [B,Hv,d_k,d_v] (RecurrentMixer).
  void set_probe(GateProbe probe) {
    MixerProbes p;
    p.gates = std::move(probe);
    set_probes(p);
  }

  const GatedDeltaNetOptions& options() const { return opts_; }
  int64_t key_dim() const { return head_dim_; }
  int64_t value_dim() const { return v_dim_; }

  torch::nn::Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, a_proj{nullptr},
      b_proj{nullptr}, g_proj{nullptr}, o_proj{nullptr};
  torch::Tensor q_conv, k_conv, v_conv;  ///< depthwise conv weights [C,1,conv_size]
  torch::Tensor A_log, dt_bias;          ///< [n_v_heads]
  std::shared_ptr<GatedRMSNorm> o_norm;

 private:
  GatedDeltaNetOptions opts_;
  int64_t d_model_, n_heads_, n_v_heads_, head_dim_, v_dim_;
};

}  // namespace hybridlab
