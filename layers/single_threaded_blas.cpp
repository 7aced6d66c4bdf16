// cpu::SingleThreadedBlas on top of the runtime's one OpenBLAS thread control.

#include "hybridlab/runtime.h"
#include "layers/cpu_blas.h"

namespace hybridlab::cpu {

SingleThreadedBlas::SingleThreadedBlas() {
  const int n = blas_threads();
  if (n > 1 && set_blas_threads(1)) previous_ = n;
}

SingleThreadedBlas::~SingleThreadedBlas() {
  if (previous_ > 0) set_blas_threads(previous_);
}

}  // namespace hybridlab::cpu
