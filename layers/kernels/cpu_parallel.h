#pragma once
// Intra-op parallel loops for the fused CPU kernels, on LibTorch's own threads.
//
// at::parallel_for cannot be used from this project's translation units as they are built: with
// an OpenMP LibTorch (Debian's, PyTorch's wheels) it is an inline template whose parallel region
// is a `#pragma omp parallel` in the caller's code, so it runs on one thread unless the caller is
// compiled with OpenMP enabled, and enabling it is not an option for every compiler (Clang's
// -fopenmp brings LLVM's libomp, a second thread pool next to LibTorch's libgomp). This helper is
// compiled once and starts LibTorch's OpenMP runtime itself.

#include <cstdint>
#include <functional>

namespace hybridlab::cpu {

/// Runs f(b, e) over consecutive chunks [b, e) that cover [begin, end), one chunk per intra-op
/// thread (at::get_num_threads(), i.e. `runtime.threads`), each chunk at least `grain` iterations
/// long where the range allows: the semantics of at::parallel_for (ATen/Parallel-inl.h in
/// LibTorch 1.13 and 2.x), including that at::get_thread_num() inside f is the chunk's thread
/// index in [0, at::get_num_threads()), so per-thread scratch can be indexed by it. Runs f(begin,
/// end) on the calling thread when the range is at most `grain`, one thread is configured, or the
/// call is already inside a parallel region (no nested teams). An exception thrown by f is
/// rethrown here after every chunk has ended (the first one, when several throw). grain ≥ 0.
void parallel_for(int64_t begin, int64_t end, int64_t grain,
                  const std::function<void(int64_t, int64_t)>& f);

/// The grain of parallel_for over rows of `row_elems` elements each: enough rows per chunk
/// (16384 elements, at least one row) to repay handing the chunk to a thread. Never throws.
inline int64_t row_grain(int64_t row_elems) {
  const int64_t per_row = row_elems > 1 ? row_elems : 1;
  return 16384 / per_row > 1 ? 16384 / per_row : 1;
}

/// Whether parallel_for can run on more than one thread in this build (LibTorch's OpenMP or
/// native thread pool was found). Never throws.
bool parallel_for_is_threaded();

}  // namespace hybridlab::cpu
