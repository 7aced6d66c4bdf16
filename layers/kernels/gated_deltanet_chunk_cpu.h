#pragma once
// The two halves of the fused CPU chunked gated delta rule that its autograd Function joins
// (gated_deltanet_chunk_cpu.cpp: forward; gated_deltanet_chunk_cpu_backward.cpp: backward).
// Internal to layers/: callers use chunk_gated_delta_rule* (gated_deltanet_kernels.h).
//
// Shapes as in gated_deltanet_kernels.h: q, k [B,Hk,T,K]; v [B,Hv,T,V]; g, beta [B,Hv,T];
// h0 [B,Hv,K,V] or undefined. Any strides; fp32/fp64 CPU tensors, computed in v's dtype.

#include <torch/types.h>

#include <cmath>
#include <cstdint>
#include <limits>

namespace hybridlab::detail {

/// x, or 0 below the smallest normal number: decays that small contribute nothing, and denormal
/// operands slow every later multiply-add many times over.
template <class S>
inline S flush(S x) {
  return x < std::numeric_limits<S>::min() ? S(0) : x;
}

/// The decays of one chunk of n tokens, as running products of the α's (the recurrent form's own
/// products, never ratios): alpha_i = e^{g_i}, b_i = β_i, eg_i = e^{Γ_i} = Π_{s≤i} α_s,
/// to_end_i = e^{Γ_{n−1} − Γ_i} = Π_{s>i} α_s, and D [n,n] (row stride C) with
/// D_ij = e^{Γ_i − Γ_j} = Π_{j<s≤i} α_s for j ≤ i (D_ii = 1); the upper part is not written.
/// g and beta step by sg and sb per token.
template <class S>
inline void chunk_decays(const S* g, int64_t sg, const S* beta, int64_t sb, int64_t n, int64_t C,
                         S* alpha, S* b, S* eg, S* to_end, S* D) {
  for (int64_t i = 0; i < n; ++i) {
    alpha[i] = std::exp(g[i * sg]);
    b[i] = beta[i * sb];
  }
  eg[0] = alpha[0];
  for (int64_t i = 1; i < n; ++i) eg[i] = flush(eg[i - 1] * alpha[i]);
  to_end[n - 1] = 1;
  for (int64_t i = n - 2; i >= 0; --i) to_end[i] = flush(to_end[i + 1] * alpha[i + 1]);
  // Row by row: D_i,: = α_i D_{i−1},: (j < i), D_ii = 1.
  D[0] = 1;
  for (int64_t i = 1; i < n; ++i) {
    const S a = alpha[i];
    const S* prev = D + (i - 1) * C;
    S* Di = D + i * C;
    for (int64_t j = 0; j < i; ++j) Di[j] = flush(a * prev[j]);
    Di[i] = 1;
  }
}

/// What the forward kernel returns, and what it keeps for the backward when asked to.
struct ChunkCpuForward {
  torch::Tensor o;      ///< [B,T,Hv,V] (token-major; callers view it as [B,Hv,T,V])
  torch::Tensor state;  ///< final state [B,Hv,K,V]
  torch::Tensor h_in;   ///< saved: the state entering each chunk [B,Hv,N,K,V], N = ceil(T/C)
  torch::Tensor v_new;  ///< saved: the pseudo-values U − W h of every chunk [B,Hv,T,V]
  /// saved: three [C,C] blocks per chunk [B,Hv,N,3,C,C] (row stride C, n×n used for a last
  /// chunk of n < C tokens): T = (I + A)⁻¹ (upper part zero), P = s (Q Kᵀ) ⊙ D (upper part zero)
  /// and (K Kᵀ) ⊙ D (strictly lower part only), so the backward need not recompute them.
  torch::Tensor blocks;
};

/// Where chunk_gated_delta_forward_cpu keeps each chunk's blocks within ChunkCpuForward::blocks.
enum ChunkBlock : int64_t { kBlockTinv = 0, kBlockP = 1, kBlockGramDecay = 2, kChunkBlocks = 3 };

/// The fused forward (chunk_gated_delta_rule_cpu's kernel) without the autograd checks; with
/// `save`, also h_in, v_new and blocks. chunk_size > 0, shapes already checked.
ChunkCpuForward chunk_gated_delta_forward_cpu(const torch::Tensor& q, const torch::Tensor& k,
                                              const torch::Tensor& v, const torch::Tensor& g,
                                              const torch::Tensor& beta, double scale,
                                              const torch::Tensor& h0, int64_t chunk_size,
                                              bool save);

/// x converted to dtype dt with unit stride in its last dimension (a copy only where needed), as
/// the fused kernels' row pointers require.
torch::Tensor rows_unit_stride(const torch::Tensor& x, torch::ScalarType dt);

/// Gradients of the fused forward, each in its input's shape and dtype; dh0 is undefined when h0
/// was.
struct ChunkCpuGrads {
  torch::Tensor dq, dk, dv, dg, dbeta, dh0;
};

/// The fused chunked backward: one reverse pass over the chunks of each (batch, value head) on
/// cache-resident blocks, from the saved h_in, v_new and blocks. d_o [B,Hv,T,V] (any strides) and
/// d_state [B,Hv,K,V] are the gradients of the outputs (undefined = zero); h0 is read only for
/// its dtype and definedness.
ChunkCpuGrads chunk_gated_delta_backward_cpu(const torch::Tensor& q, const torch::Tensor& k,
                                             const torch::Tensor& v, const torch::Tensor& g,
                                             const torch::Tensor& beta, const torch::Tensor& h0,
                                             double scale, int64_t chunk_size,
                                             const torch::Tensor& h_in, const torch::Tensor& v_new,
                                             const torch::Tensor& blocks, const torch::Tensor& d_o,
                                             const torch::Tensor& d_state);

}  // namespace hybridlab::detail
