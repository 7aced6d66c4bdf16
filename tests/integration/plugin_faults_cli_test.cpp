// Plugin faults through the CLI: a plugin whose record is refused is set aside and the others
// keep working; a crash in plugin code after its probe ends eval and generate with a line naming
// the layer and the plugin, results.json intact; a shape error or a NaN from a plugin during
// training is stored naming the layer and the plugin, without divergence advice. The fixtures
// stale_mixer, null_name and misbehaving_mixer (tests/fixtures/plugins/) do the harm.

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "cli_support.h"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using clitest::cli;
using clitest::q;
using clitest::slurp;
using json = nlohmann::json;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace plugin_faults_cli_test {
namespace {

const std::string kFixtures = std::string(HYBRIDLAB_BINARY_DIR) + "/test-fixtures/";

// A tiny experiment with pattern `layers` (Q: the misbehaving mixer, D: DeltaNet), its plugin
// folders `dirs` searched before the shipped plugins, `mixer` the misbehaving mixer's keys (its
// section is left out when empty).
void write_experiment(const fs::path& file, const std::string& layers, const std::string& dirs,
                      const std::string& mixer = "", int steps = 4) {
  std::ofstream(file) << "name: faults\n"
                         "model: {d_model: 16, vocab_size: 64, layers: "
                      << layers
                      << ", attention: {n_heads: 2},\n"
                         "        deltanet: {num_heads: 2, chunk_size: 16}"
                      << (mixer.empty() ? "" : ", misbehaving_mixer: " + mixer)
                      << "}\n"
                         "task: {name: mqar, seq_len: 32, vocab_size: 64, num_kv_pairs: 4}\n"
                         "train: {steps: "
                      << steps
                      << ", batch_size: 4, warmup_steps: 1}\n"
                         "eval: {lengths: [32], examples: 8}\n"
                         "runtime: {threads: 1}\n"
                         "plugins: {paths: ["
                      << dirs << "'" HYBRIDLAB_TEST_PLUGIN_DIR "']}\n";
}

json json_of(const fs::path& p) {
  try {
    return json::parse(slurp(p));
  } catch (const std::exception&) {
    return json::object();
  }
}

// Sets an environment variable for the commands of one test (the CLI inherits it).
struct ScopedEnv {
  std::string name;
  ScopedEnv(const std::string& n, const std::string& value) : name(n) {
    ::setenv(n.c_str(), value.c_str(), 1);
  }
  ~ScopedEnv() { ::unsetenv(name.c_str()); }
};

}  // namespace

TEST_CASE("plugin faults: a stale mixer plugin is set aside, D and M stay usable",
          "[cli][plugins][set_aside]") {
  clitest::TempDir tmp("stalemixer");
  const fs::path yaml = tmp.path / "e.yaml";
  const std::string stale = "'" + kFixtures + "stale_mixer', ";
  write_experiment(yaml, "DA", stale);
  const auto summary = cli("model summary " + q(yaml));
  INFO(summary.out);
  CHECK(summary.code == 0);
  CHECK_THAT(summary.out, Contains("D deltanet"));
  // Its letter names the library and why it is set aside.
  write_experiment(yaml, "XA", stale);
  const auto x = cli("model summary " + q(yaml));
  INFO(x.out);
  CHECK(x.code == 2);
  CHECK_THAT(x.out, Contains("stale_mixer.so") && Contains("set aside") && Contains("version 1"));
  const auto list = cli("plugins list --path " + q(kFixtures + "stale_mixer"));
  INFO(list.out);
  CHECK(list.code == 0);
  CHECK_THAT(list.out, Contains("mixer D") && Contains("skipped: " + kFixtures +
                                                       "stale_mixer/stale_mixer.so (set aside"));
}

TEST_CASE("plugin faults: a positional plugin without a name fails no command that ignores it",
          "[cli][plugins][set_aside]") {
  clitest::TempDir tmp("nullname");
  const fs::path yaml = tmp.path / "e.yaml";
  write_experiment(yaml, "GA", "'" + kFixtures + "null_name', ");
  const auto show = cli("config show " + q(yaml));
  INFO(show.out);
  CHECK(show.code == 0);
  const auto list = cli("plugins list --path " + q(kFixtures + "null_name"));
  INFO(list.out);
  CHECK(list.code == 0);
  CHECK_THAT(list.out, Contains("null_name.so (set aside") && Contains("has no name"));
}

TEST_CASE("plugin faults: a plugin crash in eval and generate is named, results.json intact",
          "[cli][plugins][faults]") {
  clitest::TempDir tmp("mixersegv");
  const fs::path yaml = tmp.path / "e.yaml", runs = tmp.path / "runs";
  write_experiment(yaml, "QA", "'" + kFixtures + "misbehaving_mixer', ", "{}");
  const auto trained =
      cli("run " + q(yaml) + " --runs-dir " + q(runs) + " --quiet --no-report", 300);
  INFO(trained.out);
  REQUIRE(trained.code == 0);
  const fs::path run = runs / "faults" / "main";
  const std::string before = slurp(run / "results.json");
  REQUIRE_FALSE(json_of(run / "results.json").empty());

  const ScopedEnv action("HYBRIDLAB_FIXTURE_MIXER_ACTION", "segv");
  const auto eval = cli("eval " + q(run), 300);
  INFO(eval.out);
  CHECK(eval.code == 1);
  CHECK_THAT(eval.out, Contains("hybridlab eval: killed by signal 11 (Segmentation fault) in "
                                "layer 0 (mixer 'misbehaving_mixer', plugin '") &&
                           Contains("misbehaving_mixer.so"));
  CHECK(slurp(run / "results.json") == before);

  const auto gen = cli("generate " + q(run) + " --prompt '1 2 3' -n 2", 300);
  INFO(gen.out);
  CHECK(gen.code == 1);
  CHECK_THAT(gen.out, Contains("hybridlab generate: killed by signal 11") &&
                          Contains("layer 0 (mixer 'misbehaving_mixer'"));

  const auto analyze = cli("analyze " + q(run) + " --quiet", 300);
  INFO(analyze.out);
  CHECK(analyze.code == 1);
  CHECK_THAT(analyze.out, Contains("hybridlab analyze: killed by signal 11") &&
                              Contains("layer 0 (mixer 'misbehaving_mixer'"));
  CHECK(slurp(run / "results.json") == before);

  // In a run's child: the run is recorded crashed by the signal, in the layer that crashed.
  const auto crashed =
      cli("run " + q(yaml) + " --runs-dir " + q(tmp.path / "again") + " --quiet --no-report", 300);
  INFO(crashed.out);
  CHECK(crashed.code == 1);
  const fs::path again = tmp.path / "again" / "faults" / "main";
  const std::string error = json_of(again / "status.json").value("error", "");
  INFO(error);
  CHECK_THAT(error, Contains("crashed: killed by signal 11 (Segmentation fault) in layer 0 "
                             "(mixer 'misbehaving_mixer', plugin '"));
  CHECK_FALSE(fs::exists(again / "fault.txt"));
}

TEST_CASE("plugin faults: a bad shape or a LibTorch error mid-training names the layer",
          "[cli][plugins][faults]") {
  clitest::TempDir tmp("mixershape");
  const fs::path yaml = tmp.path / "e.yaml", runs = tmp.path / "runs";
  for (const std::string action : {"shape", "torch_error"}) {
    write_experiment(yaml, "AQ", "'" + kFixtures + "misbehaving_mixer', ",
                     "{action: " + action + ", at_call: 3}");
    const auto r =
        cli("run " + q(yaml) + " --runs-dir " + q(runs / action) + " --quiet --no-report", 300);
    INFO(r.out);
    CHECK(r.code != 0);
    const json st = json_of(runs / action / "faults" / "main" / "status.json");
    const std::string error = st.value("error", "");
    INFO(error);
    CHECK(st.value("state", "") == "failed");
    CHECK_THAT(error, Contains("layer 1 (mixer 'misbehaving_mixer', plugin '") &&
                          Contains("misbehaving_mixer.so"));
    CHECK_THAT(error, !Contains("Exception raised from") && !Contains("frame #"));
  }
}

TEST_CASE("plugin faults: a NaN from a plugin layer is named, not called divergence",
          "[cli][plugins][faults]") {
  clitest::TempDir tmp("mixernan");
  const fs::path yaml = tmp.path / "e.yaml", runs = tmp.path / "runs";
  write_experiment(yaml, "AQ", "'" + kFixtures + "misbehaving_mixer', ",
                   "{action: nan, at_call: 3}");
  const auto r = cli("run " + q(yaml) + " --runs-dir " + q(runs) + " --quiet --no-report", 300);
  INFO(r.out);
  CHECK(r.code != 0);
  const json st = json_of(runs / "faults" / "main" / "status.json");
  const std::string error = st.value("error", "");
  INFO(error);
  CHECK(st.value("state", "") == "failed");
  CHECK_THAT(error, Contains("layer 1 (mixer 'misbehaving_mixer', plugin '") &&
                        Contains("non-finite values from finite inputs"));
  CHECK_THAT(error, !Contains("lower train.lr"));
}

TEST_CASE("plugin faults: a NaN from a positional hook names the attention layer and the scheme",
          "[cli][plugins][faults]") {
  clitest::TempDir tmp("hooknan");
  const fs::path yaml = tmp.path / "e.yaml", runs = tmp.path / "runs";
  clitest::write_tiny_experiment(yaml, "faults", "{steps: 4, batch_size: 4, warmup_steps: 1}",
                                 "{lengths: [32], examples: 8}");
  std::string text = slurp(yaml);
  const std::string from = "attention: {n_heads: 2}";
  text.replace(text.find(from), from.size(),
               "attention: {n_heads: 2, position: {scheme: '" + kFixtures +
                   "misbehaving/misbehaving.so', action: nan, at_call: 3}}");
  std::ofstream(yaml) << text;
  const auto r = cli("run " + q(yaml) + " --runs-dir " + q(runs) + " --quiet --no-report", 300);
  INFO(r.out);
  CHECK(r.code != 0);
  const std::string error = json_of(runs / "faults" / "main" / "status.json").value("error", "");
  INFO(error);
  CHECK_THAT(error, Contains("layer 1 (mixer 'attention', positional scheme 'misbehaving')") &&
                        Contains("non-finite values from finite inputs"));
  CHECK_THAT(error, !Contains("lower train.lr"));
}

}  // namespace plugin_faults_cli_test
