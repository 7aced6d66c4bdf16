// Cost of going through the plugin interface: RoPE rotate and ALiBi logit_bias through the
// loaded plugins vs the same math written directly here (the "built-in" baseline).
//
// Each benchmark times the plugin call in the benchmark loop and, after it, the direct version
// for the same number of iterations; the counter plugin_over_direct is their time ratio
// (1.0 = no overhead from the plugin boundary).
//
// Run: build/bin/bench_position_dispatch [--benchmark_filter=Rope]

#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>

#include "hybridlab/config.h"
#include "hybridlab/plugin_host.h"

namespace {

using Clock = std::chrono::steady_clock;

hybridlab::PluginHost& host() {
  static hybridlab::PluginHost h({HYBRIDLAB_TEST_PLUGIN_DIR});
  return h;
}

std::shared_ptr<hybridlab::PositionScheme> load(const std::string& name, int64_t heads,
                                                int64_t head_dim) {
  hybridlab::PositionContext ctx;
  ctx.n_heads = ctx.n_kv_heads = heads;
  ctx.head_dim = head_dim;
  ctx.d_model = heads * head_dim;
  ctx.train_length = ctx.max_length = 8192;
  hybridlab::Config cfg = hybridlab::Config::parse("position: {}\n", "bench");
  hybridlab::Section params = cfg.section("position");
  return host().create(name, params, ctx);
}

// Direct RoPE (half layout, base 10000, full rotary dim): the textbook HF formula.
std::pair<torch::Tensor, torch::Tensor> direct_rope(const torch::Tensor& q, const torch::Tensor& k,
                                                    const torch::Tensor& pos) {
  const int64_t d = q.size(-1), h = d / 2;
  const torch::Tensor inv =
      1.0 / torch::pow(10000.0, torch::arange(0, d, 2, torch::kDouble) / double(d));
  const torch::Tensor angle = pos.to(torch::kDouble).unsqueeze(1) * inv.unsqueeze(0);
  const torch::Tensor c = angle.cos().to(q.dtype()), s = angle.sin().to(q.dtype());
  auto rot = [&](const torch::Tensor& x) {
    const torch::Tensor a = x.narrow(-1, 0, h), b = x.narrow(-1, h, h);
    return torch::cat({a * c - b * s, b * c + a * s}, -1);
  };
  return {rot(q), rot(k)};
}

// Direct ALiBi: -m_h·(i − j), m_h = 2^(−8h/H) for H a power of two.
torch::Tensor direct_alibi(const torch::Tensor& slopes, const torch::Tensor& qp,
                           const torch::Tensor& kp) {
  const torch::Tensor dist = (qp.unsqueeze(1) - kp.unsqueeze(0)).to(torch::kFloat);
  return -slopes.view({-1, 1, 1}) * dist.unsqueeze(0);
}

template <class F>
double seconds_for(int64_t iterations, F&& f) {
  const auto t0 = Clock::now();
  for (int64_t i = 0; i < iterations; ++i) f();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

void BM_RopeRotate(benchmark::State& state) {
  torch::InferenceMode guard;
  const int64_t t = state.range(0), heads = 8, dh = 64;
  auto rope = load("rope", heads, dh);
  const torch::Tensor q = torch::randn({1, heads, t, dh}), k = torch::randn({1, heads, t, dh});
  const torch::Tensor pos = torch::arange(t, torch::kLong);
  if (!torch::allclose(rope->rotate(q, k, pos, pos).first, direct_rope(q, k, pos).first, 1e-5,
                       1e-5)) {
    state.SkipWithError("plugin and direct RoPE disagree");
    return;
  }
  int64_t n = 0;
  const auto t0 = Clock::now();
  for (auto _ : state) {
    benchmark::DoNotOptimize(rope->rotate(q, k, pos, pos));
    ++n;
  }
  const double plugin = std::chrono::duration<double>(Clock::now() - t0).count();
  const double direct = seconds_for(n, [&] { benchmark::DoNotOptimize(direct_rope(q, k, pos)); });
  state.counters["plugin_over_direct"] = plugin / direct;
  state.counters["tokens/s"] =
      benchmark::Counter(double(t) * double(n), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_RopeRotate)->Arg(1)->Arg(128)->Arg(1024)->Unit(benchmark::kMicrosecond);

void BM_AlibiBias(benchmark::State& state) {
  torch::InferenceMode guard;
  const int64_t t = state.range(0), heads = 8;
  auto alibi = load("alibi", heads, 64);
  std::vector<float> m;
  for (int h = 1; h <= heads; ++h) m.push_back(std::exp2(-8.0f * float(h) / float(heads)));
  const torch::Tensor slopes = torch::tensor(m);
  const torch::Tensor pos = torch::arange(t, torch::kLong);
  if (!torch::allclose(alibi->logit_bias(pos, pos), direct_alibi(slopes, pos, pos))) {
    state.SkipWithError("plugin and direct ALiBi disagree");
    return;
  }
  int64_t n = 0;
  const auto t0 = Clock::now();
  for (auto _ : state) {
    benchmark::DoNotOptimize(alibi->logit_bias(pos, pos));
    ++n;
  }
  const double plugin = std::chrono::duration<double>(Clock::now() - t0).count();
  const double direct =
      seconds_for(n, [&] { benchmark::DoNotOptimize(direct_alibi(slopes, pos, pos)); });
  state.counters["plugin_over_direct"] = plugin / direct;
}
BENCHMARK(BM_AlibiBias)->Arg(1)->Arg(128)->Arg(1024)->Unit(benchmark::kMicrosecond);

}  // namespace
