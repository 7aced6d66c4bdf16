#pragma once
// Shared pieces of the forward-only CPU fast paths (fused chunked Gated DeltaNet, short
// convolution, gated RMSNorm): when they may run, and how their loops are compiled.

#include <torch/types.h>

#include <initializer_list>

namespace hybridlab::cpu {

/// True when autograd would record an operation on any of these tensors: grad mode is on and at
/// least one defined tensor requires grad. The fast paths run only when this is false (evaluation,
/// decoding), so that training always differentiates through the tensor forms.
inline bool grad_needed(std::initializer_list<torch::Tensor> tensors) {
  if (!torch::GradMode::is_enabled()) return false;
  for (const auto& t : tensors) {
    if (t.defined() && t.requires_grad()) return true;
  }
  return false;
}

/// True when every defined tensor is a float32 or float64 tensor on the CPU.
inline bool cpu_floating(std::initializer_list<torch::Tensor> tensors) {
  for (const auto& t : tensors) {
    if (!t.defined()) continue;
    if (!t.device().is_cpu()) return false;
    if (t.scalar_type() != torch::kFloat && t.scalar_type() != torch::kDouble) return false;
  }
  return true;
}

}  // namespace hybridlab::cpu

// The fast paths' own loops, compiled once per vector width and picked when the library loads by
// the CPU's features (GCC/Clang function multiversioning): a portable build otherwise targets
// plain x86-64 (SSE2), a quarter of an AVX-512 machine's width.
#if defined(__x86_64__) && defined(__GNUC__)
#define HYBRIDLAB_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define HYBRIDLAB_VECTOR_CLONES
#endif
