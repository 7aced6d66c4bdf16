// `runtime.device: cuda` where LibTorch sees no GPU (a CPU build, or no device): every command
// that would train stops with one error line naming file:line:key, exit code 2, and writes nothing.

#include <torch/cuda.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "cli_support.h"

using Catch::Matchers::Contains;
namespace fs = std::filesystem;

TEST_CASE("cli: runtime.device cuda without a GPU is one error, exit 2, nothing written",
          "[cli][device]") {
  if (torch::cuda::is_available()) {
    WARN("LibTorch sees a CUDA device here: the no-GPU error cannot be shown");
    return;
  }
  const clitest::TempDir tmp("device_cli");
  const fs::path& dir = tmp.path;
  const fs::path cfg = dir / "gpu.yaml";
  std::ofstream(cfg) << "model: {d_model: 32, vocab_size: 64, layers: GA,\n"
                        "        attention: {n_heads: 2}, gated_deltanet: {n_heads: 2}}\n"
                        "task: {name: mqar, seq_len: 64, vocab_size: 64, num_kv_pairs: 4}\n"
                        "train: {steps: 2, batch_size: 2}\n"
                        "runtime: {device: cuda}\n";
  const std::string cmd = GENERATE(as<std::string>{}, "run", "train");
  CAPTURE(cmd);
  const fs::path runs = dir / "runs";
  const clitest::Result r = clitest::cli(cmd + " " + cfg.string() + " --runs-dir " + runs.string());
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Contains(cfg.string() + ":5:11: runtime.device is 'cuda' but CUDA is not "
                                            "available"));
  // One line, and no runs folder (nor anything else) written.
  CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
  CHECK_FALSE(fs::exists(runs));
  CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}) == 1);
}
