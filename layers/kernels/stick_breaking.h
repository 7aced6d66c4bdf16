#pragma once
// Stick-breaking attention weights (Tan et al. 2024, "Scaling Stick-Breaking Attention", arXiv
// 2410.17980, §2 eq. 1–2): each key before the query breaks off a share β = σ(z) of what the keys
// nearer the query left, and the query's own key takes the leftover (as
// shawntan/stickbreaking-attention@3147a38's tests/test_attn.py adds `rem · v`). Computed in log
// space (log β = z − softplus(z), log(1 − β) = −softplus(z)) with the sums running from the query
// backwards, as the paper's kernel accumulates them, so no product of many factors underflows and
// no difference of two long sums cancels.

#include <torch/types.h>

namespace hybridlab {

/// The weights of one block of queries. z [...,bq,bk]: the scaled logits with every bias added,
/// fp32 or fp64 (the sums run in its dtype); q_pos [bq] and k_pos [bk] int64, each query's own
/// position among k_pos; visible [bq,bk] bool (visible_pairs) or undefined (all visible). Returns
/// [...,bq,bk] in z's dtype, summing to 1 per query:
///   A_ij = β_ij ∏_{j<k<i} (1 − β_ik)  on visible keys with k_pos_j < q_pos_i,
///   A_ii = ∏_{k<i} (1 − β_ik)          on the key at the query's own position,
///   0 elsewhere,
/// where the products run over visible keys only (a window shortens the stick). Differentiable
/// (first order) with respect to z. On the CPU in fp32/fp64 one fused pass per query row forward
/// and backward (dz_ij = (1 − β_ij)·g_ij − β_ij·(g_ii + Σ_{l<j} g_il), g = A ∘ dA); elsewhere
/// stick_breaking_weights_reference. Throws c10::Error when the shapes disagree.
torch::Tensor stick_breaking_weights(const torch::Tensor& z, const torch::Tensor& q_pos,
                                     const torch::Tensor& k_pos, const torch::Tensor& visible);

/// The same weights from LibTorch ops (a suffix cumsum of log(1 − β) over flipped rows), with
/// autograd's gradients: the oracle of the fused path and its form on other devices.
torch::Tensor stick_breaking_weights_reference(const torch::Tensor& z, const torch::Tensor& q_pos,
                                               const torch::Tensor& k_pos,
                                               const torch::Tensor& visible);

/// Settings of one stick_breaking_attention_tiled call.
struct StickBreakingTiles {
  int64_t window = 0;    ///< keys j with q_pos − k_pos < window break the stick; 0 = all earlier
  double scale = 0;      ///< logit scale; 0 = 1/√Dh
  int64_t tile_q = 128;  ///< queries per tile
  int64_t tile_k = 128;  ///< keys per tile
};

/// Causal stick-breaking attention by tiles, forward and backward, as one autograd Function:
/// o_i = Σ_j A_ij v_j + (1 − Σ_j A_ij) v_i with z = q·kᵀ·scale and A as stick_breaking_weights
/// (no bias: q and k already carry a rotation, if any). q [B,H,Tq,Dh], k and v [B,H,Tk,Dh] (kv
/// heads already repeated), queries the last Tq keys (query i at key index Tk − Tq + i). Per query
/// tile the key tiles are visited from the query backwards, carrying Σ log(1 − β) so far, so each
/// weight is exact as in the dense form; the Function keeps that sum per query ([B,H,Tq]) and
/// the inputs, never a [Tq,Tk] tensor: O(T·Dh) memory per head plus one tile's scratch. The
/// backward revisits the tiles in the same order and takes Σ_{l<j} g_il + g_ii as
/// dO_i·o_i − Σ_{l≥j} g_il (FlashAttention-2's D_i, Dao 2023, Algorithm 2). fp32 or fp64, one
/// dtype; returns [B,H,Tq,Dh]. Throws c10::Error for other dtypes, mismatched shapes, Tk < Tq or
/// tiles <= 0.
torch::Tensor stick_breaking_attention_tiled(const torch::Tensor& q, const torch::Tensor& k,
                                             const torch::Tensor& v,
                                             const StickBreakingTiles& opts);

}  // namespace hybridlab
