#pragma once
// PaTH attention scores (Yang et al. 2025, "PaTH Attention: Position Encoding via Accumulating
// Householder Transformations", arXiv 2505.16381, §2–3): the logit of query i on key j is
//   s_ij = q_iᵀ H_i H_{i−1} ⋯ H_{j+1} k_j,   H_t = I − β_t w_t w_tᵀ,
// a product of data-dependent Householder-like transforms between the two positions, newest
// outermost and empty for j = i. Computed by chunks of C tokens with the UT representation of
// §3.1: inside a chunk ∏H = I − Wᵀ T⁻¹ W with T⁻¹ = (I + StrictTril(D W Wᵀ))⁻¹ D, D = diag(β), and
// an interval of the chunk is the matching sub-block of T⁻¹ (T⁻¹ is lower triangular), so
//   intra-chunk logits = tril(Q Kᵀ) − tril(Q Wᵀ) T⁻¹ StrictTril(W Kᵀ);
// across chunks the queries carry their chunk's prefix (Q̃ = Q − tril(Q Wᵀ) T⁻¹ W), the keys their
// chunk's suffix (K̃ = K − (T⁻¹ StrictTril(W Kᵀ))ᵀ W), and the query side is multiplied by each
// whole chunk's product on its way back to the key's chunk (the paper's right-to-left scan). No
// [T, T, Dh] tensor exists; each query block costs O(T·C·Dh) and keeps one [bq, T] score block.
// Decoding follows §3.3: a cached key is stored already transformed by every later H (fla
// `prepare_k_cache`), and each new token applies its H to the cache before its own key joins.

#include <torch/types.h>

#include <cstdint>

namespace hybridlab {

/// The per-chunk quantities of one segment of T new tokens (path_prepare), for H heads (kv heads
/// already repeated). T is padded to n_chunks·chunk with w = 0 (H_t = I) and zero q, k.
struct PathChunks {
  int64_t chunk = 0;     ///< C, tokens per chunk
  int64_t length = 0;    ///< T, tokens in the segment
  int64_t n_chunks = 0;  ///< ⌈T / C⌉
  /// [B,H,n_chunks,2C,Dh]: each chunk's keys carried to its end, K̃ (H_{chunk end} ⋯ H_{j+1}
  /// k_j), then its directions W (unit or zero rows): one matmul scores a query block on K̃ and
  /// starts carrying it across W.
  torch::Tensor k_tilde_w;
  torch::Tensor u;  ///< [B,H,n_chunks,C,Dh] T⁻¹ W: qᵀ ∏H = q − (q Wᵀ) U over a whole chunk
  torch::Tensor q_tilde;  ///< [B,H,n_chunks,C,Dh] q_iᵀ H_i ⋯ H_{chunk start}
  torch::Tensor intra;    ///< [B,H,n_chunks,C,C] intra-chunk logits, zero above the diagonal
};

/// The chunk quantities of a segment. q, k, w [B,H,T,Dh] (w rows of unit norm, or zero), beta
/// [B,H,T] (β_t ∈ [0, 2] in the paper: 2σ(·)); all one floating dtype and device. chunk >= 1 is
/// clamped to T. Differentiable. Throws c10::Error on shape or dtype mismatches.
PathChunks path_prepare(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& w,
                        const torch::Tensor& beta, int64_t chunk);

/// Raw (unscaled) PaTH logits of the queries q0..q1−1 of the segment on every key up to q1:
/// [B,H,q1−q0, Tc + q1], the Tc cached keys first. q0 must be a multiple of p.chunk and
/// 0 <= q0 < q1 <= p.length. k_cached [B,H,Tc,Dh] are keys already transformed by every H of the
/// tokens before the segment (path_transform_keys), or undefined (Tc = 0). Entries on keys after
/// a query are left at an arbitrary finite value (the caller masks them). Differentiable.
/// Throws c10::Error on bad ranges or shapes.
torch::Tensor path_block_scores(const PathChunks& p, const torch::Tensor& k_cached, int64_t q0,
                                int64_t q1);

/// The decoding cache after a segment (§3.3, fla `prepare_k_cache`): every key transformed by all
/// later transforms of the segment, key j → H_{T−1} ⋯ H_{j+1} k_j (k_cached: by all of them).
/// k, w [B,Hkv,T,Dh], beta [B,Hkv,T], k_cached [B,Hkv,Tc,Dh] or undefined. Returns
/// [B,Hkv,Tc + T,Dh]. O((Tc + T)·Dh² + T·C·Dh) by a right-to-left product of whole-chunk
/// transforms. Throws c10::Error on shape mismatches.
torch::Tensor path_transform_keys(const torch::Tensor& k_cached, const torch::Tensor& k,
                                  const torch::Tensor& w, const torch::Tensor& beta, int64_t chunk);

}  // namespace hybridlab
