// The pre-flight check: a plugin whose factory segfaults is contained and named; errors stay
// errors.

#include <catch2/catch.hpp>

#include "hybridlab/experiment.h"
#include "run/preflight.h"
#include "runs_support.h"

using namespace hybridlab;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace preflight_test {
namespace {

const std::string kSegv =
    std::string(HYBRIDLAB_BINARY_DIR) + "/test-fixtures/segfaulting/segfaulting.so";

Experiment sweep_over(const std::string& schemes, Config& cfg) {
  cfg = Config::parse(runstest::tiny_yaml("sweep:\n  grid:\n    model.attention.position.scheme: " +
                                          schemes + "\n  seeds: [0, 1]\n"),
                      "exp.yaml");
  return read_experiment(cfg, false);
}

}  // namespace

TEST_CASE("preflight: a segfaulting factory is recorded for its variants, the others pass",
          "[runs][preflight]") {
  Config cfg;
  const Experiment e = sweep_over("[nope, '" + kSegv + "', alibi]", cfg);
  const auto vs = expand_sweep(e.sweep);
  REQUIRE(vs.size() == 6u);
  const auto crashed = preflight_variants(cfg, vs, e.sweep, "");
  REQUIRE(crashed.size() == 2u);  // both seeds of the crashing scheme, no other
  for (const auto& [name, msg] : crashed) {
    INFO(name << ": " << msg);
    CHECK(name.rfind("scheme-segfaulting.so_seed-", 0) == 0);
    CHECK_THAT(msg, Catch::Contains("crashed while building its model"));
    CHECK_THAT(msg, Catch::Contains("Segmentation fault"));
    CHECK_THAT(msg, Catch::Contains("segfaulting.so"));
  }
}

TEST_CASE("preflight: a build error is one error naming the run", "[runs][preflight]") {
  Config cfg;
  const Experiment e = sweep_over("[nope, /nonexistent/broken.so]", cfg);
  const auto vs = expand_sweep(e.sweep);
  CHECK_THROWS_WITH(
      preflight_variants(cfg, vs, e.sweep, ""),
      Catch::Contains("run 'scheme-broken.so_seed-0'") && Catch::Contains("broken.so"));
  // The same variants without the broken one pass.
  const Experiment ok = sweep_over("[nope, alibi]", cfg);
  CHECK(preflight_variants(cfg, expand_sweep(ok.sweep), ok.sweep, "").empty());
}

}  // namespace preflight_test
