#pragma once
// Runtime settings: threads, device, seed (the `runtime:` section).

#include <torch/types.h>

#include <cstdint>
#include <string>

#include "hybridlab/config.h"

namespace hybridlab {

struct RuntimeOptions {
  int threads = 0;             ///< intra-op threads; 0 = all cores ("auto" in YAML)
  int interop_threads = 0;     ///< inter-op threads; 0 = LibTorch's default
  std::string device = "cpu";  ///< "cpu", "cuda" or "cuda:N"
  int64_t seed = 0;            ///< global seed (torch::manual_seed), per-run seeds derive from it
};

/// Reads `runtime:` (threads: auto|N, interop_threads, device: cpu|cuda[:N], seed).
RuntimeOptions read_runtime_options(Section s);

/// Applies threads (at::set_num_threads) and the seed. Call once, before any tensor work.
/// Throws UserError when a CUDA device is asked for and none is available.
void apply_runtime(const RuntimeOptions& opts);

/// The torch::Device for opts.device. Throws UserError when CUDA is asked for and absent.
torch::Device runtime_device(const RuntimeOptions& opts);

/// Number of hardware cores (std::thread::hardware_concurrency, at least 1).
int hardware_threads();

/// The BLAS library LibTorch computes with (e.g. "OpenBLAS 0.3.21 (pthreads)"), read from the
/// shared libraries mapped into this process.
std::string blas_backend();

}  // namespace hybridlab
