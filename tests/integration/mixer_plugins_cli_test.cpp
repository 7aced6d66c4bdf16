// Mixer plugins through the CLI as a researcher uses them: a pattern with the DeltaNet plugin's
// letter trains, evaluates and is analysed; `plugins list` shows kinds and letters; bad settings
// and letters are located errors with exit 2; a plugin with a built-in's letter is not used, and
// the message says so.

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "cli_support.h"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using clitest::cli;
using clitest::q;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace mixer_plugins_cli_test {
namespace {

const std::string kFixtures = std::string(HYBRIDLAB_BINARY_DIR) + "/test-fixtures/";

// A tiny DA experiment: the DeltaNet plugin, then attention; `model_extra` goes into `model:`.
void write_experiment(const fs::path& file, const std::string& layers,
                      const std::string& model_extra = "", const std::string& dirs = "") {
  std::ofstream(file) << "name: dn\n"
                         "model: {d_model: 16, vocab_size: 64, layers: "
                      << layers
                      << ", attention: {n_heads: 2},\n"
                         "        deltanet: {num_heads: 2, chunk_size: 16}"
                      << model_extra
                      << "}\n"
                         "task: {name: mqar, seq_len: 32, vocab_size: 64, num_kv_pairs: 4}\n"
                         "train: {steps: 30, batch_size: 8, warmup_steps: 2, lr: 3.0e-3}\n"
                         "eval: {lengths: [32, 64], examples: 8}\n"
                         "runtime: {threads: 1}\n"
                         "plugins: {paths: ["
                      << dirs << "'" HYBRIDLAB_TEST_PLUGIN_DIR "']}\n";
}

}  // namespace

TEST_CASE("mixer plugins cli: plugins list shows deltanet as mixer D", "[cli][mixer]") {
  const auto r = cli("plugins list");
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Contains("KIND") && Contains("mixer D") && Contains("deltanet.so") &&
                        Contains("eval: chunk_size"));
}

TEST_CASE("mixer plugins cli: a DA model trains, evaluates and is analysed", "[cli][mixer]") {
  clitest::TempDir tmp("mixercli");
  const fs::path yaml = tmp.path / "dn.yaml";
  write_experiment(yaml, "DA");
  const auto summary = cli("model summary " + q(yaml));
  REQUIRE(summary.code == 0);
  CHECK_THAT(summary.out, Contains("D deltanet") && Contains("H=2 dk=8 dv=8"));
  // The model's vocabulary follows the task's (64 here) as in `run`, not the default 256.
  CHECK_THAT(summary.out, Contains("vocab_size 64"));
  const auto run = cli("run " + q(yaml) + " --runs-dir " + q(tmp.path / "runs"), 300);
  INFO(run.out);
  REQUIRE(run.code == 0);
  const fs::path folder = tmp.path / "runs" / "dn" / "main";
  CHECK_THAT(clitest::slurp(folder / "status.json"), Contains("\"state\": \"finished\""));
  const auto analyze = cli("analyze " + q(folder), 300);
  INFO(analyze.out);
  CHECK(analyze.code == 0);
  CHECK_THAT(analyze.out, Contains("layer 0 (deltanet)"));
}

TEST_CASE("mixer plugins cli: bad letters and settings are located, exit 2", "[cli][mixer]") {
  clitest::TempDir tmp("mixercli_bad");
  const fs::path yaml = tmp.path / "dn.yaml";
  write_experiment(yaml, "DXA");
  auto r = cli("config show " + q(yaml));
  CHECK(r.code == 2);
  CHECK_THAT(r.out,
             Contains("dn.yaml:2") && Contains("letter 'X'") && Contains("D (deltanet, plugin)"));
  write_experiment(yaml, "DA", ", overrides: {0: {num_head: 4}}");
  r = cli("config show " + q(yaml));
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Contains("dn.yaml:3") && Contains("unknown key 'num_head'") &&
                        Contains("did you mean 'num_heads'"));
  write_experiment(yaml, "DA");
  r = cli("run " + q(yaml) + " model.deltanet.num_heads=two --runs-dir " + q(tmp.path / "runs"));
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Contains("model.deltanet.num_heads: expected an integer, got 'two'"));
  CHECK_FALSE(fs::exists(tmp.path / "runs" / "dn"));
  // The section of a plugin mixer no layer uses is checked as a used one is.
  r = cli("config show " + q(yaml) + " model.layers=GA model.deltanet.bogus=1");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Contains("model.deltanet.bogus: unknown key 'bogus'"));
  // Letters are case-sensitive, and the message says so; a pattern past the limit is counted.
  r = cli("config show " + q(yaml) + " model.layers=dA");
  CHECK(r.code == 2);
  CHECK_THAT(r.out,
             Contains("letter 'd'") && Contains("letters are case-sensitive: 'D' is deltanet"));
  r = cli("config show " + q(yaml) + " 'model.layers={pattern: DA, repeat: 3000}'");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Contains("the model has 6000 layers; at most 4096"));
}

TEST_CASE("mixer plugins cli: a plugin with a built-in's letter is not used, and said so",
          "[cli][mixer]") {
  clitest::TempDir tmp("mixercli_clash");
  const fs::path yaml = tmp.path / "dn.yaml";
  write_experiment(yaml, "GZA", ", gated_deltanet: {n_heads: 2}",
                   "'" + kFixtures + "mixer_clash', ");
  const auto r = cli("config show " + q(yaml));
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Contains("letter 'Z'") && Contains("mixer plugin 'clash' (letter G") &&
                        Contains("'gated_deltanet' (letter G, built in) has its letter"));
  const auto list = cli("plugins list --path " + q(kFixtures + "mixer_clash"));
  CHECK(list.code == 0);
  CHECK_THAT(list.out,
             Contains("mixer plugin 'clash' (letter G, " + kFixtures +
                      "mixer_clash/mixer_clash.so) is not used: 'gated_deltanet' (letter G, "
                      "built in) has its letter; rename it"));
  // One registry: the built-in types and the plugins, each with its origin.
  CHECK_THAT(list.out, Contains("  A attention (built in)") &&
                           Contains("  D deltanet (" + std::string(HYBRIDLAB_TEST_PLUGIN_DIR) +
                                    "/deltanet.so)"));
}

}  // namespace mixer_plugins_cli_test
