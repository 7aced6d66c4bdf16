// The cost of making a training batch against a training step, per task, in one run: each
// order-and-state task at the shape of its `_small` literature file, its generator timed against
// forward + backward + AdamW of that file's model on the same batch (one thread). Target: a batch
// costs at most 5% of a step (share counter).
//
//   build/bin/bench_task_batches            (counters: batch_ms, step_ms, share)

#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <string>

#include "hybridlab/experiment.h"
#include "hybridlab/model.h"
#include "hybridlab/plugin_host.h"

using namespace hybridlab;

namespace {

struct TaskShape {
  std::string model;  // the model: section
  std::string task;   // the task: section
  int64_t batch;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void run(benchmark::State& state, const TaskShape& shape) {
  at::set_num_threads(1);
  const std::string yaml = "model: " + shape.model + "\ntask: " + shape.task +
                           "\ntrain: {steps: 1}\n"
                           "plugins: {paths: ['" HYBRIDLAB_TEST_PLUGIN_DIR "']}\n";
  const Experiment exp = read_experiment(Config::parse(yaml, "bench.yaml"));
  auto host = make_plugin_host(exp.config);
  exp.task->prepare({});
  const int64_t T = exp.task->seq_len();
  auto model = build_model(*exp.model, *host, ModelBuildContext{T, T});
  torch::optim::AdamW opt(model->parameters(), torch::optim::AdamWOptions(1e-3));
  double batch_s = std::numeric_limits<double>::infinity(), step_s = batch_s;
  int64_t step = 0;
  for (auto _ : state) {
    for (int round = 0; round < 5; ++round, ++step) {
      auto t0 = std::chrono::steady_clock::now();
      const Batch b = exp.task->train_batch(step, shape.batch, 0);
      batch_s = std::min(batch_s, seconds_since(t0));
      t0 = std::chrono::steady_clock::now();
      opt.zero_grad();
      const torch::Tensor logits = model->forward(b.tokens);
      torch::nn::functional::cross_entropy(
          logits.reshape({-1, logits.size(-1)}), b.targets.reshape({-1}),
          torch::nn::functional::CrossEntropyFuncOptions().ignore_index(kIgnoreIndex))
          .backward();
      opt.step();
      step_s = std::min(step_s, seconds_since(t0));
    }
  }
  state.counters["batch_ms"] = 1e3 * batch_s;
  state.counters["step_ms"] = 1e3 * step_s;
  state.counters["share"] = batch_s / step_s;
}

// The models and shapes of experiments/literature/{flip_flop,state_tracking}_small.yaml and the
// algorithmic task at a comparable size (GGGA, d_model 64).
const char* kHybrid =
    "{d_model: 64, vocab_size: VOCAB, layers: GGGA, attention: {n_heads: 4, position: {scheme: "
    "nope}}, gated_deltanet: {n_heads: 2, head_dim: 32}}";

std::string hybrid(int vocab) {
  std::string m = kHybrid;
  m.replace(m.find("VOCAB"), 5, std::to_string(vocab));
  return m;
}

void BM_FlipFlop(benchmark::State& s) {
  run(s, {hybrid(5), "{name: flip_flop, seq_len: 128}", 16});
}
void BM_WordProblemParity(benchmark::State& s) {
  run(s, {hybrid(4), "{name: word_problem, group: parity, seq_len: 64}", 32});
}
void BM_WordProblemA5(benchmark::State& s) {
  run(s, {hybrid(62), "{name: word_problem, group: A5, seq_len: 64}", 32});
}
void BM_AlgorithmicReverse(benchmark::State& s) {
  run(s, {hybrid(21), "{name: algorithmic, op: reverse, seq_len: 43}", 32});
}
void BM_AlgorithmicAddition(benchmark::State& s) {
  run(s, {hybrid(15), "{name: algorithmic, op: addition, seq_len: 44}", 32});
}
// Byte level at 1024 bytes, 3 chains: the per-example text is built in C++ (the costliest kind).
void BM_RulerVt(benchmark::State& s) {
  run(s, {hybrid(256), "{name: ruler_vt, seq_len: 1024, num_chains: 3}", 16});
}
void BM_RulerCwe(benchmark::State& s) {
  run(s, {hybrid(256), "{name: ruler_cwe, seq_len: 1024}", 16});
}
void BM_RulerFwe(benchmark::State& s) {
  run(s, {hybrid(256), "{name: ruler_fwe, seq_len: 1024}", 16});
}
void BM_FuzzyRecall(benchmark::State& s) {
  run(s, {hybrid(16), "{name: fuzzy_recall, seq_len: 128}", 32});
}
// MAD's compression at its default size, with the autoencoder head it needs.
void BM_Compression(benchmark::State& s) {
  std::string m = hybrid(16);
  m.insert(m.size() - 1, ", head: autoencoder");
  run(s, {m, "{name: compression, seq_len: 32}", 32});
}
BENCHMARK(BM_Compression)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_FlipFlop)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_FuzzyRecall)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_RulerCwe)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_RulerFwe)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_RulerVt)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_WordProblemParity)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_WordProblemA5)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AlgorithmicReverse)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AlgorithmicAddition)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace
