// cpu::parallel_for on the OpenMP runtime LibTorch loaded. The runtime's entry points are looked
// up in the running process rather than linked, so this is always the one copy LibTorch uses
// (Debian's libgomp.so.1, or the renamed libgomp a PyTorch wheel carries), never a second pool.
// GOMP_parallel(fn, data, 0, 0) is what GCC emits for `#pragma omp parallel` (libgomp's ABI since
// GCC 4.9; LLVM's and Intel's runtimes export it too), so the team is exactly the one
// at::parallel_for would start: its size is the calling thread's nthreads ICV, which
// at::set_num_threads sets.

#include "layers/kernels/cpu_parallel.h"

#include <dlfcn.h>

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <exception>

namespace hybridlab::cpu {
#if AT_PARALLEL_OPENMP
namespace {

struct OpenMpRuntime {
  void (*parallel)(void (*)(void*), void*, unsigned, unsigned) = nullptr;
  int (*thread_num)() = nullptr;
  int (*num_threads)() = nullptr;

  bool usable() const { return parallel && thread_num && num_threads; }
};

const OpenMpRuntime& openmp_runtime() {
  static const OpenMpRuntime runtime = [] {
    OpenMpRuntime r;
    r.parallel = reinterpret_cast<decltype(r.parallel)>(dlsym(RTLD_DEFAULT, "GOMP_parallel"));
    r.thread_num =
        reinterpret_cast<decltype(r.thread_num)>(dlsym(RTLD_DEFAULT, "omp_get_thread_num"));
    r.num_threads =
        reinterpret_cast<decltype(r.num_threads)>(dlsym(RTLD_DEFAULT, "omp_get_num_threads"));
    return r;
  }();
  return runtime;
}

struct Job {
  Job(const OpenMpRuntime& o, int64_t b, int64_t e, int64_t g,
      const std::function<void(int64_t, int64_t)>& fn)
      : omp(&o), begin(b), end(e), grain(g), max_members(at::get_num_threads()), f(&fn) {}

  const OpenMpRuntime* omp;
  int64_t begin, end, grain;
  int64_t max_members;  // at::get_num_threads() of the caller: per-thread scratch is this long
  const std::function<void(int64_t, int64_t)>* f;
  std::atomic_flag failed = ATOMIC_FLAG_INIT;
  std::exception_ptr error;
};

// One team member's share, split as ATen's invoke_parallel splits (ATen/ParallelOpenMP.h).
void run_member(void* data) {
  Job& job = *static_cast<Job*>(data);
  int64_t members = std::min<int64_t>(job.omp->num_threads(), job.max_members);
  if (job.grain > 0) members = std::min(members, (job.end - job.begin + job.grain - 1) / job.grain);
  const int64_t tid = job.omp->thread_num();
  const int64_t chunk = (job.end - job.begin + members - 1) / members;
  const int64_t b = job.begin + tid * chunk;
  if (b >= job.end) return;
  try {
    at::internal::ThreadIdGuard guard(static_cast<int>(tid));
    (*job.f)(b, std::min(job.end, b + chunk));
  } catch (...) {
    if (!job.failed.test_and_set()) job.error = std::current_exception();
  }
}

}  // namespace
#endif  // AT_PARALLEL_OPENMP

bool parallel_for_is_threaded() {
#if AT_PARALLEL_OPENMP
  return openmp_runtime().usable();
#else
  return true;  // ATen's native pools run at::parallel_for from any translation unit
#endif
}

void parallel_for(int64_t begin, int64_t end, int64_t grain,
                  const std::function<void(int64_t, int64_t)>& f) {
  if (begin >= end) return;
#if AT_PARALLEL_OPENMP
  const OpenMpRuntime& omp = openmp_runtime();
  at::internal::lazy_init_num_threads();
  const bool threaded = omp.usable() && end - begin > grain && end - begin > 1 &&
                        !at::in_parallel_region() && at::get_num_threads() > 1;
  if (!threaded) {
    at::internal::ThreadIdGuard guard(0);
    f(begin, end);
    return;
  }
  Job job(omp, begin, end, grain, f);
  omp.parallel(run_member, &job, 0, 0);
  if (job.error) std::rethrow_exception(job.error);
#else
  at::parallel_for(begin, end, grain, f);  // ATen's native pool: threaded from any file
#endif
}

}  // namespace hybridlab::cpu
