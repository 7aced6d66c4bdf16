#pragma once
// Products whose GEMMs are split over LibTorch's threads by this code, one block per thread with
// single-threaded BLAS, instead of handed whole to the BLAS library's own threading: projections
// (linear_cpu) and batched matrix products (matmul_cpu, attention's scores and read-out).

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

/// a · op(b) batched, with gradients for a and b: a [..., m, k]; b [..., k, n], or [..., n, k] read
/// transposed when trans_b; the same leading (batch) dimensions; result [..., m, n]. The batch
/// entries are spread over the intra-op threads, one single-threaded GEMM each (LibTorch 1.13's
/// CPU bmm loops over them calling a threaded GEMM per entry: at two threads the attention's
/// [32 × 64 × 512] products ran slower than at one). Inputs are read through their strides where
/// the batch dimensions merge and rows are unit-stride (narrowed and transposed views need no
/// copy). fp32/fp64 CPU tensors of one dtype (matmul_cpu_applies); not twice differentiable.
/// Throws c10::Error on other inputs.
torch::Tensor matmul_cpu(const torch::Tensor& a, const torch::Tensor& b, bool trans_b);

/// Whether matmul_cpu takes a and b: both fp32 or both fp64 CPU tensors of ≥ 3 dimensions with the
/// same batch dimensions and matching inner sizes.
bool matmul_cpu_applies(const torch::Tensor& a, const torch::Tensor& b, bool trans_b);

/// a @ b for batches of matrices without autograd: a [N, m, k], b [N, k, n] → [N, m, n]. Each
/// operand is read through its strides when its rows or its columns are unit-stride (a transposed
/// view costs no copy); the batch entries are spread over the intra-op threads, one
/// single-threaded GEMM each. Falls back to at::bmm where it does not apply: not both fp32 or both
/// fp64 CPU tensors, or autograd would record. Throws c10::Error on mismatched shapes.
torch::Tensor bmm_cpu(const torch::Tensor& a, const torch::Tensor& b);

/// c += alpha · a @ b in place, as bmm_cpu (c [N, m, n] may be a view, e.g. a narrowed slice of
/// a larger gradient); falls back to c.baddbmm_(a, b, 1, alpha) where bmm_cpu would.
void bmm_add_(torch::Tensor c, const torch::Tensor& a, const torch::Tensor& b, double alpha = 1);

/// proj(x) for an nn::Linear: through linear_cpu when `fused`, proj has no bias and
/// cpu_linear_applies(x, proj->weight); otherwise proj's own forward (the reference path).
torch::Tensor project(const torch::nn::Linear& proj, const torch::Tensor& x, bool fused);

}  // namespace hybridlab
