// Plugin code never crashes or hangs a command: libraries that crash when loaded, factories that
// never return or throw an int, a record without a name, hooks that return bad tensors, each
// through the commands that load plugins in their own process.

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "cli_support.h"

namespace fs = std::filesystem;
using clitest::cli;
using clitest::q;
using clitest::Result;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace plugin_isolation_cli_test {
namespace {

const std::string kFixtures = std::string(HYBRIDLAB_BINARY_DIR) + "/test-fixtures/";

struct Tmp : clitest::TempDir {
  Tmp() : clitest::TempDir("pluginiso") {
    ::setenv("HYBRIDLAB_PLUGIN_TIMEOUT", "2", 1);  // the hanging fixture costs 2 s, not 60
  }
  ~Tmp() { ::unsetenv("HYBRIDLAB_PLUGIN_TIMEOUT"); }
};

// A tiny experiment whose attention uses `position` (a flow map), searching `dirs` first.
void write_experiment(const fs::path& file, const std::string& position,
                      const std::string& dirs = "") {
  std::ofstream(file) << "name: iso\n"
                         "model: {d_model: 16, vocab_size: 64, layers: GA,\n"
                         "        attention: {n_heads: 2, position: "
                      << position
                      << "},\n"
                         "        gated_deltanet: {n_heads: 2, expand_v: 1, chunk_size: 16}}\n"
                         "task: {name: mqar, seq_len: 32, vocab_size: 64, num_kv_pairs: 4}\n"
                         "train: {steps: 2, batch_size: 2, warmup_steps: 1}\n"
                         "eval: {lengths: [32], examples: 4}\n"
                         "runtime: {threads: 1}\n"
                         "plugins: {paths: ["
                      << dirs << "'" HYBRIDLAB_TEST_PLUGIN_DIR "']}\n";
}

const std::string kBrokenDirs = "'" + kFixtures + "crash_at_load', '" + kFixtures + "hanging', '" +
                                kFixtures + "foreign_throw', ";

}  // namespace

TEST_CASE("plugin isolation: broken libraries on the path cost no command its life",
          "[integration][plugins]") {
  Tmp tmp;
  const Result list =
      cli("plugins list --path " + q(kFixtures + "crash_at_load") + " --path " +
              q(kFixtures + "hanging") + " --path " + q(kFixtures + "foreign_throw") + " --path " +
              q(HYBRIDLAB_TEST_PLUGIN_DIR),
          120);
  INFO(list.out);
  CHECK(list.code == 0);
  CHECK_THAT(list.out, Catch::Contains("rope"));
  CHECK_THAT(list.out, Catch::Contains("crashed: plugin '" + kFixtures +
                                       "crash_at_load/crash_at_load.so': killed by signal 11 "
                                       "(Segmentation fault) while loading the library"));
  CHECK_THAT(list.out, Catch::Contains("hanging.so': did not return within 2 s"));
  CHECK_THAT(list.out, Catch::Contains("foreign_throw.so': threw an exception that is not a "
                                       "std::exception while building a scheme with default"));
  // Commands whose config does not use them go on; `run` trains with rope as if they were absent.
  const fs::path exp = tmp.path / "exp.yaml";
  write_experiment(exp, "{scheme: rope}", kBrokenDirs);
  for (const std::string c : {"config show ", "model summary "}) {
    const Result r = cli(c + q(exp), 120);
    INFO(c << r.out);
    CHECK(r.code == 0);
  }
  const Result ins = cli("inspect position --scheme rope --no-plots --out " + q(tmp.path / "ins") +
                             " --plugin-path " + q(kFixtures + "crash_at_load") +
                             " --plugin-path " + q(HYBRIDLAB_TEST_PLUGIN_DIR),
                         120);
  INFO(ins.out);
  CHECK(ins.code == 0);
  const Result run =
      cli("run " + q(exp) + " -q --no-report --runs-dir " + q(tmp.path / "runs"), 300);
  INFO(run.out);
  CHECK(run.code == 0);
  CHECK_THAT(clitest::slurp(tmp.path / "runs" / "iso" / "main" / "status.json"),
             Catch::Contains("finished"));
}

TEST_CASE("plugin isolation: a config naming a broken plugin is one error naming it",
          "[integration][plugins]") {
  Tmp tmp;
  const fs::path exp = tmp.path / "exp.yaml";
  const auto refused = [&](const std::string& position, const std::string& message) {
    write_experiment(exp, position);
    for (const std::string c : {"config show ", "model summary "}) {
      const Result r = cli(c + q(exp), 120);
      INFO(c << r.out);
      CHECK(r.code == 2);
      CHECK_THAT(r.out, Catch::Contains(message));
    }
  };
  refused("{scheme: '" + kFixtures + "crash_at_load/crash_at_load.so'}",
          "crash_at_load.so': killed by signal 11 (Segmentation fault) while loading the library");
  refused("{scheme: '" + kFixtures + "hanging/hanging.so'}", "did not return within 2 s");
  refused("{scheme: '" + kFixtures + "null_name/null_name.so'}", "its record has no name");
  // Settings that crash the factory only when given: caught when these settings are built.
  refused("{scheme: '" + kFixtures + "bad_hooks/bad_hooks.so', mode: crash}",
          "bad_hooks.so': killed by signal 11 (Segmentation fault) while building the scheme");
  // Hook outputs: the plugin, the hook, expected and got.
  refused("{scheme: '" + kFixtures + "bad_hooks/bad_hooks.so', mode: shape}",
          "positional scheme 'bad_hooks': its logit_bias hook returned [1,8,8] Float on cpu, "
          "expected [2,8,8] (H,Tq,Tk) Float on cpu");
  refused("{scheme: '" + kFixtures + "bad_hooks/bad_hooks.so', mode: dtype}",
          "its logit_bias hook returned [2,8,8] Double on cpu, expected [2,8,8] (H,Tq,Tk) Float");
  refused("{scheme: '" + kFixtures + "bad_hooks/bad_hooks.so', mode: throws}",
          "positional scheme 'bad_hooks': a hook failed at a small shape");
  // One line, LibTorch's message without its C++ backtrace.
  const Result throws = cli("model summary " + q(exp), 120);
  CHECK_THAT(throws.out, !Catch::Contains("Exception raised from") && !Catch::Contains("frame #"));
  write_experiment(exp, "{scheme: '" + kFixtures + "bad_hooks/bad_hooks.so'}");
  CHECK(cli("config show " + q(exp), 120).code == 0);
  // A sweep over a broken plugin: that variant fails, named by the plugin's file, the others run.
  write_experiment(exp, "{scheme: rope}");
  std::ofstream(exp, std::ios::app) << "sweep: {grid: {model.attention.position.scheme: [rope, '"
                                    << kFixtures << "crash_at_load/crash_at_load.so']}}\n";
  const Result run =
      cli("run " + q(exp) + " -q --no-report --runs-dir " + q(tmp.path / "runs"), 300);
  INFO(run.out);
  CHECK(run.code == 1);
  CHECK_THAT(clitest::slurp(tmp.path / "runs" / "iso" / "scheme-rope" / "status.json"),
             Catch::Contains("finished"));
  CHECK_THAT(clitest::slurp(tmp.path / "runs" / "iso" / "scheme-crash_at_load.so" / "status.json"),
             Catch::Contains("crash_at_load.so': killed by signal 11"));
}

}  // namespace plugin_isolation_cli_test

namespace plugin_isolation_cli_test {

TEST_CASE("plugin isolation: plugins list names the libraries that timed out, even all of them",
          "[plugins][cli]") {
  Tmp tmp;
  ::setenv("HYBRIDLAB_PLUGIN_TIMEOUT", "0.0000001", 1);  // no child returns within 0.1 us
  const Result r = cli("plugins list", 120);
  ::setenv("HYBRIDLAB_PLUGIN_TIMEOUT", "2", 1);
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("no working plugins found") && Catch::Contains("crashed: ") &&
                        Catch::Contains("rope") && Catch::Contains("HYBRIDLAB_PLUGIN_TIMEOUT"));
}

}  // namespace plugin_isolation_cli_test
