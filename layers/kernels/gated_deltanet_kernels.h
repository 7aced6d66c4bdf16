#pragma once
// The gated delta rule kernels of Gated DeltaNet (Yang, Kautz & Hatamizadeh, ICLR 2025, eq. 8–12),
// in fla's layout: the state h = Sᵀ is [B, H, d_k, d_v] (key-by-value; the paper's S is its
// transpose). Per head and token:
//   h ← e^{g_t} h;  u = β_t (v_t − hᵀ k_t);  h ← h + k_t uᵀ;  o_t = hᵀ (s·q_t)
// (decay before the error term, read-out after the update: fla `naive_recurrent_gated_delta_rule`,
// HF `torch_recurrent_gated_delta_rule`).
//
// Shapes: q, k [B,Hk,T,d_k]; v [B,Hv,T,d_v] with Hv a multiple of Hk (value head j reads key head
// j / (Hv/Hk), as fla's `i_h // (HV // H)`); g (log decay, ≤ 0) and beta [B,Hv,T]; h0
// [B,Hv,d_k,d_v] or undefined (zeros). The kernels compute in fp32 (fp64 for fp64 inputs) and
// return o in the dtype of v and the final state in the compute dtype. All but
// chunk_gated_delta_rule_cpu are differentiable (autograd).

#include <torch/types.h>

#include <cstdint>

#include "hybridlab/mixer_ops.h"

namespace hybridlab {

/// Sizes read off the kernel inputs.
struct GatedDeltaShapes {
  int64_t B, Hk, Hv, T, K, V;  ///< batch, key heads, value heads, tokens, d_k, d_v
};

/// Checks q, k [B,Hk,T,K], v [B,Hv,T,V] (Hv a multiple of Hk), g, beta [B,Hv,T] and h0 [B,Hv,K,V]
/// (or undefined) against each other. `who` prefixes the message. Throws c10::Error on a mismatch.
GatedDeltaShapes check_gated_delta_shapes(const char* who, const torch::Tensor& q,
                                          const torch::Tensor& k, const torch::Tensor& v,
                                          const torch::Tensor& g, const torch::Tensor& beta,
                                          const torch::Tensor& h0);

/// The chunked form in LibTorch ops, differentiable by autograd, on any device (the training
/// path): chunk-local cumulative log decay Γ, the strictly-lower gated Gram matrix
/// A_ij = β_i k_i·k_j e^{Γ_i−Γ_j} (masked by index before exp, with Mamba2's stable segment sums),
/// T = (I+A)⁻¹ by one unit-triangular solve, W = T·diag(β e^Γ)K and U = T·diag(β)V, then one
/// sequential pass over chunks (not tokens) and batched read-outs. T is zero-padded to a multiple
/// of chunk_size with g = k = v = β = 0, which is exactly neutral. Throws c10::Error on bad shapes
/// or chunk_size <= 0.
GatedDeltaResult chunk_gated_delta_rule_torch(const torch::Tensor& q, const torch::Tensor& k,
                                              const torch::Tensor& v, const torch::Tensor& g,
                                              const torch::Tensor& beta, double scale,
                                              const torch::Tensor& h0 = {},
                                              int64_t chunk_size = 64);

/// The chunked form, forward only, computed head by head on raw CPU buffers with direct BLAS calls
/// (layers/kernels/cpu_blas.h) and heads spread over the intra-op threads: each chunk's blocks stay
/// in cache and LibTorch's per-op cost (dispatch, allocation, one BLAS call per batch entry) is
/// gone. Decays inside a chunk are running products of the α's (the recurrent form's own
/// products); values below the smallest normal number are flushed to 0. Same arguments and result
/// as chunk_gated_delta_rule. Throws c10::Error for non-CPU tensors, for inputs that require
/// grad while grad mode is on, and on bad shapes.
GatedDeltaResult chunk_gated_delta_rule_cpu(const torch::Tensor& q, const torch::Tensor& k,
                                            const torch::Tensor& v, const torch::Tensor& g,
                                            const torch::Tensor& beta, double scale,
                                            const torch::Tensor& h0 = {}, int64_t chunk_size = 64);

/// The chunked form for training on the CPU: a torch::autograd::Function whose forward is
/// chunk_gated_delta_rule_cpu's kernel, keeping the state entering each chunk ([B,Hv,T/C,K,V]),
/// the pseudo-values v_new = U − W h ([B,Hv,T,V]) and each chunk's T = (I+A)⁻¹, P = s(QKᵀ)⊙D
/// and (KKᵀ)⊙D ([B,Hv,T/C,3,C,C]), and whose backward is one reverse pass over
/// the chunks of each (batch, value head) on the same cache-resident blocks and CBLAS calls: dh
/// flows back chunk by chunk, and each chunk's gradients of q, k, v, g, β (and finally h0) come
/// through the WY/UT representation (derivation at the top of
/// gated_deltanet_chunk_cpu_backward.cpp; fla-org/flash-linear-attention@bc3b101d
/// chunk_delta_h.py, chunk_o.py, wy_fast.py compute the same on GPU). The log-decay gradient is
/// summed per token without cancellation, so it stays accurate under strong decay. dq and dk of a
/// key head sum the contributions of its Hv/Hk value heads. Gradients flow into o and the final
/// state. Heads × batch run in parallel over the intra-op threads, BLAS single-threaded inside.
/// Once differentiable (backward with create_graph throws). Same arguments and result as
/// chunk_gated_delta_rule. Throws c10::Error for non-CPU or non-fp32/fp64 tensors, bad shapes or
/// chunk_size <= 0.
GatedDeltaResult chunk_gated_delta_rule_fused(const torch::Tensor& q, const torch::Tensor& k,
                                              const torch::Tensor& v, const torch::Tensor& g,
                                              const torch::Tensor& beta, double scale,
                                              const torch::Tensor& h0 = {},
                                              int64_t chunk_size = 64);

/// Lowest log decay the gate returns (α = e^g is exactly 0 below it in fp32 and fp64 alike).
constexpr double kMinLogDecay = -1e4;

// gated_delta_gate (hybridlab/mixer_ops.h) floors g at kMinLogDecay.

}  // namespace hybridlab
