// Peak resident memory of evaluating one 32K-token sequence through a 4-layer, d_model 256
// attention model (4 heads, NoPE, block_size 512) under InferenceMode: the query-block path must
// never materialise a [H,T,T] score tensor (that alone would be 16 GiB). Reports VmHWM from
// /proc/self/status before and after as counters (GiB).

#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <fstream>
#include <string>

#include "bench/support/peak_rss.h"
#include "hybridlab/config.h"
#include "hybridlab/model.h"
#include "hybridlab/plugin_host.h"

namespace {

void BM_AttentionPeakRss(benchmark::State& state) {
  const int64_t T = state.range(0);
  hybridlab::Config cfg = hybridlab::Config::parse(
      "model:\n  d_model: 256\n  vocab_size: 256\n  layers: AAAA\n"
      "  attention: {n_heads: 4, block_size: 512, position: {scheme: nope}}\n",
      "attention_memory.yaml");
  auto opts = hybridlab::read_model_options(cfg.section("model"));
  cfg.raise_errors();
  hybridlab::PluginHost host({HYBRIDLAB_TEST_PLUGIN_DIR});
  auto model = hybridlab::build_model(*opts, host, {T, T});
  model->eval();
  const torch::Tensor tokens = torch::randint(0, 256, {1, T});
  const double before = hybridlab::bench::peak_rss_gib();
  for (auto _ : state) {
    c10::InferenceMode guard;
    benchmark::DoNotOptimize(model->forward(tokens));
  }
  state.counters["peak_rss_GiB"] = hybridlab::bench::peak_rss_gib();
  state.counters["rss_before_GiB"] = before;
  state.counters["full_scores_would_be_GiB"] =
      4.0 * 4 * static_cast<double>(T) * T / (1024.0 * 1024 * 1024);
}

}  // namespace

BENCHMARK(BM_AttentionPeakRss)->Arg(32768)->Iterations(1)->Unit(benchmark::kSecond);
