#pragma once
// The fused CPU pass of RMSNorm and gated RMSNorm in training (layers/norm.h uses it).

#include <torch/types.h>

namespace hybridlab {

/// RMSNorm (z undefined) or gated RMSNorm (z defined) with gradients, as one fused CPU pass
/// forward and one backward (a torch::autograd::Function; derivation in
/// layers/kernels/rms_norm_cpu.cpp): y = x · (mean(x², last dim) + eps)^{-1/2} · weight [·
/// SiLU(z)]. x, z [..., D], weight [D]; y
/// [..., D] in x's dtype; weight and z are cast to it (their gradients flow through the cast).
/// Computes in x's dtype (the tensor form computes fp32 inputs in fp32 too). Equal to the tensor
/// form to rounding, values and gradients. Throws c10::Error unless every tensor is fp32/fp64 on
/// the CPU and the shapes agree. Not twice differentiable.
torch::Tensor rms_norm_fused_cpu(const torch::Tensor& x, const torch::Tensor& weight,
                                 const torch::Tensor& z, double eps);

}  // namespace hybridlab
