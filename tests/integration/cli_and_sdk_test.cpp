// The CLI as a user runs it (exit codes, one-line errors) and the plugin SDK used from outside
// the source tree (install, find_package, build, load).

#include <sys/wait.h>
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "hybridlab/plugin_host.h"

using Catch::Matchers::Contains;
namespace fs = std::filesystem;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace cli_and_sdk_test {
namespace {
struct Result {
  int code;
  std::string output;
};

// Runs a shell command, capturing stdout and stderr together.
Result run(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  REQUIRE(p != nullptr);
  std::array<char, 4096> buf{};
  while (fgets(buf.data(), buf.size(), p)) out += buf.data();
  const int status = ::pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

const std::string kCli = HYBRIDLAB_CLI;

std::string temp_yaml(const std::string& name, const std::string& text) {
  const auto dir = fs::temp_directory_path() / "hybridlab_cli_test";
  fs::create_directories(dir);
  const auto path = (dir / name).string();
  std::ofstream(path) << text;
  return path;
}
}  // namespace

TEST_CASE("cli: --version names LibTorch, the BLAS and the threads", "[cli]") {
  const auto r = run(kCli + " --version");
  CHECK(r.code == 0);
  CHECK_THAT(r.output, Contains("hybridlab ") && Contains("LibTorch ") && Contains("BLAS ") &&
                           Contains("intra-op"));
}

TEST_CASE("cli: plugins list shows nope with its hooks and file", "[cli]") {
  const auto r = run(kCli + " plugins list");
  CHECK(r.code == 0);
  CHECK_THAT(r.output, Contains("nope") && Contains("nope.so") && Contains("HOOKS"));
}

TEST_CASE("cli: bad input is one error line and exit code 2", "[cli]") {
  SECTION("missing file") {
    const auto r = run(kCli + " config show /nonexistent/exp.yaml");
    CHECK(r.code == 2);
    CHECK_THAT(r.output, Contains("error: config file '/nonexistent/exp.yaml' does not exist"));
  }
  SECTION("unknown key") {
    const auto path = temp_yaml("typo.yaml", "runtime:\n  sed: 3\n");
    const auto r = run(kCli + " config show " + path);
    CHECK(r.code == 2);
    CHECK_THAT(r.output,
               Contains(path + ":2:3: runtime.sed: unknown key 'sed'; did you mean 'seed'?"));
  }
  SECTION("bad override") {
    const auto path = temp_yaml("ok.yaml", "runtime: {seed: 1}\n");
    const auto r = run(kCli + " config show " + path + " runtime.seed=abc");
    CHECK(r.code == 2);
    CHECK_THAT(r.output, Contains("runtime.seed: expected an integer, got 'abc'"));
  }
  SECTION("unknown subcommand") {
    const auto r = run(kCli + " frobnicate");
    CHECK(r.code != 0);
  }
}

TEST_CASE("cli: config show prints the resolved config with defaults", "[cli]") {
  const auto path =
      temp_yaml("show.yaml",
                "model: {attention: {position: {scheme: rope}}}\n"
                "task: {name: mqar, seq_len: 64, vocab_size: 256}\nruntime: {seed: 5}\n");
  const auto r = run(kCli + " config show " + path + " runtime.threads=1");
  REQUIRE(r.code == 0);
  CHECK_THAT(r.output, Contains("seed: 5") && Contains("threads: 1") && Contains("device: cpu"));
  // The plugin's own defaults are part of the resolved config (read when the model is built).
  CHECK_THAT(r.output, Contains("scheme: rope") && Contains("rope_theta: 10000"));
}

TEST_CASE("sdk: an out-of-tree plugin builds against the installed package and loads",
          "[sdk][slow]") {
  // Under this build folder, not a fixed /tmp path: two checkouts testing at once on one machine
  // removed each other's build mid-compile there.
  const fs::path work = fs::path(HYBRIDLAB_BINARY_DIR) / "test_sdk_work";
  fs::remove_all(work);
  fs::create_directories(work);
  const std::string prefix = (work / "prefix").string();
  const std::string src = std::string(HYBRIDLAB_SOURCE_DIR) + "/docs/examples/out_of_tree_plugin";
  const std::string build = (work / "build").string();

  auto install =
      run("cmake --install " + std::string(HYBRIDLAB_BINARY_DIR) + " --prefix " + prefix);
  INFO(install.output);
  REQUIRE(install.code == 0);
  CHECK(fs::exists(prefix + "/include/hybridlab/position.h"));
  CHECK(fs::exists(prefix + "/lib/hybridlab/plugins/nope.so"));

  auto configure = run("cmake -S " + src + " -B " + build +
                       " -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=" + prefix);
  INFO(configure.output);
  REQUIRE(configure.code == 0);
  auto compile = run("cmake --build " + build);
  INFO(compile.output);
  REQUIRE(compile.code == 0);
  const std::string so = build + "/kerple_log.so";
  REQUIRE(fs::exists(so));

  // Loaded by path, then built with a setting, then its bias checked against the formula:
  // b(i,j) = -r1 * log(1 + r2 |i-j|) with r1 = 1, r2 = 0.5.
  hybridlab::PluginHost host;
  hybridlab::Config cfg = hybridlab::Config::parse("{r2_init: 0.5}", "sdk.yaml");
  hybridlab::Section params = cfg.root();
  hybridlab::PositionContext ctx;
  ctx.n_heads = 2;
  ctx.head_dim = 8;
  auto scheme = host.create(so, params, ctx);
  CHECK(scheme->name() == "kerple_log");
  CHECK(scheme->hooks() == hybridlab::kHookLogitBias);
  const auto bias = scheme->logit_bias(torch::arange(3, 6), torch::arange(0, 6));  // [2,3,6]
  REQUIRE(bias.sizes() == torch::IntArrayRef({2, 3, 6}));
  // q at 5, k at 1: distance 4 -> -log(1 + 2) = -1.0986
  CHECK(bias[1][2][1].item<double>() == Approx(-std::log(3.0)).epsilon(1e-5));
  CHECK(bias[0][0][3].item<double>() == Approx(0.0).margin(1e-6));

  // And the installed CLI lists it when its folder is on HYBRIDLAB_PLUGIN_PATH.
  const auto r =
      run("HYBRIDLAB_PLUGIN_PATH=" + build + " " + prefix + "/bin/hybridlab plugins list");
  CHECK(r.code == 0);
  CHECK_THAT(r.output, Contains("kerple_log") && Contains("logit_bias") && Contains("nope"));

  // The out-of-tree mixer example against the same installation: built, listed with its letter,
  // and its values checked by hand with identity projections and α = 0.5:
  // x = 1, 2, 3 -> h = 0.5, 1.25, 2.125; one decoding step with x = 4 -> 3.0625.
  const std::string mixer_src =
      std::string(HYBRIDLAB_SOURCE_DIR) + "/docs/examples/out_of_tree_mixer";
  const std::string mixer_build = (work / "mixer_build").string();
  auto mixer_configure = run("cmake -S " + mixer_src + " -B " + mixer_build +
                             " -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=" + prefix);
  INFO(mixer_configure.output);
  REQUIRE(mixer_configure.code == 0);
  auto mixer_compile = run("cmake --build " + mixer_build);
  INFO(mixer_compile.output);
  REQUIRE(mixer_compile.code == 0);
  hybridlab::Config mcfg = hybridlab::Config::parse("{width: 1, decay: 0.5}", "sdk.yaml");
  hybridlab::Section mparams = mcfg.root();
  hybridlab::MixerContext mctx;
  mctx.d_model = 1;
  auto mixer = host.create_mixer(mixer_build + "/ema.so", mparams, mctx);
  {
    torch::NoGradGuard no_grad;
    for (auto& p : mixer->named_parameters())
      if (p.key() != "a") p.value().fill_(1.0);  // in_proj = out_proj = identity (1 x 1)
    const torch::Tensor x = torch::tensor({1.0f, 2.0f, 3.0f}).view({1, 3, 1});
    const torch::Tensor y = mixer->forward(x, torch::arange(3), nullptr);
    CHECK(y[0][0][0].item<double>() == Approx(0.5).epsilon(1e-6));
    CHECK(y[0][1][0].item<double>() == Approx(1.25).epsilon(1e-6));
    CHECK(y[0][2][0].item<double>() == Approx(2.125).epsilon(1e-6));
    auto cache = mixer->make_cache();
    mixer->forward(x, torch::arange(3), cache.get());
    const torch::Tensor step =
        mixer->forward(torch::full({1, 1, 1}, 4.0f), torch::arange(3, 4), cache.get());
    CHECK(step.item<double>() == Approx(3.0625).epsilon(1e-6));
  }
  const auto listed =
      run("HYBRIDLAB_PLUGIN_PATH=" + mixer_build + " " + prefix + "/bin/hybridlab plugins list");
  CHECK(listed.code == 0);
  CHECK_THAT(listed.output, Contains("ema") && Contains("mixer E") && Contains("deltanet"));
}

}  // namespace cli_and_sdk_test
