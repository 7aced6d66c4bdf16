#pragma once
// Shared pieces of the CPU fast paths (fused chunked Gated DeltaNet, short convolution, RMSNorms):
// when they may run, how their loops are compiled, and a dot product those loops vectorise.

#include <torch/types.h>

#include <cstdint>
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

/// a·b over n elements, in 16 independent partial sums. One running sum is a chain of dependent
/// multiply-adds (a few cycles each) that the compiler may not reorder; separate lanes are what it
/// can keep in vector registers. Inlined, so each vector-width clone of a caller gets its own.
template <class S>
inline __attribute__((always_inline)) S dot(const S* a, const S* b, int64_t n) {
  constexpr int64_t kLanes = 16;
  S lane[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int64_t l = 0; l < kLanes; ++l) lane[l] += a[i + l] * b[i + l];
  }
  S acc = 0;
  for (; i < n; ++i) acc += a[i] * b[i];
  for (int64_t l = 0; l < kLanes; ++l) acc += lane[l];
  return acc;
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
