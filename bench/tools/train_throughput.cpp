// Training throughput of one experiment config through the real trainer, on the config's
// runtime.device, without Google Benchmark (so it builds wherever the library does, e.g. on a GPU
// machine with HYBRIDLAB_BUILD_BENCH=OFF).
//
//   hybridlab_train_throughput CONFIG.yaml [--warmup N] [--steps N] [key=value ...]
//
// Trains warmup + steps steps (no checkpoints, no evaluation) in a temporary run folder, and
// reports the timed steps only: tokens/s = steps × batch × seq_len over the trainer's clock between
// the end of the last warm-up step and the end of the last step (metrics.jsonl time_s), which
// includes data, loss, clipping and AdamW. Every step ends on loss.item(), a device sync, so the
// clock sees the GPU's work. Also prints the model's parameters and training FLOP/s (3 × the
// model summary's forward FLOPs per token). Out of device memory: retries with half the batch.
// Exit codes: 0 measured, 2 bad input, 1 anything else.

#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "hybridlab/config.h"
#include "hybridlab/error.h"
#include "hybridlab/run_build.h"
#include "hybridlab/trainer.h"

namespace fs = std::filesystem;
using namespace hybridlab;

namespace {

struct Timed {
  double tokens_per_s = 0;
  double step_ms = 0;
};

// time_s of each logged step, indexed by step (1-based).
std::vector<double> step_times(const fs::path& metrics) {
  std::vector<double> t;
  std::ifstream in(metrics);
  std::string line;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    if (!j.contains("time_s")) continue;
    const auto step = j["step"].get<size_t>();
    if (t.size() <= step) t.resize(step + 1, 0.0);
    t[step] = j["time_s"].get<double>();
  }
  return t;
}

Timed measure(const std::string& path, const std::vector<std::string>& overrides, int64_t warmup,
              int64_t steps, int64_t& batch) {
  Config cfg = Config::load(path);
  for (const auto& o : overrides) cfg.apply_override(o);
  BuiltRun b = build_run(cfg);
  Experiment& exp = b.exp;
  exp.train.steps = warmup + steps;
  exp.train.log_every = 1;
  exp.train.checkpoint_every = 0;
  exp.train.eval_every = 0;
  if (batch > 0) exp.train.batch_size = batch;
  batch = exp.train.batch_size;
  const int64_t T = exp.task->seq_len(), B = exp.train.batch_size;
  const auto s = b.model->summary(T);
  fmt::print(
      "config {}: device {}, {:.1f} M parameters, batch {} x {} tokens, {} warm-up + {} "
      "timed steps\n",
      path, exp.runtime.device, b.params / 1e6, B, T, warmup, steps);
  std::fflush(stdout);
  const fs::path dir =
      fs::temp_directory_path() / fmt::format("hybridlab_throughput_{}_{}", ::getpid(), B);
  fs::remove_all(dir);
  TrainerHooks quiet;
  quiet.quiet = true;
  try {
    train(*b.model, *exp.task, exp, RunFolder(dir.string()), quiet);
  } catch (...) {
    fs::remove_all(dir);
    throw;
  }
  const std::vector<double> t = step_times(dir / "metrics.jsonl");
  fs::remove_all(dir);
  const auto last = static_cast<size_t>(warmup + steps);
  if (t.size() <= last) throw std::runtime_error("metrics.jsonl lacks the timed steps");
  const double wall = t[last] - t[static_cast<size_t>(warmup)];
  Timed r;
  r.tokens_per_s = static_cast<double>(steps * B * T) / wall;
  r.step_ms = 1e3 * wall / static_cast<double>(steps);
  fmt::print(
      "RESULT {}: {:.0f} tokens/s, {:.1f} ms/step, {:.2f} TFLOP/s (training, 3 x forward "
      "{:.1f} MFLOP/token)\n",
      path, r.tokens_per_s, r.step_ms, 3 * s.flops_per_token * r.tokens_per_s / 1e12,
      s.flops_per_token / 1e6);
  std::fflush(stdout);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  std::string path;
  int64_t warmup = 2, steps = 5;
  std::vector<std::string> overrides;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "--warmup" || a == "--steps") && i + 1 < argc) {
      (a == "--warmup" ? warmup : steps) = std::atoll(argv[++i]);
    } else if (a == "-h" || a == "--help") {
      std::puts(
          "usage: hybridlab_train_throughput CONFIG.yaml [--warmup N] [--steps N] "
          "[key=value ...]");
      return 0;
    } else if (a.find('=') != std::string::npos) {
      overrides.push_back(a);
    } else if (path.empty()) {
      path = a;
    } else {
      std::fprintf(stderr, "error: unexpected argument '%s'\n", a.c_str());
      return 2;
    }
  }
  if (path.empty() || warmup < 1 || steps < 1) {
    std::fputs("error: give a config file, --warmup >= 1 and --steps >= 1 (see --help)\n", stderr);
    return 2;
  }
  int64_t batch = 0;
  for (;;) {
    try {
      measure(path, overrides, warmup, steps, batch);
      return 0;
    } catch (const UserError& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      return 2;
    } catch (const c10::Error& e) {
      const std::string msg = e.what_without_backtrace();
      // The caching allocator has already freed its cache and retried before throwing.
      if (msg.find("out of memory") != std::string::npos) {
        const int64_t current = batch;
        if (current <= 1) {
          std::fprintf(stderr, "error: out of memory at batch 1\n");
          return 1;
        }
        batch = current / 2;
        std::printf("out of device memory at batch %lld: retrying with batch %lld\n",
                    static_cast<long long>(current), static_cast<long long>(batch));
        continue;
      }
      std::fprintf(stderr, "error: %s\n", msg.substr(0, msg.find('\n')).c_str());
      return 1;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      return 1;
    }
  }
}
