// One-token decoding with the DecodeCache after a context of 1K, 8K and 32K tokens, for an
// all-attention ("AAAA"), an all-Gated-DeltaNet ("GGGG") and a hybrid ("GGGA", Qwen3-Next's 3:1)
// model of d_model 64 (attention: 2 heads of 32, RoPE; Gated DeltaNet: 2 heads of 32,
// expand_v 2), batch 1, under InferenceMode on one core (HYBRIDLAB_BENCH_THREADS changes that).
// The context is prefilled once, outside the timing; each iteration is one decoding step.
// Counters: tokens_per_s (decoding steps per second), cache_bytes (the DecodeCache's tensors
// after the context: memory per sequence beyond the weights), cache_bytes_per_token.
// Attention's cache grows with the context (K and V of every token and layer); Gated DeltaNet's
// is a fixed-size state, so its decoding step costs the same at every length.

#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <memory>
#include <string>

#include "hybridlab/config.h"
#include "hybridlab/model.h"
#include "hybridlab/plugin_host.h"

namespace {

std::shared_ptr<hybridlab::LanguageModel> decode_model(const std::string& layers, int64_t T,
                                                       hybridlab::PluginHost& host) {
  hybridlab::Config cfg = hybridlab::Config::parse(
      "model:\n  d_model: 64\n  vocab_size: 256\n  layers: " + layers +
          "\n  attention: {n_heads: 2, block_size: 512, position: {scheme: rope}}\n"
          "  gated_deltanet: {n_heads: 2, head_dim: 32, expand_v: 2, chunk_size: 64}\n",
      "decode.yaml");
  auto opts = hybridlab::read_model_options(cfg.section("model"));
  cfg.raise_errors();
  torch::manual_seed(0);
  auto model = hybridlab::build_model(*opts, host, {T, T + 1024});
  model->eval();
  return model;
}

void BM_DecodeStep(benchmark::State& state, const std::string& layers) {
  const int64_t T = state.range(0);
  hybridlab::PluginHost host({HYBRIDLAB_TEST_PLUGIN_DIR});
  auto model = decode_model(layers, T, host);
  c10::InferenceMode guard;
  auto cache = model->new_cache();
  torch::Tensor logits = model->forward(torch::randint(0, 256, {1, T}), *cache);  // prefill
  const int64_t cache_bytes = cache->nbytes();
  torch::Tensor next = logits.select(1, T - 1).argmax(-1, true);  // [1,1]
  for (auto _ : state) {
    logits = model->forward(next, *cache);
    next = logits.select(1, 0).argmax(-1, true);
    benchmark::DoNotOptimize(next.data_ptr<int64_t>());
  }
  state.counters["tokens_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["cache_bytes"] = static_cast<double>(cache_bytes);
  state.counters["cache_bytes_per_token"] = static_cast<double>(cache_bytes) / T;
}

}  // namespace

// 64 steps each: a few seconds of decoding; the 32K prefill of attention dominates the run.
BENCHMARK_CAPTURE(BM_DecodeStep, attention_AAAA, std::string("AAAA"))
    ->Arg(1024)
    ->Arg(8192)
    ->Arg(32768)
    ->Iterations(64)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_DecodeStep, gated_deltanet_GGGG, std::string("GGGG"))
    ->Arg(1024)
    ->Arg(8192)
    ->Arg(32768)
    ->Iterations(64)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_DecodeStep, hybrid_GGGA, std::string("GGGA"))
    ->Arg(1024)
    ->Arg(8192)
    ->Arg(32768)
    ->Iterations(64)
    ->Unit(benchmark::kMillisecond);
