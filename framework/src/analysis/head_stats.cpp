#include "analysis/head_stats.h"

#include <torch/torch.h>

namespace hybridlab::analysis {

namespace {

void accumulate(torch::Tensor& sum, const torch::Tensor& add) {
  sum = sum.defined() ? sum + add : add;
}

}  // namespace

void add_attention(AttentionSums& sums, const torch::Tensor& probs, const torch::Tensor& q_pos,
                   const torch::Tensor& k_pos, int64_t local_window) {
  TORCH_CHECK(probs.dim() == 4 && probs.size(2) == q_pos.size(0) && probs.size(3) == k_pos.size(0),
              "add_attention: probs must be [B,H,Q,K] matching q_pos [Q] and k_pos [K], got ",
              probs.sizes());
  const torch::Tensor p = probs.detach().to(torch::kCPU, torch::kDouble);
  const torch::Tensor diff =
      (q_pos.to(torch::kCPU).unsqueeze(1) - k_pos.to(torch::kCPU).unsqueeze(0))
          .to(torch::kDouble);  // [Q,K]
  const int64_t B = p.size(0), Q = p.size(2);
  accumulate(sums.rows, torch::full({p.size(1)}, static_cast<double>(B * Q), torch::kDouble));
  accumulate(sums.distance, (p * diff.abs()).sum({0, 2, 3}));
  // xlogy gives 0·ln 0 = 0 for masked keys.
  accumulate(sums.entropy, -torch::xlogy(p, p).sum({0, 2, 3}));
  const torch::Tensor first = k_pos.to(torch::kCPU).eq(0).to(torch::kDouble);  // [K]
  accumulate(sums.sink, (p * first).sum({0, 2, 3}));
  const torch::Tensor near =
      diff.ge(0).logical_and(diff.lt(static_cast<double>(local_window))).to(torch::kDouble);
  accumulate(sums.local, (p * near).sum({0, 2, 3}));
}

void add_gates(GateSums& sums, const torch::Tensor& g, const torch::Tensor& beta) {
  TORCH_CHECK(g.dim() == 3 && g.sizes() == beta.sizes(),
              "add_gates: g and beta must both be [B,H,T], got ", g.sizes(), " and ", beta.sizes());
  const torch::Tensor gd = g.detach().to(torch::kCPU, torch::kDouble);
  const int64_t B = g.size(0), T = g.size(2);
  accumulate(sums.tokens, torch::full({g.size(1)}, static_cast<double>(B * T), torch::kDouble));
  accumulate(sums.alpha, gd.exp().sum(torch::IntArrayRef{0, 2}));
  accumulate(sums.beta,
             beta.detach().to(torch::kCPU, torch::kDouble).sum(torch::IntArrayRef{0, 2}));
}

}  // namespace hybridlab::analysis
