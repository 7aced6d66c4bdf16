// The cost of packed documents (task.packing: documents): one training step (forward and
// backward of the whole model) on packed rows against the same rows as plain sequences, for the
// example's layer graph of every mixer letter (MGDKA, d_model 64: experiments/examples/
// packed_documents_small.yaml) at B = 8, T = 256, one thread. The layer graph runs each document of
// a packed row as its own row (model/packed_documents.h), so the cost is the gather/scatter around
// every mixer, one mixer call per group of pieces and the padding of each piece to its group's
// longest. Cases, in interleaved rounds, best call each:
//   no_boundary  packed rows without a boundary (the gather/scatter alone)
//   one_row      one row of the 8 holds a boundary (12.5% of rows; Brown at 256 bytes: about 2%)
//   every_row    every row holds one boundary at a uniform position (twice as many pieces)
// Counters: the time of each relative to plain rows (`<case>_over_plain`; 1 = as fast).

#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <limits>
#include <map>
#include <string>

#include "hybridlab/model.h"
#include "hybridlab/plugin_host.h"
#include "model/model_options.h"

namespace {

constexpr int64_t kBatch = 8, kLength = 256;

double step_seconds(const std::function<torch::Tensor()>& forward, torch::nn::Module& model) {
  const auto t0 = std::chrono::steady_clock::now();
  model.zero_grad();
  forward().logsumexp(-1).mean().backward();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void BM_PackedDocumentsStep(benchmark::State& state) {
  using namespace hybridlab;
  Config cfg = Config::parse(
      "model: {d_model: 64, vocab_size: 256, layers: MGDKA,\n"
      "        attention: {n_heads: 4, position: {scheme: nope}, use_short_conv: true},\n"
      "        gated_deltanet: {n_heads: 2, expand_v: 1}, deltanet: {num_heads: 2},\n"
      "        mamba2: {d_state: 16, headdim: 16, chunk_size: 64}, kda: {num_heads: 2}}\n"
      "plugins: {paths: ['" HYBRIDLAB_TEST_PLUGIN_DIR "']}\n",
      "bench.yaml");
  auto opts = read_model_options(cfg.section("model"));
  cfg.raise_errors();
  PluginHost host({HYBRIDLAB_TEST_PLUGIN_DIR});
  host.discover();
  torch::manual_seed(0);
  auto model = build_model(*opts, host, ModelBuildContext(kLength, kLength, "bench"));
  const torch::Tensor tokens = torch::randint(0, 256, {kBatch, kLength});
  const torch::Tensor none = torch::zeros({kBatch, kLength}, torch::kBool);
  torch::Tensor one = none.clone(), every = none.clone();
  one[0][kLength / 3] = true;
  const torch::Tensor cut = torch::randint(1, kLength, {kBatch});
  for (int64_t b = 0; b < kBatch; ++b) every[b][cut[b].item<int64_t>()] = true;
  const std::map<std::string, std::function<torch::Tensor()>> cases = {
      {"plain", [&] { return model->forward(tokens); }},
      {"no_boundary", [&] { return model->forward_packed(tokens, none); }},
      {"one_row", [&] { return model->forward_packed(tokens, one); }},
      {"every_row", [&] { return model->forward_packed(tokens, every); }}};
  std::map<std::string, double> best;
  for (const auto& [name, f] : cases) best[name] = std::numeric_limits<double>::infinity();
  for (auto _ : state) {
    for (const auto& [name, f] : cases) best[name] = std::min(best[name], step_seconds(f, *model));
  }
  state.counters["plain_tokens_per_s"] = kBatch * kLength / best["plain"];
  for (const auto& [name, t] : best) {
    if (name != "plain") state.counters[name + "_over_plain"] = t / best["plain"];
  }
}
BENCHMARK(BM_PackedDocumentsStep)->Iterations(8)->Unit(benchmark::kMillisecond);

}  // namespace
