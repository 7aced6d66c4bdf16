#pragma once
// RMSNorm (Zhang & Sennrich 2019) and the gated RMSNorm of Gated DeltaNet's output
// (Yang, Kautz & Hatamizadeh, ICLR 2025, §3.4; fla `FusedRMSNormGated`, HF
// `Qwen3NextRMSNormGated`).

#include <torch/nn/module.h>
#include <torch/types.h>

#include <cstdint>

namespace hybridlab {

/// y = x / sqrt(mean(x², last dim) + eps) · weight. The statistics are computed in fp32 whatever
/// the input dtype; the result has the input dtype. weight [dim] is initialised to ones (not
/// zero-centred). When no gradient is needed (cpu::grad_needed) and the tensors are fp32/fp64 on
/// the CPU, forward runs a fused pass (row norms from LibTorch, one elementwise loop), equal to
/// the tensor form to rounding.
class RMSNorm : public torch::nn::Module {
 public:
  /// dim: size of the last dimension; eps: added inside the square root.
  RMSNorm(int64_t dim, double eps);
  /// x [..., dim] → [..., dim]. Throws c10::Error if the last dimension is not `dim`.
  torch::Tensor forward(const torch::Tensor& x);
  int64_t dim() const { return dim_; }
  double eps() const { return eps_; }
  torch::Tensor weight;

 private:
  int64_t dim_;
  double eps_;
};

/// Gated RMSNorm: y = RMSNorm(x) · weight · SiLU(z): normalise first, then gate (fla
/// `FusedRMSNormGated` with swish; HF `Qwen3NextRMSNormGated`). The norm and the gate are
/// computed in fp32. Same fused CPU pass as RMSNorm when no gradient is needed.
class GatedRMSNorm : public torch::nn::Module {
 public:
  GatedRMSNorm(int64_t dim, double eps);
  /// x, z [..., dim] → [..., dim] (dtype of x).
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& z);
  torch::Tensor weight;

 private:
  int64_t dim_;
  double eps_;
};

/// x / sqrt(Σx² over the last dim + eps), eps inside the square root (fla `l2norm`, eps 1e-6), so a
/// zero vector maps to zero with finite gradients.
torch::Tensor l2_normalize(const torch::Tensor& x, double eps = 1e-6);

}  // namespace hybridlab
