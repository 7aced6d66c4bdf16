// Training throughput of the quickstart model (GGGA, d_model 64, RoPE in the attention layer,
// batch 8 x 128 bytes, one thread) through the real trainer, and the share of the step time spent
// outside the model's forward and backward (data, loss, clipping, AdamW, metrics.jsonl, progress,
// checkpoint at the end). Target: outside share < 15%.
//
//   build/bin/bench_train_step            (counters: tokens_per_s, outside_share)
//
// BM_TrainStepS and BM_TrainStepM train two fixed models on synthetic text through the same
// trainer, once with the fused CPU kernels and once with `model.fused_kernels: false` (every
// layer in its LibTorch tensor forms), in interleaved rounds keeping each
// side's best run:
//   S: d_model 64, GGGA, 2 heads (RoPE), Gated DeltaNet head_dim 32 expand_v 1, SwiGLU 192,
//      batch 8 × 128
//   M: d_model 128, GGGA × 2, 4 heads (RoPE), Gated DeltaNet head_dim 32 expand_v 2, SwiGLU 512,
//      batch 8 × 512
// Counters: steady-state tokens_per_s (the steps after the first) and GFLOP_per_s of both
// (training FLOPs = 3 × the model summary's forward FLOPs per token), the fused one's fraction of
// this machine's sgemm GFLOP/s measured in the same run with the same threads, fused_over_unfused
// (the speed ratio) and, on one thread with two cores present, two_threads_over_one (the fused
// model trained on two threads in the same rounds). Threads: HYBRIDLAB_BENCH_THREADS (default 1).

#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <torch/torch.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "hybridlab/experiment.h"
#include "hybridlab/model.h"
#include "hybridlab/plugin_host.h"
#include "hybridlab/runtime.h"
#include "hybridlab/trainer.h"

namespace fs = std::filesystem;
using namespace hybridlab;

namespace {

// A small synthetic corpus (the bench must not depend on data/brown being fetched).
fs::path make_corpus() {
  const fs::path dir =
      fs::temp_directory_path() / ("hybridlab_bench_corpus_" + std::to_string(::getpid()));
  const char* words[] = {"the",      "grand",         "jury", "said",     "friday",
                         "an",       "investigation", "of",   "recent",   "primary",
                         "election", "produced",      "no",   "evidence", "that"};
  for (int d = 0; d < 6; ++d) {
    const fs::path f =
        dir / (d < 5 ? "train" : "validation") / ("doc" + std::to_string(d) + ".txt");
    fs::create_directories(f.parent_path());
    std::ofstream out(f);
    for (int i = 0; i < 4000; ++i)
      out << words[(i * 7 + d * 3 + i / 5) % 15] << (i % 12 == 11 ? ".\n" : " ");
  }
  return dir;
}

void run(benchmark::State& state, const std::string& task_yaml) {
  const fs::path corpus = make_corpus();
  std::string yaml =
      "model: {d_model: 64, vocab_size: 256, layers: GGGA,\n"
      "        attention: {n_heads: 2, position: {scheme: rope}},\n"
      "        gated_deltanet: {n_heads: 2, expand_v: 1, chunk_size: 64}}\n"
      "task: " +
      task_yaml +
      "\n"
      "train: {steps: 20, batch_size: 8, lr: 0.004, warmup_steps: 2, checkpoint_every: 0, "
      "log_every: 10}\n"
      "eval: {lengths: [128]}\n"
      "plugins: {paths: ['" HYBRIDLAB_TEST_PLUGIN_DIR "']}\n";
  const size_t at = yaml.find("CORPUS");
  if (at != std::string::npos) yaml.replace(at, 6, corpus.string());
  const Experiment exp = read_experiment(Config::parse(yaml, "bench.yaml"));
  auto host = make_plugin_host(exp.config);
  exp.task->prepare({128});
  double tokens = 0, wall = 0, model = 0;
  int round = 0;
  for (auto _ : state) {
    const fs::path dir =
        fs::temp_directory_path() /
        ("hybridlab_bench_run_" + std::to_string(::getpid()) + "_" + std::to_string(round++));
    auto m = build_model(*exp.model, *host, ModelBuildContext{128, 128});
    TrainerHooks quiet;
    quiet.quiet = true;
    const TrainSummary s = train(*m, *exp.task, exp, RunFolder(dir.string()), quiet);
    tokens += s.tokens_per_s * s.wall_s;
    wall += s.wall_s;
    model += s.model_s;
    state.SetIterationTime(s.wall_s);
    fs::remove_all(dir);
  }
  fs::remove_all(corpus);
  state.counters["tokens_per_s"] = tokens / wall;
  state.counters["outside_share"] = 1.0 - model / wall;
}

void BM_TrainStepText(benchmark::State& state) {
  run(state, "{name: text, seq_len: 128, path: 'CORPUS'}");
}
void BM_TrainStepMqar(benchmark::State& state) {
  run(state, "{name: mqar, seq_len: 128, vocab_size: 64, num_kv_pairs: 4}");
}

struct StepConfig {
  std::string model;  // the model: section
  int64_t seq_len;
  int64_t steps;  // per timed run (after one warm-up step's worth of runs)
};

const StepConfig kConfigS{
    "{d_model: 64, vocab_size: 256, layers: GGGA,\n"
    "        attention: {n_heads: 2, position: {scheme: rope}},\n"
    "        gated_deltanet: {n_heads: 2, head_dim: 32, expand_v: 1, chunk_size: 64}}",
    128, 12};
const StepConfig kConfigM{
    "{d_model: 128, vocab_size: 256, layers: {pattern: GGGA, repeat: 2},\n"
    "        attention: {n_heads: 4, position: {scheme: rope}}, mlp: {intermediate_size: 512},\n"
    "        gated_deltanet: {n_heads: 4, head_dim: 32, expand_v: 2, chunk_size: 64}}",
    512, 5};

// Steady-state tokens/s of a run: all tokens over all time of the steps after the first, from
// its metrics.jsonl. The first step first-touches the process's working memory (about 1 GB of
// page faults on M, a one-off cost that is mostly serial) and would weigh on a short run's mean.
double steady_tokens_per_s(const fs::path& run_dir) {
  std::ifstream in(run_dir / "metrics.jsonl");
  std::string line;
  double inv_sum = 0;
  int n = 0;
  while (std::getline(in, line)) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("tokens_per_s") || j.value("step", 0) < 2) continue;
    inv_sum += 1.0 / j["tokens_per_s"].get<double>();
    ++n;
  }
  if (n == 0) throw std::runtime_error("bench: no steady-state step in " + run_dir.string());
  return n / inv_sum;
}

// One training run of `steps` steps on `threads` intra-op threads (LibTorch's and OpenBLAS's);
// returns {steady-state tokens/s, forward FLOPs per token}.
std::pair<double, double> train_once(const StepConfig& c, bool fused, const fs::path& corpus,
                                     int round, int threads = 1) {
  std::string model = c.model;  // the unfused run: every layer in its reference form
  if (!fused) model.insert(1, "fused_kernels: false, ");
  const std::string yaml = "model: " + model +
                           "\ntask: {name: text, seq_len: " + std::to_string(c.seq_len) +
                           ", path: '" + corpus.string() +
                           "'}\n"
                           "train: {steps: " +
                           std::to_string(c.steps) +
                           ", batch_size: 8, lr: 0.002, warmup_steps: 1, checkpoint_every: 0, "
                           "log_every: 1000}\n"
                           "eval: {lengths: [" +
                           std::to_string(c.seq_len) +
                           "]}\n"
                           "plugins: {paths: ['" HYBRIDLAB_TEST_PLUGIN_DIR "']}\n";
  const Experiment exp = read_experiment(Config::parse(yaml, "bench.yaml"));
  auto host = make_plugin_host(exp.config);
  exp.task->prepare({c.seq_len});
  auto m = build_model(*exp.model, *host, model_build_context(exp));
  const fs::path dir =
      fs::temp_directory_path() / ("hybridlab_bench_step_" + std::to_string(::getpid()) + "_" +
                                   std::to_string(round) + (fused ? "f" : "u"));
  TrainerHooks quiet;
  quiet.quiet = true;
  const int threads_before = at::get_num_threads();
  at::set_num_threads(threads);
  set_blas_threads(threads);
  train(*m, *exp.task, exp, RunFolder(dir.string()), quiet);
  at::set_num_threads(threads_before);
  set_blas_threads(threads_before);
  const double tokens_per_s = steady_tokens_per_s(dir);
  fs::remove_all(dir);
  return {tokens_per_s, m->summary(c.seq_len).flops_per_token};
}

void run_fused_vs_unfused(benchmark::State& state, const StepConfig& c) {
  const fs::path corpus = make_corpus();
  // This machine's sgemm rate, same threads, best of several calls.
  const torch::Tensor a = torch::randn({1024, 1024}), b = torch::randn({1024, 1024});
  double sgemm_s = 1e30;
  double fused_tps = 0, unfused_tps = 0, flops = 0, two_tps = 0;
  int round = 0;
  // On one thread (the default), each round also trains the fused model on two threads, so the
  // thread scaling is a ratio of the same rounds too.
  const int threads = at::get_num_threads();
  const bool compare_threads = threads == 1 && hardware_threads() >= 2;
  for (auto _ : state) {
    for (int i = 0; i < 5; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      torch::mm(a, b);
      sgemm_s = std::min(
          sgemm_s, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    const auto f = train_once(c, true, corpus, round, threads);
    const auto u = train_once(c, false, corpus, round, threads);
    if (compare_threads) two_tps = std::max(two_tps, train_once(c, true, corpus, round, 2).first);
    ++round;
    fused_tps = std::max(fused_tps, f.first);
    unfused_tps = std::max(unfused_tps, u.first);
    flops = f.second;
  }
  if (compare_threads) state.counters["two_threads_over_one"] = two_tps / fused_tps;
  fs::remove_all(corpus);
  const double sgemm_gflops = 2.0 * 1024 * 1024 * 1024 / sgemm_s / 1e9;
  const double fused_gflops = 3 * flops * fused_tps / 1e9;
  state.counters["fused_tokens_per_s"] = fused_tps;
  state.counters["unfused_tokens_per_s"] = unfused_tps;
  state.counters["fused_over_unfused"] = fused_tps / unfused_tps;
  state.counters["fused_GFLOP_per_s"] = fused_gflops;
  state.counters["unfused_GFLOP_per_s"] = 3 * flops * unfused_tps / 1e9;
  state.counters["sgemm_GFLOP_per_s"] = sgemm_gflops;
  state.counters["fused_fraction_of_sgemm"] = fused_gflops / sgemm_gflops;
  state.counters["train_MFLOP_per_token"] = 3 * flops / 1e6;
}

void BM_TrainStepS(benchmark::State& state) { run_fused_vs_unfused(state, kConfigS); }
void BM_TrainStepM(benchmark::State& state) { run_fused_vs_unfused(state, kConfigM); }

}  // namespace

BENCHMARK(BM_TrainStepText)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_TrainStepMqar)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_TrainStepS)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_TrainStepM)->Unit(benchmark::kMillisecond)->Iterations(3);
