// Runtime settings: threads, device, seed.

#include "hybridlab/runtime.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/autocast_mode.h>
#include <torch/cuda.h>
#include <torch/utils.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <regex>
#include <set>
#include <thread>

namespace hybridlab {

int hardware_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

RuntimeOptions read_runtime_options(Section s) {
  RuntimeOptions o;
  // threads: "auto" (all cores) or a positive count.
  if (s.has("threads")) {
    const std::string t = s.get<std::string>("threads", "auto");
    if (t == "auto") {
      o.threads = 0;
    } else {
      try {
        size_t used = 0;
        o.threads = std::stoi(t, &used);
        if (used != t.size()) throw std::invalid_argument(t);
      } catch (const std::exception&) {
        s.error("threads", "expected 'auto' or a positive integer, got '" + t + "'");
      }
      s.check(o.threads >= 1, "threads",
              o.threads == 0 ? "must be 'auto' or >= 1 (write 'auto' for all cores; 0 is not a "
                               "thread count)"
                             : "must be 'auto' or >= 1");
    }
  } else {
    s.get<std::string>("threads", "auto");
  }
  o.interop_threads = s.get<int>("interop_threads", 0);
  s.check(o.interop_threads >= 0, "interop_threads", "must be >= 0 (0 = LibTorch's default)");
  o.device = s.get<std::string>("device", "cpu");
  o.device_where = s.location("device").str();
  static const std::regex device_re("cpu|cuda(:[0-9]+)?");
  s.check(std::regex_match(o.device, device_re), "device",
          "expected 'cpu', 'cuda' or 'cuda:N', got '" + o.device + "'");
  o.seed = s.get<int64_t>("seed", 0);
  s.check(o.seed >= 0, "seed", "must be >= 0");
  const std::string precision = s.get<std::string>("precision", "fp32");
  if (precision == "tf32") {
    o.precision = Precision::kTf32;
    s.check(o.device.rfind("cuda", 0) == 0, "precision",
            "tf32 is a CUDA matmul mode (TF32 tensor cores); on the CPU use fp32 or bf16");
  } else if (precision == "bf16") {
    o.precision = Precision::kBf16;
  } else {
    s.check(precision == "fp32", "precision",
            "expected fp32, tf32 (CUDA: TF32 matmuls) or bf16 (autocast over fp32 weights), got '" +
                precision + "'");
  }
  s.finish();
  return o;
}

std::string precision_name(Precision p) {
  switch (p) {
    case Precision::kTf32:
      return "tf32";
    case Precision::kBf16:
      return "bf16";
    case Precision::kFp32:
      break;
  }
  return "fp32";
}

// LibTorch 2.4 replaced the per-device autocast setters by ones taking the device type.
#if defined(TORCH_VERSION_MAJOR) && \
    (TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4))
#define HYBRIDLAB_AUTOCAST_BY_DEVICE_TYPE 1
#endif

AutocastScope::AutocastScope(Precision precision, const torch::Device& device) {
  if (precision != Precision::kBf16) return;
  active_ = true;
  cuda_ = device.is_cuda();
#ifdef HYBRIDLAB_AUTOCAST_BY_DEVICE_TYPE
  const at::DeviceType type = cuda_ ? at::kCUDA : at::kCPU;
  was_enabled_ = at::autocast::is_autocast_enabled(type);
  was_dtype_ = at::autocast::get_autocast_dtype(type);
  at::autocast::set_autocast_dtype(type, at::kBFloat16);
  at::autocast::set_autocast_enabled(type, true);
#else
  was_enabled_ = cuda_ ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
  was_dtype_ =
      cuda_ ? at::autocast::get_autocast_gpu_dtype() : at::autocast::get_autocast_cpu_dtype();
  if (cuda_) {
    at::autocast::set_autocast_gpu_dtype(at::kBFloat16);
    at::autocast::set_enabled(true);
  } else {
    at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
    at::autocast::set_cpu_enabled(true);
  }
#endif
  at::autocast::increment_nesting();
}

AutocastScope::~AutocastScope() {
  if (!active_) return;
  // The cast weights are cached for the scope's life; drop them with the outermost scope.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
#ifdef HYBRIDLAB_AUTOCAST_BY_DEVICE_TYPE
  const at::DeviceType type = cuda_ ? at::kCUDA : at::kCPU;
  at::autocast::set_autocast_enabled(type, was_enabled_);
  at::autocast::set_autocast_dtype(type, was_dtype_);
#else
  if (cuda_) {
    at::autocast::set_enabled(was_enabled_);
    at::autocast::set_autocast_gpu_dtype(was_dtype_);
  } else {
    at::autocast::set_cpu_enabled(was_enabled_);
    at::autocast::set_autocast_cpu_dtype(was_dtype_);
  }
#endif
}

torch::Device runtime_device(const RuntimeOptions& opts) {
  if (opts.device == "cpu") return torch::Device(torch::kCPU);
  const std::string where = opts.device_where.empty() ? "" : opts.device_where + ": ";
  if (!torch::cuda::is_available()) {
    throw UserError(where + "runtime.device is '" + opts.device +
                    "' but CUDA is not available in this build or on this machine "
                    "(set runtime.device=cpu, or build against a CUDA LibTorch with "
                    "-DCMAKE_PREFIX_PATH=/path/to/libtorch)");
  }
  torch::Device d(opts.device);
  if (d.has_index() && d.index() >= static_cast<int>(torch::cuda::device_count())) {
    throw UserError(where + "runtime.device is '" + opts.device + "' but only " +
                    std::to_string(torch::cuda::device_count()) + " CUDA device(s) exist");
  }
  return d;
}

void apply_runtime(const RuntimeOptions& opts) {
  runtime_device(opts);  // fail early on an absent GPU
  prepare_process();
  // TF32 matmuls and convolutions for precision tf32 (a CUDA mode; the reader refuses it on the
  // CPU), and explicitly off otherwise: LibTorch's default differs between versions.
  const bool tf32 = opts.precision == Precision::kTf32;
  at::globalContext().setAllowTF32CuBLAS(tf32);
  at::globalContext().setAllowTF32CuDNN(tf32);
  if (const std::string faster = select_blas_kernels().faster; !faster.empty()) {
    static std::once_flag told;
    std::call_once(told, [&faster] {
      std::fprintf(stderr,
                   "hybridlab: note: OPENBLAS_CORETYPE=%s holds OpenBLAS to slower kernels than "
                   "this CPU runs (%s); unset OPENBLAS_CORETYPE for them (sgemm about 1.9x "
                   "faster on an AVX-512 development machine).\n",
                   std::getenv("OPENBLAS_CORETYPE"), faster.c_str());
    });
  }
  const int threads = opts.threads > 0 ? opts.threads : hardware_threads();
  at::set_num_threads(threads);
  set_blas_threads(threads);
  if (threads > 1 && blas_threading() == BlasThreading::kPthreads) {
    static std::once_flag warned;
    std::call_once(warned, [threads] {
      std::fprintf(stderr,
                   "hybridlab: warning: runtime.threads is %d but OpenBLAS runs its own pthread "
                   "pool, which competes with LibTorch's threads for the cores (2 threads can be "
                   "slower than 1). Select the OpenMP OpenBLAS (scripts/setup.sh does), or use "
                   "threads: 1 and --jobs N.\n",
                   threads);
    });
  }
  if (opts.interop_threads > 0) {
    // May only be set once per process and before inter-op work: ignore a repeated call.
    try {
      at::set_num_interop_threads(opts.interop_threads);
    } catch (const std::exception&) {
    }
  }
  torch::manual_seed(static_cast<uint64_t>(opts.seed));
}

std::string blas_backend() {
  // Which BLAS is mapped into this process is what LibTorch's matmuls actually call.
  std::ifstream maps("/proc/self/maps");
  std::string line;
  std::set<std::string> libs;
  static const std::regex blas_re(R"((/\S*(openblas|blis|mkl_rt|libmkl|libblas|atlas)\S*\.so\S*))");
  std::smatch m;
  while (std::getline(maps, line)) {
    if (std::regex_search(line, m, blas_re)) libs.insert(m[1].str());
  }
  if (libs.empty()) return "unknown (no BLAS library mapped)";
  // OpenBLAS is mapped as libblas, liblapack and libopenblas: name the implementation only.
  std::set<std::string> impl;
  for (const auto& l : libs) {
    if (l.find("libopenblas") != std::string::npos) impl.insert(l);
  }
  if (!impl.empty()) libs = impl;
  std::string out;
  for (const auto& l : libs) {
    std::string kind = "BLAS";
    if (l.find("openblas") != std::string::npos) {
      kind = std::string("OpenBLAS (") + blas_threading_name(blas_threading()) + ")";
    } else if (l.find("mkl") != std::string::npos) {
      kind = "MKL";
    } else if (l.find("/blas/") != std::string::npos) {
      kind = "reference BLAS (slow: apt-get install libopenblas0-openmp)";
    }
    out += (out.empty() ? "" : "; ") + kind + " " + l;
  }
  const BlasKernels k = select_blas_kernels();
  if (!k.active.empty()) out += ", kernels " + k.active;
  if (!k.note.empty()) out += " (" + k.note + ")";
  return out;
}

}  // namespace hybridlab
