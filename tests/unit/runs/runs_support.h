#pragma once
// Helpers of the run-folder tests: temporary folders, a tiny experiment, a prepared run folder.

#include <filesystem>
#include <fstream>
#include <string>

#include "hybridlab/experiment.h"
#include "hybridlab/run.h"
#include "support/job_support.h"

namespace runstest {

/// A fresh empty folder under the system temp folder, removed when the object dies.
using TempDir = jobtest::TempDir;

/// A tiny two-layer hybrid on mqar; `extra` is appended (train:, sweep:, ...).
inline std::string tiny_yaml(const std::string& extra = "") {
  return std::string(
             "model: {d_model: 16, vocab_size: 64, layers: GA, attention: {n_heads: 2},\n"
             "        gated_deltanet: {n_heads: 2, expand_v: 1, chunk_size: 16}}\n"
             "task: {name: mqar, seq_len: 32, vocab_size: 64, num_kv_pairs: 4}\n"
             "eval: {lengths: [32, 48], examples: 8}\n"
             "runtime: {threads: 1}\n"
             "plugins: {paths: ['" HYBRIDLAB_TEST_PLUGIN_DIR "']}\n") +
         extra;
}

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

/// Writes `yaml` to <dir>/exp.yaml and prepares the folder of its only run ("main") under
/// <dir>/runs/exp/main the way `hybridlab run` does; returns the run folder.
inline hybridlab::RunFolder prepare_main(const std::filesystem::path& dir, const std::string& yaml,
                                         bool train_only = false) {
  using namespace hybridlab;
  const auto file = dir / "exp.yaml";
  std::ofstream(file) << yaml;
  const Config cfg = load_experiment_config(file.string(), {});
  const Experiment exp = read_experiment(cfg);
  const Variant v = expand_sweep(exp.sweep).at(0);
  const RunFolder folder((dir / "runs" / exp.name / v.name).string());
  RunLock lock(folder.dir());
  prepare_run_folder(folder, run_source_yaml(variant_config(cfg, v, exp.sweep)),
                     RunIdentity{exp.name, v.name, v.labels, dir.string(), v.tuned}, train_only);
  return folder;
}

}  // namespace runstest
