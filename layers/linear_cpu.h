#pragma once
// A projection whose GEMMs are split over LibTorch's threads by this code, one block per thread
// with single-threaded BLAS, instead of handed whole to the BLAS library's own threading.

#include <torch/nn/modules/linear.h>
#include <torch/types.h>

namespace hybridlab {

/// y = x Wᵀ with gradients for x and W: x [..., in], W [out, in] (a bias-free nn::Linear), y
/// [..., out]. Every GEMM of the forward (y = x Wᵀ) and backward (dx = dy W, dW = dyᵀ x) is cut
/// into one block per intra-op thread: rows of x for y and dx, and for dW rows of W (or its
/// columns when W has fewer rows than there are threads), each block a single-threaded BLAS call.
/// OpenBLAS's threaded GEMM instead synchronises its threads panel by panel, which in a training
/// step on two cores scaled the projections by well under the 1.6-1.9× it reaches in isolation.
/// Same values as torch::linear up to summation order (each output element is one BLAS dot
/// product in both). fp32/fp64 CPU tensors of one dtype only (checked by cpu_linear_applies); not
/// twice differentiable. Throws c10::Error on other inputs.
torch::Tensor linear_cpu(const torch::Tensor& x, const torch::Tensor& w);

/// Whether linear_cpu takes x and w: both fp32 or both fp64 CPU tensors, w 2-D with x's last
/// dimension as its second.
bool cpu_linear_applies(const torch::Tensor& x, const torch::Tensor& w);

/// proj(x) for an nn::Linear: through linear_cpu when `fused`, proj has no bias and
/// cpu_linear_applies(x, proj->weight); otherwise proj's own forward (the reference path).
torch::Tensor project(const torch::nn::Linear& proj, const torch::Tensor& x, bool fused);

}  // namespace hybridlab
