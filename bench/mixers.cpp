// One training step (forward and backward) of each recurrent mixer at the same width: the built-in
// Gated DeltaNet (with and without negative eigenvalues) against the mixer plugins DeltaNet,
// Mamba2, Kimi Delta Attention and Gated DeltaProduct with 2 and 4 steps per token (chunked forms,
// the plugins from the build's plugin folder), at B = 4, T = 512, d_model 128, d_k 64.
// Interleaved rounds, best call per mixer (robust to a shared machine); BM_MixerTrainSummary
// reports tokens/s of each and its time relative to Gated DeltaNet (`vs_gdn_<name>`; 1 = as fast,
// 2 = twice as slow), so the ratios come from one run.

#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "hybridlab/plugin_host.h"
#include "layers/gated_deltanet.h"

namespace {

constexpr int64_t kBatch = 4, kLength = 512, kWidth = 128;

// name -> mixer, all of width kWidth with key heads of 64.
std::vector<std::pair<std::string, std::shared_ptr<hybridlab::Mixer>>> mixers(
    hybridlab::PluginHost& host) {
  std::vector<std::pair<std::string, std::shared_ptr<hybridlab::Mixer>>> out;
  hybridlab::GatedDeltaNetOptions g;
  g.n_heads = 2;
  g.head_dim = 64;
  g.expand_v = 1.0;
  out.emplace_back("gated_deltanet", std::make_shared<hybridlab::GatedDeltaNet>(g, kWidth));
  g.allow_neg_eigval = true;  // β ∈ (0, 2): the same kernels, so the same time
  out.emplace_back("gated_deltanet_neg", std::make_shared<hybridlab::GatedDeltaNet>(g, kWidth));
  struct Plugin {
    std::string label, name, yaml;
  };
  const std::vector<Plugin> plugins = {
      {"deltanet", "deltanet", "{num_heads: 2}"},
      {"mamba2", "mamba2", "{d_state: 64, headdim: 64, chunk_size: 64}"},
      {"kda", "kda", "{num_heads: 2}"},
      {"deltaproduct_nh2", "gated_deltaproduct", "{num_heads: 2, expand_v: 1}"},
      {"deltaproduct_nh4", "gated_deltaproduct",
       "{num_heads: 2, expand_v: 1, num_householder: 4}"}};
  hybridlab::MixerContext ctx;
  ctx.d_model = kWidth;
  ctx.train_length = ctx.max_length = kLength;
  for (const Plugin& p : plugins) {
    hybridlab::Config cfg = hybridlab::Config::parse(p.yaml, "bench.yaml");
    hybridlab::Section params = cfg.root();
    out.emplace_back(p.label, host.create_mixer(p.name, params, ctx));
  }
  return out;
}

// Seconds of one forward and backward of `m` on `x`.
double train_step_seconds(hybridlab::Mixer& m, const torch::Tensor& x, const torch::Tensor& pos) {
  const auto t0 = std::chrono::steady_clock::now();
  m.zero_grad();
  m.forward(x, pos, nullptr).pow(2).mean().backward();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void BM_MixerTrainSummary(benchmark::State& state) {
  hybridlab::PluginHost host({HYBRIDLAB_TEST_PLUGIN_DIR});
  torch::manual_seed(0);
  auto all = mixers(host);
  const torch::Tensor x = torch::randn({kBatch, kLength, kWidth});
  const torch::Tensor pos = torch::arange(kLength);
  std::map<std::string, double> best;
  for (auto _ : state) {
    for (int round = 0; round < 3; ++round) {
      for (auto& [name, m] : all) {
        const double s = train_step_seconds(*m, x, pos);
        auto [it, fresh] = best.emplace(name, s);
        if (!fresh) it->second = std::min(it->second, s);
      }
    }
  }
  const double tokens = static_cast<double>(kBatch * kLength);
  for (const auto& [name, s] : best) {
    state.counters["tokens_per_s_" + name] = tokens / s;
    state.counters["vs_gdn_" + name] = s / best.at("gated_deltanet");
  }
}
BENCHMARK(BM_MixerTrainSummary)->Iterations(2)->Unit(benchmark::kMillisecond);

}  // namespace
