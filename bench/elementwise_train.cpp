// Training cost of the fused elementwise passes against the LibTorch tensor forms they replace:
// forward + backward, fp32, at the shapes of the bench_train_step M model.
//
// BM_NormTrain/gated: rms_norm_fused_cpu vs RMSNorm's tensor form (fused_kernels false); gated 0
//   = the block norms [8, 512, 128], 1 = Gated DeltaNet's gated output norm [8, 512, 4, 64].
// BM_SwiGluTrain: swiglu_fused_cpu vs silu(a) * b, a and b [8, 512, 512].
// Both forms are timed in interleaved rounds, each keeping its best call; counters fused_ms,
// tensor_ms and fused_speedup.

#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "layers/kernels/rms_norm_cpu.h"
#include "layers/kernels/swiglu_cpu.h"
#include "layers/mlp.h"
#include "layers/norm.h"

namespace {

// Seconds of one forward + backward (sum(y ⊙ dy)) through a fresh module.
double time_once(bool gated, bool fused, const torch::Tensor& x, const torch::Tensor& z,
                 const torch::Tensor& dy) {
  const int64_t D = x.size(-1);
  hybridlab::RMSNorm norm(D, 1e-6, fused);
  hybridlab::GatedRMSNorm gated_norm(D, 1e-6, fused);
  const torch::Tensor xg = x.detach().requires_grad_(true);
  const torch::Tensor zg = z.detach().requires_grad_(true);
  const auto t0 = std::chrono::steady_clock::now();
  const torch::Tensor y = gated ? gated_norm.forward(xg, zg) : norm.forward(xg);
  y.backward(dy);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void BM_NormTrain(benchmark::State& state) {
  const bool gated = state.range(0) == 1;
  torch::manual_seed(0);
  const std::vector<int64_t> shape =
      gated ? std::vector<int64_t>{8, 512, 4, 64} : std::vector<int64_t>{8, 512, 128};
  const torch::Tensor x = torch::randn(shape), z = torch::randn(shape), dy = torch::randn(shape);
  double fused = 1e30, tensor = 1e30;
  for (auto _ : state) {
    for (int i = 0; i < 5; ++i) {
      fused = std::min(fused, time_once(gated, true, x, z, dy));
      tensor = std::min(tensor, time_once(gated, false, x, z, dy));
    }
  }
  state.counters["fused_ms"] = fused * 1e3;
  state.counters["tensor_ms"] = tensor * 1e3;
  state.counters["fused_speedup"] = tensor / fused;
}

double time_swiglu(bool fused, const torch::Tensor& a, const torch::Tensor& b,
                   const torch::Tensor& dh) {
  const torch::Tensor ag = a.detach().requires_grad_(true);
  const torch::Tensor bg = b.detach().requires_grad_(true);
  const auto t0 = std::chrono::steady_clock::now();
  const torch::Tensor h = fused ? hybridlab::swiglu_fused_cpu(ag, bg) : torch::silu(ag) * bg;
  h.backward(dh);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void BM_SwiGluTrain(benchmark::State& state) {
  torch::manual_seed(0);
  const torch::Tensor a = torch::randn({8, 512, 512}), b = torch::randn({8, 512, 512});
  const torch::Tensor dh = torch::randn({8, 512, 512});
  double fused = 1e30, tensor = 1e30;
  for (auto _ : state) {
    for (int i = 0; i < 5; ++i) {
      fused = std::min(fused, time_swiglu(true, a, b, dh));
      tensor = std::min(tensor, time_swiglu(false, a, b, dh));
    }
  }
  state.counters["fused_ms"] = fused * 1e3;
  state.counters["tensor_ms"] = tensor * 1e3;
  state.counters["fused_speedup"] = tensor / fused;
}

}  // namespace

BENCHMARK(BM_NormTrain)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->Iterations(4);
BENCHMARK(BM_SwiGluTrain)->Unit(benchmark::kMillisecond)->Iterations(4);
