#pragma once
// Row-major BLAS calls on raw CPU buffers, for kernels that work on blocks small enough that
// LibTorch's per-op dispatch would cost more than the arithmetic (the fused chunked Gated DeltaNet
// kernel). Calls the CBLAS of the BLAS library LibTorch itself uses (libblas.so.3, OpenBLAS on
// Debian) when the build found one (HYBRIDLAB_HAVE_CBLAS), else falls back to torch::mm on
// wrapped buffers and a forward-substitution loop: same results, slower.

#include <cstdint>

namespace hybridlab::cpu {

/// C[m×n] = alpha · op(A) · op(B) + beta · C, all row-major; op(A) is m×k (A is k×m when
/// trans_a), op(B) is k×n (B is n×k when trans_b); lda/ldb/ldc are row strides in elements.
/// S is float or double. Never throws.
template <class S>
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, S alpha, const S* a,
          int64_t lda, const S* b, int64_t ldb, S beta, S* c, int64_t ldc);

/// Solves L · X = B in place (B becomes X), L m×m unit lower triangular (its diagonal is taken as
/// 1 and its upper part is never read), B m×n, row-major. S is float or double. Never throws.
template <class S>
void trsm_unit_lower(int64_t m, int64_t n, const S* l, int64_t ldl, S* b, int64_t ldb);

/// B ← L · B in place, L m×m unit lower triangular (diagonal taken as 1, upper part never read),
/// B m×n, row-major: half the multiply-adds of a GEMM with L. S is float or double. Never throws.
template <class S>
void trmm_unit_lower(int64_t m, int64_t n, const S* l, int64_t ldl, S* b, int64_t ldb);

/// While alive, OpenBLAS runs every call on the calling thread: the blocks of a fused kernel are
/// too small to repay waking OpenBLAS's worker threads (measured: a third of the fused chunked
/// Gated DeltaNet's time went to their spin-waits), and the kernel spreads its heads over
/// LibTorch's threads itself. OpenBLAS's thread count is process-wide, so BLAS calls elsewhere
/// during the guard's lifetime also run single-threaded; the previous count comes back on
/// destruction. A no-op for other BLAS libraries and for an OpenMP OpenBLAS, which already runs
/// single-threaded inside LibTorch's parallel regions. Never throws.
class SingleThreadedBlas {
 public:
  SingleThreadedBlas();
  ~SingleThreadedBlas();
  SingleThreadedBlas(const SingleThreadedBlas&) = delete;
  SingleThreadedBlas& operator=(const SingleThreadedBlas&) = delete;

 private:
  int previous_ = 0;  // 0: nothing to restore
};

/// Whether gemm/trsm_unit_lower call CBLAS (true) or the LibTorch fallback (false).
bool have_cblas();

}  // namespace hybridlab::cpu
