// cpu::SingleThreadedBlas on top of the runtime's one OpenBLAS thread control.

#include "hybridlab/runtime.h"
#include "layers/kernels/cpu_blas.h"

namespace hybridlab::cpu {

SingleThreadedBlas::SingleThreadedBlas() {
  // An OpenMP OpenBLAS already runs on the calling thread inside LibTorch's parallel regions, and
  // its thread count is OpenMP's own (openblas_set_num_threads calls omp_set_num_threads), so
  // lowering it here would also shrink the kernel's cpu::parallel_for to one thread.
  if (blas_threading() != BlasThreading::kPthreads) return;
  const int n = blas_threads();
  if (n > 1 && set_blas_threads(1)) previous_ = n;
}

SingleThreadedBlas::~SingleThreadedBlas() {
  if (previous_ > 0) set_blas_threads(previous_);
}

}  // namespace hybridlab::cpu
