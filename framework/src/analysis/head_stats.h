#pragma once
// Per-head statistics of attention weights and Gated DeltaNet gates, accumulated over batches.
// Definitions: docs/analysis.md (attention distance as in Vig & Belinkov 2019 and Dosovitskiy
// et al. 2021 App. D.7; the first-token "sink" of Xiao et al. 2024, StreamingLLM; Gated DeltaNet
// gates α and β of Yang et al. 2025, eq. 10).

#include <torch/types.h>

#include <cstdint>

namespace hybridlab::analysis {

/// Sums over query rows, per head (each [H] float64; undefined until the first add).
struct AttentionSums {
  torch::Tensor rows;      ///< query rows seen
  torch::Tensor distance;  ///< Σ_rows Σ_j p_ij·|q_i − k_j|
  torch::Tensor entropy;   ///< Σ_rows −Σ_j p_ij ln p_ij (0·ln 0 = 0)
  torch::Tensor sink;      ///< Σ_rows p_ij at k_j = 0
  torch::Tensor local;     ///< Σ_rows Σ_{j: 0 <= q_i − k_j < local_window} p_ij
};

/// Adds one block of attention weights: probs [B,H,Q,K] (rows sum to 1), q_pos [Q] and k_pos [K]
/// int64 absolute positions. `local_window` (tokens) bounds the local mass.
void add_attention(AttentionSums& sums, const torch::Tensor& probs, const torch::Tensor& q_pos,
                   const torch::Tensor& k_pos, int64_t local_window = 16);

/// Sums over tokens, per value head (each [H] float64; undefined until the first add).
struct GateSums {
  torch::Tensor tokens;  ///< tokens seen
  torch::Tensor alpha;   ///< Σ exp(g)
  torch::Tensor beta;    ///< Σ β
};

/// Adds one forward's gates: g [B,H,T] (log decay) and beta [B,H,T].
void add_gates(GateSums& sums, const torch::Tensor& g, const torch::Tensor& beta);

}  // namespace hybridlab::analysis
