// Training throughput of the quickstart model (GGGA, d_model 64, RoPE in the attention layer,
// batch 8 x 128 bytes, one thread) through the real trainer, and the share of the step time spent
// outside the model's forward and backward (data, loss, clipping, AdamW, metrics.jsonl, progress,
// checkpoint at the end). Target: outside share < 15%.
//
//   build/bin/bench_train_step            (counters: tokens_per_s, outside_share)

#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "hybridlab/experiment.h"
#include "hybridlab/model.h"
#include "hybridlab/plugin_host.h"
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
    const TrainSummary s = train(*m, *exp.task, exp, dir.string(), quiet);
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

}  // namespace

BENCHMARK(BM_TrainStepText)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_TrainStepMqar)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(3);
