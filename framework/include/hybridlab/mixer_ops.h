#pragma once
// Building blocks of the built-in recurrent mixers, exported for mixer plugins (hybridlab/mixer.h):
// the delta rule in its recurrent (decoding, oracle) and chunked (training) forms, the causal short
// convolution with its decoding cache, and the L2 norm of q and k. Each is the code the built-in
// Gated DeltaNet runs (layers/), so a plugin mixer gets the fused CPU kernels and their tests.
//
// The delta rule with decay (Gated DeltaNet: Yang, Kautz & Hatamizadeh, ICLR 2025, eq. 8–12), in
// fla's layout: the state h = Sᵀ is [B, H, d_k, d_v] (key-by-value; the paper's S is its
// transpose). Per head and token:
//   h ← e^{g_t} h;  u = β_t (v_t − hᵀ k_t);  h ← h + k_t uᵀ;  o_t = hᵀ (s·q_t)
// g ≡ 0 is DeltaNet's rule (Yang et al., NeurIPS 2024, eq. 1 in [K,V] layout).
// Shapes: q, k [B,Hk,T,d_k]; v [B,Hv,T,d_v] with Hv a multiple of Hk (value head j reads key head
// j / (Hv/Hk)); g (log decay, ≤ 0) and beta [B,Hv,T]; h0 [B,Hv,d_k,d_v] or undefined (zeros). The
// kernels compute in fp32 (fp64 for fp64 inputs) and return o in the dtype of v and the final
// state in the compute dtype; both are differentiable (autograd).

#include <torch/types.h>

#include <cstdint>

namespace hybridlab {

/// What a delta-rule kernel returns.
struct GatedDeltaResult {
  torch::Tensor o;      ///< [B,Hv,T,d_v]
  torch::Tensor state;  ///< final state [B,Hv,d_k,d_v]
};

/// Recurrent form: one step per token. The decoding path and the test oracle.
/// scale: multiplies q (the reference codebases use d_k^-1/2). Throws c10::Error on bad shapes.
GatedDeltaResult recurrent_gated_delta_rule(const torch::Tensor& q, const torch::Tensor& k,
                                            const torch::Tensor& v, const torch::Tensor& g,
                                            const torch::Tensor& beta, double scale,
                                            const torch::Tensor& h0 = {});

/// Chunkwise-parallel form (WY/UT transform; fla `chunk_gated_delta_rule`, reference notes §2.1),
/// the entry point mixers call. For fp32/fp64 CPU tensors with `fused` set it runs the fused
/// kernels: chunk_gated_delta_rule_cpu (forward only) when no gradient is needed,
/// chunk_gated_delta_rule_fused (fused forward and backward) when one is. Otherwise (other
/// devices or dtypes, or fused = false: the reference path) chunk_gated_delta_rule_torch,
/// differentiated by autograd. Same results to rounding. chunk_size > 0.
GatedDeltaResult chunk_gated_delta_rule(const torch::Tensor& q, const torch::Tensor& k,
                                        const torch::Tensor& v, const torch::Tensor& g,
                                        const torch::Tensor& beta, double scale,
                                        const torch::Tensor& h0 = {}, int64_t chunk_size = 64,
                                        bool fused = true);

/// The state-space duality scan of Mamba2 (Dao & Gu, ICML 2024, §6; `ssd_minimal.py` of
/// state-spaces/mamba): per head, a scalar log decay a_t ≤ 0 and no delta correction,
///   h ← e^{a_t} h + k_t v_tᵀ;  o_t = hᵀ q_t
/// which is Mamba2's h_t = exp(Δ_t A) h_{t−1} + Δ_t x_t B_tᵀ, y_t = h_t C_t with q = C, k = B,
/// v = Δ·x and a = Δ·A, in the [K,V] layout of the delta-rule kernels (h is [N,P] here). No scale,
/// no D skip (the layer adds D·x). Shapes: q, k [B,G,T,N] (G groups shared by heads like GQA
/// keys: head j reads group j / (H/G)); v [B,H,T,P]; a [B,H,T]; h0 [B,H,N,P] or undefined
/// (zeros). Computes in fp32 (fp64 for fp64 v), returns o [B,H,T,P] in v's dtype and the final
/// state in the compute dtype; differentiable (LibTorch ops, autograd). Throws c10::Error on bad
/// shapes.
/// The recurrent form: one step per token; decoding and the oracle.
GatedDeltaResult recurrent_ssd(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const torch::Tensor& a,
                               const torch::Tensor& h0 = {});

/// The chunked form of the same scan (SSD, Listing 1 of the paper): inside a chunk the quadratic
/// form with the decay e^{Λ_i − Λ_j} masked by index before the exponential (Λ the inclusive
/// cumulative sum of a in the chunk, so every exponent is ≤ 0), chunk states and a scan over the
/// chunks; memory O(T·chunk_size) per head. Equal to recurrent_ssd to rounding. Throws c10::Error
/// on bad shapes or chunk_size ≤ 0.
GatedDeltaResult chunk_ssd(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                           const torch::Tensor& a, const torch::Tensor& h0 = {},
                           int64_t chunk_size = 64);

/// Kimi Delta Attention's rule (Kimi Linear, arXiv 2510.26692, eq. 1): the delta rule with a
/// decay per key channel, in the same [K,V] layout (fla `naive_recurrent_kda`):
///   h ← Diag(e^{g_t}) h;  u = β_t (v_t − hᵀ k_t);  h ← h + k_t uᵀ;  o_t = hᵀ (s·q_t)
/// Shapes: q, k [B,H,T,d_k]; v [B,H,T,d_v]; g [B,H,T,d_k] (log decay per channel, ≤ 0); beta
/// [B,H,T]; h0 [B,H,d_k,d_v] or undefined. g equal across channels is Gated DeltaNet's rule, g ≡ 0
/// DeltaNet's. Computes in fp32 (fp64 for fp64 v); o in v's dtype, the state in the compute
/// dtype; differentiable. Throws c10::Error on bad shapes.
/// The recurrent form: one step per token; decoding and the oracle.
GatedDeltaResult recurrent_kda(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const torch::Tensor& g,
                               const torch::Tensor& beta, double scale,
                               const torch::Tensor& h0 = {});

/// The chunked form (the report's §3.1 eqs. 2–9 and App. C; fla `naive_chunk_kda`): inside a
/// chunk, with G the inclusive cumulative sum of g, A_kk[i,j] = β_i Σ_c k_i k_j e^{G_i − G_j}
/// (i > j) and A_qk[i,j] = s Σ_c q_i k_j e^{G_i − G_j} (i ≥ j) are computed pairwise per channel
/// with the exponent masked by index first (every exponent ≤ 0: no division by a cumulative
/// decay, stable for any gate); the WY/UT transform (I + A_kk)⁻¹ by a unit-triangular solve; then
/// the chunks in order: V' = U − W h, O = (s Q ⊙ e^G) h + A_qk V', h ← Diag(e^{G_last}) h +
/// (K ⊙ e^{G_last − G})ᵀ V'. Memory O(T · chunk_size · d_k) per head (the pairwise decay), so the
/// chunk is small (16). Equal to recurrent_kda to rounding. Throws c10::Error on bad shapes or
/// chunk_size ≤ 0.
GatedDeltaResult chunk_kda(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                           const torch::Tensor& g, const torch::Tensor& beta, double scale,
                           const torch::Tensor& h0 = {}, int64_t chunk_size = 16);

/// Gated DeltaNet's decay gate (eq. 10 of Yang et al. 2025; Mamba2's parameterisation):
/// g = −exp(A_log)·softplus(a + dt_bias), computed in fp32 (fp64 for fp64 a). exp(A_log) is
/// clamped to the fp32 maximum, softplus takes its linear branch above 20 and g is floored at
/// −1e4 (α = e^g is exactly 0 there), so g is finite and ≤ 0 for any input. a [..., H] (the
/// projection W_a x), A_log and dt_bias [H]; returns [..., H].
torch::Tensor gated_delta_gate(const torch::Tensor& a, const torch::Tensor& A_log,
                               const torch::Tensor& dt_bias);

/// What short_conv returns.
struct ShortConvResult {
  torch::Tensor y;      ///< [B,T,C], after SiLU
  torch::Tensor cache;  ///< the last K−1 inputs [B,K−1,C] (zeros where the sequence is shorter)
};

/// Causal depthwise convolution with kernel K and SiLU (fla `ShortConvolution`): x [B,T,C],
/// weight [C,1,K], cache [B,K−1,C] (the previous inputs; undefined = zero left padding). On
/// fp32/fp64 CPU tensors: when no gradient is needed, one fused pass computes the K taps (no
/// concatenated copy) and SiLU runs in place; when gradients are needed and `fused` is true, a
/// torch::autograd::Function runs the same taps forward and one fused pass per sequence backward
/// (gradients of x, cache and weight). Otherwise (other devices, or fused false: the reference)
/// K shifted multiply-adds in LibTorch ops. `keep_cache` false leaves the result's cache
/// undefined (training: nothing decodes after it), which saves a copy and its autograd node.
/// Throws c10::Error on shapes other than these.
ShortConvResult short_conv(const torch::Tensor& x, const torch::Tensor& weight,
                           const torch::Tensor& cache = {}, bool fused = false,
                           bool keep_cache = true);

/// RMSNorm over the last dim (Zhang & Sennrich 2019): x · rsqrt(mean(x²) + eps) · weight, computed
/// in fp32 at least (fp64 for fp64 x) and returned in x's dtype. x [..., D], weight [D]: the
/// per-head output norm of the delta-rule mixers (fla `RMSNorm(head_v_dim)`). Differentiable.
torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps);

/// short_conv for a layer whose decoding tail is a field of its cache: returns SiLU(ShortConv(x))
/// [B,T,C]; with `tail` non-null ([B,K−1,C] or undefined when empty) the convolution continues
/// from *tail and the new tail is written back to it; null: a whole sequence (no tail kept).
torch::Tensor short_conv_with_tail(const torch::Tensor& x, const torch::Tensor& weight,
                                   torch::Tensor* tail, bool fused);

/// x / sqrt(Σx² over the last dim + eps), eps inside the square root (fla `l2norm`, eps 1e-6), so a
/// zero vector maps to zero with finite gradients. x [..., D] → [..., D]. With fused true and
/// fp32/fp64 CPU tensors that need gradients, runs as rms_norm_fused_cpu (the same map: eps / D
/// inside the mean, weight D^{-1/2}; layers/norm.h); otherwise as LibTorch ops, the reference.
torch::Tensor l2_normalize(const torch::Tensor& x, double eps = 1e-6, bool fused = false);

}  // namespace hybridlab
