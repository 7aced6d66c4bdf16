#pragma once
// Helpers of the tests of the main job (tasks, trainer, evaluation, sweeps, reports): temporary
// folders, tiny experiment configs.

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>

#include "hybridlab/config.h"

namespace jobtest {

/// A fresh empty folder under the system temp folder, removed when the object dies.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    static std::atomic<int> counter{0};
    path = std::filesystem::temp_directory_path() /
           ("hybridlab_job_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string str() const { return path.string(); }
};

/// A tiny two-layer hybrid (one Gated DeltaNet, one attention layer) experiment on `task_yaml`.
inline std::string tiny_experiment(const std::string& task_yaml, const std::string& extra = "") {
  return std::string(
             "model: {d_model: 16, vocab_size: 64, layers: GA, attention: {n_heads: 2},\n"
             "        gated_deltanet: {n_heads: 2, expand_v: 1, chunk_size: 16}}\n") +
         "task: " + task_yaml + "\n" + "plugins: {paths: [" + HYBRIDLAB_TEST_PLUGIN_DIR + "]}\n" +
         "runtime: {threads: 1}\n" + extra;
}

}  // namespace jobtest
