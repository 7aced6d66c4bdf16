// Training cost of attention, the dense per-block path against the tiled FlashAttention-2 path
// (layers/kernels/attention_tiled.h): d_model 256, 4 heads of 64, causal, batch 1, fp32, one core.
//
// BM_AttentionTrainTime/T/scheme: forward + backward of the whole layer (x requires grad) by each
//   path; BM_AttendTrainTime/T/scheme: the same for Attention::attend alone (q, k, v require
//   grad), the figures the crossovers Attention::kTiledMinQueries(Relative) come from (scheme 0
//   nope, 1 t5, 2 shaw, from the build tree's plugins). Both paths are timed in interleaved
//   rounds, each keeping its best call (a shared machine's other tenants come and go for seconds),
//   and reported as counters dense_ms, tiled_ms and tiled_over_dense.
// BM_StickBreakingTrainTime/T/0: the same for the layer with stick-breaking weights (NoPE): the
//   fused dense rows against stick_breaking_attention_tiled, the crossover
//   Attention::kTiledMinQueriesStickBreaking comes from.
// BM_TileSweep/tile_q/tile_k: attend's tiled forward + backward at T = 2048 for tile shapes.
// BM_DataBiasCost/T: the attention layer's training step (x requires grad, the tiled path) with
//   FoX's data-dependent forget-gate bias against ALiBi's static bias at the same shape, in
//   interleaved rounds (best call of each) and the ratio fox_over_alibi; the graph's heap bytes
//   after FoX's forward (fox_graph_MiB) say whether any [T,T] tensor is kept.
// BM_DenseRowCost/T/variant: the attention layer's training step (x requires grad) with a
//   variant that needs each query's whole row, on the dense path (variant 0 stick-breaking
//   weights with NoPE, 1 CoPE's content_bias) against softmax NoPE (the path kAuto picks), in
//   interleaved rounds (best call of each), the ratio variant_over_softmax and the graph's heap
//   bytes after the variant's forward (variant_graph_MiB).
// BM_PathCost/T: the attention layer's training step with PaTH (NoPE) against RoPE attention, each
//   on the path kAuto picks (PaTH: the dense path), in interleaved rounds (best call of each), the
//   ratio path_over_rope and the heap bytes PaTH's graph holds after its forward (path_graph_MiB).
// BM_PathRecompute/T: PaTH's training step with the dense query blocks kept for the backward
//   against recomputed in it (layers/kernels/recompute.h), time and graph heap bytes of each.
// BM_ShortConvCost/T: the attention layer and a one-layer model with and without its short
//   convolution at d_model 64 (the cost of attention.use_short_conv, Zoology's convolution before
//   the mixer).
// BM_AttentionTrainMemory/path/level/T (path 0 dense, 1 tiled; level 0 attend, 1 layer): the heap
//   bytes the autograd graph holds after the forward (glibc mallinfo2, in use after minus before,
//   the leaves already allocated: the saved tensors and the output) and the process's peak RSS
//   (VmHWM) after the backward, with the RSS before. VmHWM is per process: run one case per
//   process (--benchmark_filter) for a clean figure.

#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <malloc.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <memory>
#include <string>

#include "bench/support/peak_rss.h"
#include "hybridlab/config.h"
#include "hybridlab/experiment.h"
#include "hybridlab/model.h"
#include "hybridlab/plugin_host.h"
#include "hybridlab/position.h"
#include "layers/attention.h"
#include "layers/kernels/attention_tiled.h"

namespace {

using hybridlab::AttendPath;
using hybridlab::Attention;

constexpr int64_t kDModel = 256, kHeads = 4, kHeadDim = 64;

// The positional schemes the timings cover: none, a learned logit bias, relative tables.
const char* const kSchemes[] = {"nope", "t5", "shaw"};

// An attention layer of the bench's shape (d_model 256, 4 heads of 64) with the scheme `name` of
// the build tree's plugins at its default settings, told the training length `train_length`.
std::shared_ptr<Attention> layer_with(const std::string& name, bool stick_breaking = false,
                                      int64_t train_length = 0, bool path = false) {
  hybridlab::AttentionOptions o;
  o.n_heads = kHeads;
  o.head_dim = kHeadDim;
  if (stick_breaking) o.normalization = hybridlab::AttentionNormalization::kStickBreaking;
  o.path = path;
  static hybridlab::PluginHost host({HYBRIDLAB_TEST_PLUGIN_DIR});
  hybridlab::PositionContext ctx;
  ctx.d_model = kDModel;
  ctx.n_heads = kHeads;
  ctx.n_kv_heads = kHeads;
  ctx.head_dim = kHeadDim;
  ctx.train_length = train_length;
  hybridlab::Config cfg = hybridlab::Config::parse("{}", "attention_train.yaml");
  hybridlab::Section params = cfg.root();
  return std::make_shared<Attention>(o, kDModel, host.create(name, params, ctx), true);
}

std::shared_ptr<Attention> make_layer(int scheme_index = 0, bool stick_breaking = false) {
  return layer_with(kSchemes[scheme_index], stick_breaking);
}

// Heap bytes in use (small blocks and mmapped ones).
double heap_in_use_mib() {
  const struct mallinfo2 m = mallinfo2();
  return static_cast<double>(m.uordblks + m.hblkhd) / (1024.0 * 1024.0);
}

// The leaves of one training step at length T: level 0 q, k, v [1,H,T,Dh] for attend(); level 1
// x [1,T,d_model] for the layer.
std::vector<torch::Tensor> make_leaves(int64_t T, int level) {
  if (level == 1) return {torch::randn({1, T, kDModel}).requires_grad_()};
  return {torch::randn({1, kHeads, T, kHeadDim}).requires_grad_(),
          torch::randn({1, kHeads, T, kHeadDim}).requires_grad_(),
          torch::randn({1, kHeads, T, kHeadDim}).requires_grad_()};
}

// One training step's attention work on `leaves` (make_leaves). `between` runs after the forward,
// before the backward (while the graph is alive).
void train_step(Attention& att, const std::vector<torch::Tensor>& leaves,
                const std::function<void()>& between = {}) {
  const int64_t T = leaves[0].size(leaves.size() == 1 ? 1 : 2);
  const torch::Tensor pos = torch::arange(T);
  const torch::Tensor out = leaves.size() == 1 ? att.forward(leaves[0], pos, nullptr)
                                               : att.attend(leaves[0], leaves[1], leaves[2], pos,
                                                            pos, att.options().block_size);
  if (between) between();
  out.backward(torch::ones_like(out));
  benchmark::DoNotOptimize(leaves[0].grad().data_ptr());
}

// Times dense and tiled in interleaved rounds; best call of each, in ms.
void time_paths(benchmark::State& state, int level, bool stick_breaking = false) {
  const int64_t T = state.range(0);
  torch::manual_seed(0);
  auto att = make_layer(static_cast<int>(state.range(1)), stick_breaking);
  state.SetLabel(kSchemes[state.range(1)]);
  const int rounds = T >= 8192 ? 3 : (T >= 2048 ? 5 : 10);
  double best[2] = {1e30, 1e30};
  auto once = [&](AttendPath path) {
    att->set_attend_path(path);
    const std::vector<torch::Tensor> leaves = make_leaves(T, level);
    const auto start = std::chrono::steady_clock::now();
    train_step(*att, leaves);
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
        .count();
  };
  for (auto _ : state) {
    once(AttendPath::kDense);  // warm-up
    once(AttendPath::kTiled);
    for (int r = 0; r < rounds; ++r) {
      best[0] = std::min(best[0], once(AttendPath::kDense));
      best[1] = std::min(best[1], once(AttendPath::kTiled));
    }
  }
  state.counters["dense_ms"] = best[0];
  state.counters["tiled_ms"] = best[1];
  state.counters["tiled_over_dense"] = best[1] / best[0];
}

void BM_AttentionTrainTime(benchmark::State& state) { time_paths(state, 1); }
void BM_AttendTrainTime(benchmark::State& state) { time_paths(state, 0); }
void BM_StickBreakingTrainTime(benchmark::State& state) { time_paths(state, 1, true); }

void BM_TileSweep(benchmark::State& state) {
  const int64_t T = 2048;
  torch::manual_seed(0);
  const torch::Tensor q = torch::randn({1, kHeads, T, kHeadDim}).requires_grad_();
  const torch::Tensor k = torch::randn({1, kHeads, T, kHeadDim}).requires_grad_();
  const torch::Tensor v = torch::randn({1, kHeads, T, kHeadDim}).requires_grad_();
  const torch::Tensor pos = torch::arange(T);
  hybridlab::TiledAttentionOptions t;
  t.tile_q = state.range(0);
  t.tile_k = state.range(1);
  for (auto _ : state) {
    const torch::Tensor out = hybridlab::tiled_attention(q, k, v, pos, pos, nullptr, t);
    out.backward(torch::ones_like(out));
  }
}

void BM_AttentionTrainMemory(benchmark::State& state) {
  const AttendPath path = state.range(0) == 0 ? AttendPath::kDense : AttendPath::kTiled;
  const int level = static_cast<int>(state.range(1));
  const int64_t T = state.range(2);
  torch::manual_seed(0);
  auto att = make_layer();
  att->set_attend_path(path);
  double graph_mib = 0;
  const double rss_before = hybridlab::bench::peak_rss_gib();
  for (auto _ : state) {
    const std::vector<torch::Tensor> leaves = make_leaves(T, level);
    const double before = heap_in_use_mib();
    train_step(*att, leaves, [&] { graph_mib = heap_in_use_mib() - before; });
  }
  state.counters["graph_MiB"] = graph_mib;
  state.counters["peak_rss_GiB"] = hybridlab::bench::peak_rss_gib();
  state.counters["rss_before_GiB"] = rss_before;
}

// Training steps of two layers at length T in interleaved rounds (4 at T >= 2048, else 10): the
// best call of each in ms into best[], and the heap bytes the second layer's graph holds after
// its forward into graph_mib.
void best_layer_steps(const std::shared_ptr<Attention> (&layers)[2], int64_t T, double (&best)[2],
                      double& graph_mib) {
  for (int r = 0; r < (T >= 2048 ? 4 : 10); ++r) {
    for (int i = 0; i < 2; ++i) {
      const std::vector<torch::Tensor> leaves = make_leaves(T, 1);
      const double before = heap_in_use_mib();
      const auto start = std::chrono::steady_clock::now();
      train_step(*layers[i], leaves, [&] {
        if (i == 1) graph_mib = heap_in_use_mib() - before;
      });
      best[i] = std::min(best[i], std::chrono::duration<double, std::milli>(
                                      std::chrono::steady_clock::now() - start)
                                      .count());
    }
  }
}

// best_layer_steps over the benchmark's iterations, reported as counters <a>_ms, <b>_ms,
// <b>_over_<a> and <b>_graph_MiB.
void compare_layers(benchmark::State& state, const std::shared_ptr<Attention> (&layers)[2],
                    int64_t T, const std::string& a, const std::string& b) {
  double best[2] = {1e30, 1e30}, graph_mib = 0;
  for (auto _ : state) best_layer_steps(layers, T, best, graph_mib);
  state.counters[a + "_ms"] = best[0];
  state.counters[b + "_ms"] = best[1];
  state.counters[b + "_over_" + a] = best[1] / best[0];
  state.counters[b + "_graph_MiB"] = graph_mib;
}

void BM_DataBiasCost(benchmark::State& state) {
  const int64_t T = state.range(0);
  torch::manual_seed(0);
  std::shared_ptr<Attention> layers[2] = {layer_with("alibi"), layer_with("fox")};
  for (auto& layer : layers) layer->set_attend_path(AttendPath::kTiled);
  compare_layers(state, layers, T, "alibi", "fox");
}

// Attention whose rows must be complete (dense path only) against softmax NoPE attention on the
// path kAuto picks: variant 0 stick-breaking weights (NoPE), 1 CoPE (`cope`, its embeddings
// random so the term is not zero).
void BM_DenseRowCost(benchmark::State& state) {
  const int64_t T = state.range(0);
  const bool cope = state.range(1) == 1;
  torch::manual_seed(0);
  std::shared_ptr<Attention> layers[2] = {layer_with("nope"),
                                          layer_with(cope ? "cope" : "nope", !cope, T)};
  if (cope) {
    torch::NoGradGuard no_grad;
    for (auto& p : layers[1]->scheme()->parameters()) p.normal_();
  }
  state.SetLabel(cope ? "cope" : "stick_breaking");
  compare_layers(state, layers, T, "softmax", "variant");
}

// PaTH attention (NoPE, its transforms learned from the layer input) against RoPE attention on the
// path kAuto picks for each.
void BM_PathCost(benchmark::State& state) {
  const int64_t T = state.range(0);
  torch::manual_seed(0);
  std::shared_ptr<Attention> layers[2] = {layer_with("rope"), layer_with("nope", false, T, true)};
  compare_layers(state, layers, T, "rope", "path");
}

// PaTH's dense query blocks kept for the backward (AttendPath::kDense) against recomputed there
// (AttendPath::kTiled, the recompute path).
void BM_PathRecompute(benchmark::State& state) {
  const int64_t T = state.range(0);
  torch::manual_seed(0);
  std::shared_ptr<Attention> layers[2] = {layer_with("nope", false, T, true),
                                          layer_with("nope", false, T, true)};
  layers[0]->set_attend_path(AttendPath::kDense);
  layers[1]->set_attend_path(AttendPath::kTiled);
  double best[2] = {1e30, 1e30}, graph_mib = 0, kept_mib = 0;
  std::shared_ptr<Attention> swapped[2] = {layers[1], layers[0]};
  for (auto _ : state) {
    best_layer_steps(layers, T, best, graph_mib);
    double unused[2] = {1e30, 1e30};
    best_layer_steps(swapped, T, unused, kept_mib);  // the kept blocks' graph, measured alike
  }
  state.counters["kept_ms"] = best[0];
  state.counters["recomputed_ms"] = best[1];
  state.counters["recomputed_over_kept"] = best[1] / best[0];
  state.counters["kept_graph_MiB"] = kept_mib;
  state.counters["recomputed_graph_MiB"] = graph_mib;
}

// The short causal convolution on q, k, v (AttentionOptions::use_short_conv) at the quickstart's
// size: d_model 64, 4 heads of 16, batch 32 × T. Forward + backward with and without it, of the
// attention layer alone and of a one-layer model's training step (embedding, the pre-norm block
// with its SwiGLU MLP, the head and the loss), in interleaved rounds (best call of each), and the
// ratios.
void BM_ShortConvCost(benchmark::State& state) {
  const int64_t T = state.range(0), B = 32, D = 64;
  torch::manual_seed(0);
  static hybridlab::PluginHost host({HYBRIDLAB_TEST_PLUGIN_DIR});
  hybridlab::PositionContext ctx;
  ctx.d_model = D;
  ctx.n_heads = ctx.n_kv_heads = 4;
  ctx.head_dim = D / 4;
  hybridlab::Config cfg = hybridlab::Config::parse("{}", "short_conv.yaml");
  std::shared_ptr<Attention> layers[2];
  std::shared_ptr<hybridlab::LanguageModel> models[2];
  for (int conv = 0; conv < 2; ++conv) {
    hybridlab::AttentionOptions o;
    o.n_heads = 4;
    o.head_dim = D / 4;
    o.use_short_conv = conv == 1;
    hybridlab::Section params = cfg.root();
    layers[conv] = std::make_shared<Attention>(o, D, host.create("nope", params, ctx), true);
    const hybridlab::Experiment exp = hybridlab::read_experiment(hybridlab::Config::parse(
        fmt::format("model: {{d_model: {}, layers: A, attention: {{n_heads: 4, use_short_conv: "
                    "{}}}}}\ntask: {{name: mqar, vocab_size: 256, seq_len: {}, num_kv_pairs: 4}}\n",
                    D, conv ? "true" : "false", T),
        "short_conv.yaml"));
    models[conv] = hybridlab::build_model(*exp.model, host, hybridlab::model_build_context(exp));
    models[conv]->train();
  }
  const torch::Tensor pos = torch::arange(T);
  const torch::Tensor tokens = torch::randint(0, 256, {B, T});
  const auto timed = [](const std::function<void()>& f) {
    const auto start = std::chrono::steady_clock::now();
    f();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
        .count();
  };
  const auto layer_step = [&](Attention& att) {
    const torch::Tensor x = torch::randn({B, T, D}).requires_grad_();
    return timed([&] {
      const torch::Tensor out = att.forward(x, pos, nullptr);
      out.backward(torch::ones_like(out));
      benchmark::DoNotOptimize(x.grad().data_ptr());
    });
  };
  const auto model_step = [&](hybridlab::LanguageModel& m) {
    return timed([&] {
      const torch::Tensor logits = m.forward(tokens);
      const torch::Tensor loss =
          torch::nn::functional::cross_entropy(logits.reshape({-1, 256}), tokens.reshape({-1}));
      loss.backward();
      m.zero_grad();
    });
  };
  double layer[2] = {1e30, 1e30}, model[2] = {1e30, 1e30};
  for (auto _ : state) {
    for (int r = 0; r < 60; ++r) {
      for (int c = 0; c < 2; ++c) {
        layer[c] = std::min(layer[c], layer_step(*layers[c]));
        model[c] = std::min(model[c], model_step(*models[c]));
      }
    }
  }
  state.counters["layer_plain_ms"] = layer[0];
  state.counters["layer_conv_ms"] = layer[1];
  state.counters["layer_conv_over_plain"] = layer[1] / layer[0];
  state.counters["model_plain_ms"] = model[0];
  state.counters["model_conv_ms"] = model[1];
  state.counters["model_conv_over_plain"] = model[1] / model[0];
}

}  // namespace

BENCHMARK(BM_DataBiasCost)->Arg(512)->Arg(2048)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DenseRowCost)
    ->ArgsProduct({{256, 512, 2048}, {0, 1}})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PathCost)->Arg(512)->Arg(2048)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PathRecompute)->Arg(2048)->Arg(4096)->Iterations(1)->Unit(benchmark::kSecond);
BENCHMARK(BM_ShortConvCost)->Arg(64)->Arg(128)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AttendTrainTime)
    ->ArgsProduct({{128, 256, 512, 1024, 2048}, {0, 1, 2}})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);
// The relative hook's tiled backward is a per-tile autograd call: its crossover lies further out.
BENCHMARK(BM_AttendTrainTime)
    ->ArgsProduct({{3072, 4096}, {2}})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);
// Stick-breaking weights: the fused dense rows against stick_breaking_attention_tiled (NoPE).
BENCHMARK(BM_StickBreakingTrainTime)
    ->ArgsProduct({{512, 2048, 4096}, {0}})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AttentionTrainTime)
    ->ArgsProduct({{512, 2048, 8192}, {0}})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TileSweep)
    ->ArgsProduct({{64, 128, 256}, {64, 128, 256}})
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AttentionTrainMemory)
    ->ArgsProduct({{1, 0}, {0, 1}, {8192}})
    ->Iterations(1)
    ->Unit(benchmark::kSecond);
