#pragma once
// Runtime settings: threads, device, seed (the `runtime:` section).

#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/types.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "hybridlab/config.h"

namespace hybridlab {

/// runtime.precision: the arithmetic of the training forward pass.
enum class Precision {
  kFp32,  ///< fp32 everywhere (the default)
  kTf32,  ///< fp32 tensors, TF32 matmuls and convolutions (CUDA only)
  kBf16,  ///< bf16 autocast of the training forward pass over fp32 weights and optimizer state
};

/// "fp32", "tf32" or "bf16".
std::string precision_name(Precision p);

struct RuntimeOptions {
  int threads = 0;             ///< intra-op threads; 0 = all cores ("auto" in YAML)
  int interop_threads = 0;     ///< inter-op threads; 0 = LibTorch's default
  std::string device = "cpu";  ///< "cpu", "cuda" or "cuda:N"
  int64_t seed = 0;            ///< global seed (torch::manual_seed), per-run seeds derive from it
  std::string device_where;    ///< where `device` was set ("file:line:col"), for messages
  Precision precision = Precision::kFp32;  ///< runtime.precision
};

/// Reads `runtime:` (threads: auto|N, interop_threads, device: cpu|cuda[:N], seed, precision:
/// fp32|tf32|bf16). `tf32` with a CPU device is an error at the precision key (TF32 is a CUDA
/// matmul mode).
RuntimeOptions read_runtime_options(Section s);

/// Applies threads (at::set_num_threads, and the same count to OpenBLAS, whose own thread pool
/// LibTorch does not size), the seed, and TF32 matmuls on or off (precision tf32 or not). Call
/// once, before any tensor work.
/// Throws UserError when a CUDA device is asked for and none is available.
void apply_runtime(const RuntimeOptions& opts);

/// The torch::Device for opts.device. Throws UserError when CUDA is asked for and absent.
torch::Device runtime_device(const RuntimeOptions& opts);

/// The training forward pass's precision while alive (RAII; a scope must not span a backward
/// pass, which runs in the dtypes its forward recorded). kBf16: LibTorch's autocast on `device`
/// with bfloat16 (on the CPU where LibTorch supports it, 1.10 and later): matmuls, linear layers
/// and convolutions run in bf16 over the fp32 weights, everything else keeps its dtype. kFp32 and
/// kTf32: nothing (TF32 is a global switch, apply_runtime). Kernels that must stay in fp32 (the
/// recurrent state, decays and gates of the mixers, attention scores) hold a NoAutocast guard.
/// Sources: PyTorch AMP (torch.autocast; "autocast should wrap only the forward pass(es) of your
/// network, including the loss computation"), fla's fp32 gate cumulative sums and state.
class AutocastScope {
 public:
  AutocastScope(Precision precision, const torch::Device& device);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool active_ = false;
  bool cuda_ = false;
  bool was_enabled_ = false;
  c10::ScalarType was_dtype_ = c10::ScalarType::Float;
};

/// Turns autocast off for the current thread while alive (both devices): the mixer and attention
/// kernels compute their state, decays and scores in fp32 whatever the caller's autocast.
class NoAutocast {
 public:
  NoAutocast() = default;

 private:
  c10::impl::ExcludeDispatchKeyGuard guard_{c10::autocast_dispatch_keyset};
};

/// Number of hardware cores (std::thread::hardware_concurrency, at least 1).
int hardware_threads();

/// The BLAS library LibTorch computes with (e.g. "OpenBLAS (pthreads) /usr/lib/...so, kernels
/// SkylakeX"), read from the shared libraries mapped into this process.
std::string blas_backend();

/// What select_blas_kernels() found and did.
struct BlasKernels {
  std::string detected;  ///< OpenBLAS's own kernel choice at load time ("Prescott", ...);
                         ///< empty when the BLAS is not a dynamic-arch OpenBLAS
  std::string active;    ///< the kernel set in use after the call
  std::string note;      ///< why active differs from detected, or why nothing was changed
  std::string faster;    ///< faster kernels this CPU supports that OPENBLAS_CORETYPE ruled
                         ///< out ("SkylakeX"); empty otherwise
};

/// Makes OpenBLAS use the fastest kernels this CPU supports when its own CPU detection fell
/// short. OpenBLAS 0.3.21 (Debian 12's) does not know Sapphire Rapids and newer Xeons and falls
/// back to its SSE3 "Prescott" kernels, about 3-4x slower for sgemm than its AVX-512 ones
/// (bench/gated_deltanet prints the sgemm rate it gets). The fix re-runs OpenBLAS's own
/// dynamic-arch initialisation with OPENBLAS_CORETYPE set to "SkylakeX" (AVX-512 F/BW/DQ/VL) or
/// "Haswell" (AVX2 + FMA), which is what that variable does when set before the program starts.
/// Leaves alone: a BLAS other than OpenBLAS, an OpenBLAS built for a single core type, a
/// detection already as good, and a process started with OPENBLAS_CORETYPE set (the user's
/// choice wins; `faster` then names better kernels it rules out, which apply_runtime warns of).
/// Runs once per process; later calls return the first result. Call it at startup, before any BLAS
/// work (apply_runtime and the CLI do). Never throws.
BlasKernels select_blas_kernels();

/// Keeps freed blocks in glibc malloc's heap (M_MMAP_THRESHOLD 32 MiB, M_MMAP_MAX 0: no block is
/// mapped on its own; M_TRIM_THRESHOLD 512 MiB) instead of handing them back to the OS. LibTorch
/// allocates every intermediate tensor afresh, and without this each multi-MB temporary of a
/// training or evaluation step is mapped and page-faulted in again on every call (measured: the
/// chunked Gated DeltaNet forward at T = 2048 went from 39 to 27 ms; a GPT-2-vocabulary training
/// step, B 8 x T 64, from 1.49 s to 0.26 s, hybridlab_train_throughput, one thread). Returns false
/// where mallopt refused (or this is not glibc). Once per process; never throws.
bool keep_freed_memory_in_heap();

/// Sets OpenBLAS's thread count (openblas_set_num_threads) when the BLAS is OpenBLAS; returns
/// false otherwise. LibTorch sizes MKL's threads but not OpenBLAS's, so without this a run with
/// `threads: 1` (say, one of two sweep jobs) still runs every large matmul on all cores.
bool set_blas_threads(int threads);

/// OpenBLAS's current thread count; 0 when the BLAS is not OpenBLAS.
int blas_threads();

/// How the BLAS library LibTorch calls runs its own threads.
enum class BlasThreading {
  kUnknown,     ///< not OpenBLAS (MKL, BLIS, reference BLAS): not known here
  kSequential,  ///< OpenBLAS built without threads (libopenblas0-serial)
  kPthreads,    ///< OpenBLAS with its own pthread pool (libopenblas0-pthread)
  kOpenMP,      ///< OpenBLAS on the OpenMP runtime LibTorch uses (libopenblas0-openmp)
};

/// The threading of the OpenBLAS in this process (openblas_get_parallel(): 0, 1, 2); kUnknown for
/// other BLAS libraries. It decides whether two intra-op threads help: a pthreads OpenBLAS keeps
/// its own worker threads spinning after each call, and on a machine with as many cores as
/// threads they compete with LibTorch's OpenMP workers for the same cores (measured on 2 cores:
/// a training step with 2 threads ran at 0.51x the speed of 1). An OpenMP OpenBLAS shares
/// LibTorch's OpenMP pool and runs single-threaded inside LibTorch's parallel regions. Never
/// throws.
BlasThreading blas_threading();

/// "OpenMP", "pthreads", "sequential" or "unknown", for messages.
const char* blas_threading_name(BlasThreading t);

/// Both of the above: the process-wide CPU settings every hybridlab program starts with (the CLI,
/// the test and bench mains, apply_runtime). Call at startup, before tensor work on other threads.
void prepare_process();

/// Installs SIGINT/SIGTERM handlers that set stop_requested(): training checkpoints at the next
/// step and throws Interrupted (hybridlab/trainer.h), the scheduler stops starting runs. With
/// `second_signal_exits`, a second signal exits at once (code 128 + signal: a second Ctrl-C at a
/// terminal). A process started by another hybridlab process (a sweep's run, a data-parallel rank)
/// passes false: a cluster signals the parent and the child together (SLURM, systemd, timeout) and
/// the parent forwards its own, so two signals are one stop request there, and only SIGKILL ends it
/// before its checkpoint. SIGPIPE (the reader of stdout or stderr is gone) is a stop too: both
/// streams are sent to /dev/null and the run checkpoints and records `interrupted`.
void install_stop_handlers(bool second_signal_exits = true);
/// Whether a stop was requested (also settable by tests).
std::atomic<bool>& stop_requested();

}  // namespace hybridlab
