#pragma once
// RMSNorm (Zhang & Sennrich 2019) and the gated RMSNorm of Gated DeltaNet's output
// (Yang, Kautz & Hatamizadeh, ICLR 2025, §3.4; fla `FusedRMSNormGated`, HF
// `Qwen3NextRMSNormGated`).

#include <torch/nn/module.h>
#include <torch/types.h>

#include <cstdint>

#include "hybridlab/mixer_ops.h"

namespace hybridlab {

/// y = x / sqrt(mean(x², last dim) + eps) · weight. The statistics are computed in fp32 whatever
/// the input dtype; the result has the input dtype. weight [dim] is initialised to ones (not
/// zero-centred). For fp32/fp64 CPU tensors, forward runs fused CPU passes (equal to the tensor
/// form to rounding): without gradients a forward-only pass (row norms from LibTorch, one
/// elementwise loop), with gradients rms_norm_fused_cpu (layers/kernels/rms_norm_cpu.h); otherwise
/// (another device, or fused_kernels false) the LibTorch tensor form.
class RMSNorm : public torch::nn::Module {
 public:
  /// dim: size of the last dimension; eps: added inside the square root; fused_kernels: false
  /// keeps the tensor form in training (the reference for tests and benches).
  RMSNorm(int64_t dim, double eps, bool fused_kernels = true);
  /// x [..., dim] → [..., dim]. Throws c10::Error if the last dimension is not `dim`.
  torch::Tensor forward(const torch::Tensor& x);
  int64_t dim() const { return dim_; }
  double eps() const { return eps_; }
  torch::Tensor weight;

 private:
  int64_t dim_;
  double eps_;
  bool fused_kernels_;
};

/// Gated RMSNorm: y = RMSNorm(x) · weight · SiLU(z): normalise first, then gate (fla
/// `FusedRMSNormGated` with swish; HF `Qwen3NextRMSNormGated`). The norm and the gate are
/// computed in fp32. Same fused CPU passes as RMSNorm.
class GatedRMSNorm : public torch::nn::Module {
 public:
  /// As RMSNorm's constructor.
  GatedRMSNorm(int64_t dim, double eps, bool fused_kernels = true);
  /// x, z [..., dim] → [..., dim] (dtype of x).
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& z);
  torch::Tensor weight;

 private:
  int64_t dim_;
  double eps_;
  bool fused_kernels_;
};

}  // namespace hybridlab
