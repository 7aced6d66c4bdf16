#pragma once
// Attention by tiles with an online softmax, forward and backward, as one autograd Function: the
// training memory is O(T·Dh) per head (the output and one logsumexp per query are all it keeps)
// plus O(tile²) of scratch, instead of the O(T²) softmax weights autograd saves for the dense
// path.
//
// Sources: Dao 2023, "FlashAttention-2" (arXiv 2307.08691), Algorithm 1 (forward: per query tile a
// running max m, running sum l and an unnormalised output, rescaled by e^{m_old − m_new} at each
// key tile; saves O and L = m + log l) and Algorithm 2 (backward: recompute P = e^{S − L} per
// tile, D = rowsum(dO∘O), dV += Pᵀ dO, dP = dO Vᵀ, dS = P∘(dP − D), dQ += dS K, dK += dSᵀ Q, both
// times the softmax scale); Rabe & Staats 2021, "Self-attention Does Not Need O(n²) Memory"
// (arXiv 2112.05682), the O(T) memory argument.

#include <torch/types.h>

#include <cstdint>
#include <memory>

#include "hybridlab/position.h"

namespace hybridlab {

/// The attention mask of queries at q_pos [bq] against keys at k_pos [bk] (int64): [bq,bk] bool,
/// true where the pair is visible, i.e. 0 <= q_pos_i - k_pos_j (causal) and |q_pos_i - k_pos_j| <
/// window (window > 0). Undefined when neither applies (every pair visible). One rule for the
/// dense and the tiled attention paths.
torch::Tensor visible_pairs(const torch::Tensor& q_pos, const torch::Tensor& k_pos, bool causal,
                            int64_t window);

/// A logit bias separable per head, the attention-side form of DataBias (hybridlab/position.h):
/// bias[b,h,i,j] = query[b,h,i] + key[b,h,j], added to the scaled logits. query [B,H,Tq], key
/// [B,H,Tk]; both undefined for none.
struct SeparableBias {
  torch::Tensor query;
  torch::Tensor key;
  bool defined() const { return query.defined(); }
};

/// Settings of one tiled attention call.
struct TiledAttentionOptions {
  bool causal = true;    ///< causal (decoder) or bidirectional masking
  int64_t window = 0;    ///< sliding window as AttentionOptions::window; 0 = unlimited
  double scale = 0;      ///< softmax scale; 0 = 1/√Dh
  int64_t tile_q = 128;  ///< queries per tile (times n_heads/n_kv_heads rows: heads of a group
                         ///< share their key tile)
  int64_t tile_k = 128;  ///< keys per tile
  /// Positional hooks honoured per tile: kHookLogitBias and kHookRelative (other bits ignored;
  /// apply the rotate hook to q and k before the call).
  uint32_t hooks = 0;
};

/// softmax(((q·kᵀ + relative_logits)·scale + logit_bias + separable), masked) · v
/// (+ relative_values), by tiles. q [B,H,Tq,Dh]; k, v [B,Hkv,Tk,Dh] (Hkv divides H; query head h
/// reads kv head h / (H/Hkv)); q_pos [Tq], k_pos [Tk] int64, each consecutive (step 1;
/// Attention::attend's queries are the last Tq keys, q_pos[0] − k_pos[0] = Tk − Tq). Visibility: 0
/// ≤ q_pos−k_pos (causal) and |q_pos−k_pos| < window (window > 0); tiles with no visible pair are
/// skipped, tiles with every pair visible are not masked. A query with no visible key gets output 0
/// and zero gradients (no NaN). The bias and relative hooks of `scheme` are called per tile with
/// the tile's positions; the scheme's parameters are inputs of the autograd Function, and their
/// gradients come from recomputing the tile's hook outputs in the backward. `separable` (when
/// defined) is read per tile as two vectors, never as a [Tq,Tk] tensor; its query and key terms are
/// inputs of the Function too, their gradients the row and column sums of dS (the Forgetting
/// Transformer's kernel, Lin et al. 2025, §3.1 and its ops/forgetting_attention.py). Gradients of
/// q, k, v, the separable terms and those parameters are exact (not twice differentiable). fp32 or
/// fp64 q, k, v of one dtype, any strides and device; returns [B,H,Tq,Dh] contiguous in q's dtype.
/// Throws c10::Error for other dtypes, mismatched shapes (separable terms not [B,H,Tq] and
/// [B,H,Tk]), Tk < Tq, tiles ≤ 0, or a bias/relative hook requested without a scheme.
torch::Tensor tiled_attention(const torch::Tensor& q, const torch::Tensor& k,
                              const torch::Tensor& v, const torch::Tensor& q_pos,
                              const torch::Tensor& k_pos,
                              const std::shared_ptr<PositionScheme>& scheme,
                              const TiledAttentionOptions& opts,
                              const SeparableBias& separable = {});

}  // namespace hybridlab
