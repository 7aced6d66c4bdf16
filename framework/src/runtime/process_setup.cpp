// Process-wide CPU settings: OpenBLAS kernel selection (undoing a CPU misdetection) and glibc
// malloc thresholds. See runtime.h.

#include <dlfcn.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <strings.h>

#include <cstdlib>
#include <mutex>
#include <string>

#include "hybridlab/runtime.h"

namespace hybridlab {

namespace {

// 2 = AVX-512 kernels, 1 = AVX2 + FMA kernels, 0 = anything older. Names as OpenBLAS spells
// them in openblas_get_corename().
// Case-insensitive, as OpenBLAS reads OPENBLAS_CORETYPE.
int kernel_tier(const std::string& core) {
  for (const char* n : {"SkylakeX", "Cooperlake", "SapphireRapids"}) {
    if (strcasecmp(core.c_str(), n) == 0) return 2;
  }
  for (const char* n : {"Haswell", "Zen", "Excavator"}) {
    if (strcasecmp(core.c_str(), n) == 0) return 1;
  }
  return 0;
}

// The best OpenBLAS kernel set this CPU can run, by the instructions it reports.
const char* wanted_kernels() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl")) {
    return "SkylakeX";
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
#endif
  return nullptr;  // other architectures: OpenBLAS's own choice stands
}

template <class Fn>
Fn openblas_symbol(const char* name) {
  // OpenBLAS is loaded with LibTorch, into the global scope: no handle needed.
  return reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, name));
}

BlasKernels select_once() {
  using CoreName = char* (*)();
  using Hook = void (*)();
  BlasKernels r;
  const auto corename = openblas_symbol<CoreName>("openblas_get_corename");
  const auto quit = openblas_symbol<Hook>("gotoblas_dynamic_quit");
  const auto init = openblas_symbol<Hook>("gotoblas_dynamic_init");
  if (!corename) {
    r.note = "not OpenBLAS: kernels left to the BLAS library";
    return r;
  }
  r.detected = r.active = corename();
  if (!quit || !init) {
    r.note = "OpenBLAS built for one core type: nothing to choose";
    return r;
  }
  const char* wanted = wanted_kernels();
  if (const char* forced = std::getenv("OPENBLAS_CORETYPE")) {
    r.note = std::string("chosen by OPENBLAS_CORETYPE=") + forced;
    // Honoured, but said: a machine image may set it for its oldest hosts, and on an AVX-512
    // CPU the AVX2 kernels run sgemm at about half the rate.
    if (wanted && kernel_tier(r.active) < kernel_tier(wanted)) {
      r.faster = wanted;
      r.note += std::string("; this CPU runs ") + wanted + " kernels, unset it to use them";
    }
    return r;
  }
  if (!wanted || kernel_tier(r.detected) >= kernel_tier(wanted)) return r;
  // gotoblas_dynamic_init reads OPENBLAS_CORETYPE; quit clears the current choice so init
  // selects again (it returns early while one is set). The env variable also carries the
  // choice into child processes (sweep --jobs workers).
  setenv("OPENBLAS_CORETYPE", wanted, /*overwrite=*/0);
  quit();
  init();
  r.active = corename();
  r.note = "OpenBLAS chose " + r.detected + " on a CPU with " +
           (kernel_tier(wanted) == 2 ? "AVX-512" : "AVX2") +
           "; hybridlab switched it, OPENBLAS_CORETYPE overrides";
  return r;
}

}  // namespace

BlasKernels select_blas_kernels() {
  static std::once_flag once;
  static BlasKernels result;
  std::call_once(once, [] { result = select_once(); });
  return result;
}

bool keep_freed_memory_in_heap() {
  static const bool done = [] {
#if defined(__GLIBC__)
    // glibc caps M_MMAP_THRESHOLD at 32 MiB, so larger blocks (a subword model's logits: B x T x
    // 50257 floats, 100-200 MB) would still be mapped afresh per step; M_MMAP_MAX 0 serves every
    // block from the heap (a block too large for a thread arena falls back to the main one).
    return mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1 && mallopt(M_TRIM_THRESHOLD, 512 << 20) == 1 &&
           mallopt(M_MMAP_MAX, 0) == 1;
#else
    return false;
#endif
  }();
  return done;
}

bool set_blas_threads(int threads) {
  using SetThreads = void (*)(int);
  static const auto set = openblas_symbol<SetThreads>("openblas_set_num_threads");
  if (!set || threads < 1) return false;
  set(threads);
  return true;
}

int blas_threads() {
  using GetThreads = int (*)();
  static const auto get = openblas_symbol<GetThreads>("openblas_get_num_threads");
  return get ? get() : 0;
}

BlasThreading blas_threading() {
  using GetParallel = int (*)();
  static const auto get = openblas_symbol<GetParallel>("openblas_get_parallel");
  if (!get) return BlasThreading::kUnknown;
  switch (get()) {
    case 0:
      return BlasThreading::kSequential;
    case 1:
      return BlasThreading::kPthreads;
    case 2:
      return BlasThreading::kOpenMP;
    default:
      return BlasThreading::kUnknown;
  }
}

const char* blas_threading_name(BlasThreading t) {
  switch (t) {
    case BlasThreading::kSequential:
      return "sequential";
    case BlasThreading::kPthreads:
      return "pthreads";
    case BlasThreading::kOpenMP:
      return "OpenMP";
    case BlasThreading::kUnknown:
      break;
  }
  return "unknown";
}

void prepare_process() {
  select_blas_kernels();
  keep_freed_memory_in_heap();
}

}  // namespace hybridlab
