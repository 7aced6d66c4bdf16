// Gated DeltaNet forward: the chunkwise-parallel (WY/UT) form against the recurrent form at
// T = 512, 2048, 8192 (d_model 256, 4 heads, head_dim 64, expand_v 2, chunk 64), under
// InferenceMode on one core (HYBRIDLAB_BENCH_THREADS changes that), plus this machine's sgemm
// rate measured in the same run and with the same threads.
// BM_Summary (last) reports the derived figures as counters, each time the best of several calls
// (robust to a noisy shared machine): chunked speed-up over recurrent at each T, for the whole
// layer and for the kernels alone (the evaluation kernel, chunk_gated_delta_rule_cpu, and the
// autograd tensor form that training runs); linearity time(8192)/time(2048); the chunked layer's
// GFLOP/s as a fraction of sgemm GFLOP/s.
// BM_TrainSummary (also interleaved rounds, best call) times the kernels' training work, forward
// and backward of q, k, v, g, β and h0 (one autograd::grad call), at the same T and shapes: the
// fused CPU forward+backward (chunk_gated_delta_rule_fused) against the autograd tensor form
// (chunk_gated_delta_rule_torch), as the ratio fused_train_speedup_T<T>.

#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "layers/gated_deltanet.h"
#include "layers/kernels/gated_deltanet_kernels.h"
#include "layers/norm.h"

namespace {

using hybridlab::GatedDeltaNet;
using hybridlab::GatedDeltaNetOptions;

GatedDeltaNetOptions options(const std::string& mode) {
  GatedDeltaNetOptions o;
  o.n_heads = 4;
  o.head_dim = 64;
  o.expand_v = 2.0;
  o.chunk_size = 64;
  o.mode = mode;
  return o;
}

void BM_GdnForward(benchmark::State& state, const std::string& mode) {
  const int64_t T = state.range(0);
  c10::InferenceMode guard;
  torch::manual_seed(0);
  GatedDeltaNet layer(options(mode), 256);
  const torch::Tensor x = torch::randn({1, T, 256});
  const torch::Tensor pos = torch::arange(T);
  for (auto _ : state) {
    benchmark::DoNotOptimize(layer.forward(x, pos, nullptr));
  }
  const double flops = layer.info(T).flops_per_token * static_cast<double>(T);
  state.counters["tokens_per_s"] =
      benchmark::Counter(static_cast<double>(T), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GFLOP_per_s"] =
      benchmark::Counter(flops / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

// BM_Summary times the cases itself because Google Benchmark does not hand one benchmark's
// timings to another. On a shared machine other tenants come and go for seconds at a time, so the
// cases are timed in interleaved rounds (every case once per round) and each keeps its best call:
// the ratios then compare the forms under the same conditions.
struct TimedCase {
  std::string name;
  std::function<void()> run;
  double best = 1e30;
};

void time_in_rounds(std::vector<TimedCase>& cases, int rounds) {
  for (auto& c : cases) c.run();  // warm-up
  for (int r = 0; r < rounds; ++r) {
    for (auto& c : cases) {
      const auto start = std::chrono::steady_clock::now();
      c.run();
      c.best = std::min(
          c.best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
  }
}

void BM_Sgemm(benchmark::State& state) {
  const int64_t n = state.range(0);
  c10::InferenceMode guard;
  const torch::Tensor a = torch::randn({n, n}), b = torch::randn({n, n});
  for (auto _ : state) benchmark::DoNotOptimize(torch::mm(a, b));
  state.counters["GFLOP_per_s"] =
      benchmark::Counter(2.0 * n * n * n / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_Summary(benchmark::State& state) {
  c10::InferenceMode guard;
  torch::manual_seed(0);
  GatedDeltaNet chunk(options("chunk"), 256), rec(options("recurrent"), 256);
  std::vector<TimedCase> cases;
  for (int64_t T : {512, 2048, 8192}) {
    const std::string s = std::to_string(T);
    const torch::Tensor x = torch::randn({1, T, 256}), pos = torch::arange(T);
    // The kernels alone, with the shapes they get inside the layer (4 heads, d_k 64, d_v 128).
    // The tensor form is what training differentiates through; here it records no graph.
    const torch::Tensor q = hybridlab::l2_normalize(torch::randn({1, 4, T, 64}));
    const torch::Tensor k = hybridlab::l2_normalize(torch::randn({1, 4, T, 64}));
    const torch::Tensor v = torch::randn({1, 4, T, 128});
    const torch::Tensor g = torch::log_sigmoid(torch::randn({1, 4, T}));
    const torch::Tensor beta = torch::sigmoid(torch::randn({1, 4, T}));
    cases.push_back({"chunk/" + s, [&chunk, x, pos] { chunk.forward(x, pos, nullptr); }});
    cases.push_back({"recurrent/" + s, [&rec, x, pos] { rec.forward(x, pos, nullptr); }});
    cases.push_back({"kchunk/" + s, [=] {
                       hybridlab::chunk_gated_delta_rule_cpu(q, k, v, g, beta, 0.125, {}, 64);
                     }});
    cases.push_back({"ktensor/" + s, [=] {
                       hybridlab::chunk_gated_delta_rule_torch(q, k, v, g, beta, 0.125, {}, 64);
                     }});
    cases.push_back({"krecurrent/" + s,
                     [=] { hybridlab::recurrent_gated_delta_rule(q, k, v, g, beta, 0.125); }});
  }
  const torch::Tensor a = torch::randn({1024, 1024}), b = torch::randn({1024, 1024});
  cases.push_back({"sgemm", [&] { torch::mm(a, b); }});
  time_in_rounds(cases, 7);
  std::map<std::string, double> t;
  for (const auto& c : cases) t[c.name] = c.best;
  const double sgemm_gflops = 2.0 * 1024 * 1024 * 1024 / t["sgemm"] / 1e9;
  const double chunk_gflops = chunk.info(8192).flops_per_token * 8192 / t["chunk/8192"] / 1e9;
  for (auto _ : state) benchmark::DoNotOptimize(sgemm_gflops);
  for (int64_t T : {512, 2048, 8192}) {
    const std::string s = std::to_string(T);
    state.counters["speedup_T" + s] = t["recurrent/" + s] / t["chunk/" + s];
    state.counters["chunk_ms_T" + s] = 1e3 * t["chunk/" + s];
    state.counters["recurrent_ms_T" + s] = 1e3 * t["recurrent/" + s];
    state.counters["kernel_speedup_T" + s] = t["krecurrent/" + s] / t["kchunk/" + s];
    state.counters["tensor_form_kernel_speedup_T" + s] = t["krecurrent/" + s] / t["ktensor/" + s];
    state.counters["kernel_chunk_ms_T" + s] = 1e3 * t["kchunk/" + s];
    state.counters["kernel_recurrent_ms_T" + s] = 1e3 * t["krecurrent/" + s];
  }
  state.counters["linearity_8192_over_2048"] = t["chunk/8192"] / t["chunk/2048"];
  state.counters["kernel_linearity_8192_over_2048"] = t["kchunk/8192"] / t["kchunk/2048"];
  state.counters["chunk_GFLOP_per_s_T8192"] = chunk_gflops;
  state.counters["sgemm_GFLOP_per_s"] = sgemm_gflops;
  state.counters["chunk_fraction_of_sgemm"] = chunk_gflops / sgemm_gflops;
}

void BM_TrainSummary(benchmark::State& state) {
  torch::manual_seed(0);
  std::vector<TimedCase> cases;
  for (int64_t T : {512, 2048, 8192}) {
    const std::string s = std::to_string(T);
    // Kernel inputs with the layer's shapes (4 heads, d_k 64, d_v 128) and an initial state, all
    // requiring grad; fixed output gradients.
    auto leaf = [](torch::Tensor t) { return t.requires_grad_(true); };
    const torch::Tensor q = leaf(hybridlab::l2_normalize(torch::randn({1, 4, T, 64})));
    const torch::Tensor k = leaf(hybridlab::l2_normalize(torch::randn({1, 4, T, 64})));
    const torch::Tensor v = leaf(torch::randn({1, 4, T, 128}));
    const torch::Tensor g = leaf(torch::log_sigmoid(torch::randn({1, 4, T})));
    const torch::Tensor beta = leaf(torch::sigmoid(torch::randn({1, 4, T})));
    const torch::Tensor h0 = leaf(torch::randn({1, 4, 64, 128}));
    const torch::Tensor d_o = torch::randn({1, 4, T, 128}), d_h = torch::randn({1, 4, 64, 128});
    auto train = [=](bool fused) {
      const auto r = fused ? hybridlab::chunk_gated_delta_rule_fused(q, k, v, g, beta, 0.125, h0)
                           : hybridlab::chunk_gated_delta_rule_torch(q, k, v, g, beta, 0.125, h0);
      torch::autograd::grad({r.o, r.state}, {q, k, v, g, beta, h0}, {d_o, d_h});
    };
    cases.push_back({"fused/" + s, [=] { train(true); }});
    cases.push_back({"tensor/" + s, [=] { train(false); }});
  }
  time_in_rounds(cases, 5);
  std::map<std::string, double> t;
  for (const auto& c : cases) t[c.name] = c.best;
  for (auto _ : state) benchmark::DoNotOptimize(t.size());
  for (int64_t T : {512, 2048, 8192}) {
    const std::string s = std::to_string(T);
    state.counters["fused_train_speedup_T" + s] = t["tensor/" + s] / t["fused/" + s];
    state.counters["fused_train_ms_T" + s] = 1e3 * t["fused/" + s];
    state.counters["tensor_train_ms_T" + s] = 1e3 * t["tensor/" + s];
  }
}

}  // namespace

BENCHMARK_CAPTURE(BM_GdnForward, chunk, std::string("chunk"))
    ->Arg(512)
    ->Arg(2048)
    ->Arg(8192)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_GdnForward, recurrent, std::string("recurrent"))
    ->Arg(512)
    ->Arg(2048)
    ->Arg(8192)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Sgemm)->Arg(1024)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Summary)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TrainSummary)->Iterations(1)->Unit(benchmark::kMillisecond);
