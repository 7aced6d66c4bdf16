#pragma once
// The fused CPU pass of SwiGLU's gating in training (layers/mlp.h uses it).

#include <torch/types.h>

namespace hybridlab {

/// SiLU(a) ⊙ b with gradients, as one fused CPU pass forward and one backward (a
/// torch::autograd::Function; derivation in layers/kernels/swiglu_cpu.cpp). a, b [...] of one shape
/// and dtype, fp32/fp64 on the CPU; returns [...]. Equal to the tensor form to rounding, values and
/// gradients. Throws c10::Error on other devices or dtypes, or differing shapes. Not twice
/// differentiable.
torch::Tensor swiglu_fused_cpu(const torch::Tensor& a, const torch::Tensor& b);

}  // namespace hybridlab
