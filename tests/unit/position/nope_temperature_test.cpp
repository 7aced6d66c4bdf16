// NoPE with Llama 4's attention-temperature tuning through the `nope_temperature` plugin: the
// factor table of mixers_and_schemes_v2.md §9, keys untouched, decoding steps at true positions.

#include <cmath>

#include "scheme_loader.h"

using namespace hybridlab;
using namespace hybridlab::test;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace nope_temperature_test {
TEST_CASE("nope_temperature: the query factor at the reference's positions",
          "[position][nope_temperature]") {
  // 1 + 0.1·ln(⌊(pos+1)/8192⌋ + 1) (§9 table): ≤ 8190 → 1, 8191 → 1 + 0.1 ln 2 = 1.0693147,
  // 16383 → 1 + 0.1 ln 3 = 1.1098612, 81919 → 1 + 0.1 ln 11 = 1.2397895,
  // 1048575 → 1 + 0.1 ln 129 = 1.4859812.
  auto s = make_scheme("nope_temperature", "", test_context(2, 4));
  const torch::Tensor pos = positions({0, 8190, 8191, 16383, 81919, 1048575});
  const torch::Tensor q = torch::ones({1, 2, 6, 4}, torch::kDouble);
  const torch::Tensor k = torch::randn({1, 2, 3, 4}, torch::kDouble);
  const auto [sq, sk] = s->rotate(q, k, pos, positions({0, 1, 2}));
  const torch::Tensor want =
      torch::tensor({1.0, 1.0, 1.0693147, 1.1098612, 1.2397895, 1.4859812}, torch::kDouble);
  REQUIRE_TENSORS_CLOSE(sq[0][1].select(1, 3), want, 1e-7);
  REQUIRE(max_abs_diff(sk, k) == 0.0);  // keys are not touched
}

TEST_CASE("nope_temperature: decoding steps and tiles use the true query position",
          "[position][nope_temperature]") {
  torch::manual_seed(61);
  // floor_scale 4: the factor steps at positions 3, 7, 11, … so 20 positions see five values.
  auto s = make_scheme("nope_temperature", "{floor_scale: 4, attn_scale: 0.5}", test_context(2, 8));
  const torch::Tensor q = torch::randn({1, 2, 20, 8}), k = torch::randn({1, 2, 20, 8});
  const torch::Tensor pos = torch::arange(20, torch::kLong);
  const torch::Tensor full = s->rotate(q, k, pos, pos).first;
  const torch::Tensor step = s->rotate(q.narrow(2, 17, 1), k, positions({17}), pos).first;
  REQUIRE_TENSORS_CLOSE(step, full.narrow(2, 17, 1), 0.0);
  // Position 17: ⌊18/4⌋ = 4, factor 1 + 0.5·ln 5.
  REQUIRE_TENSORS_CLOSE(step, q.narrow(2, 17, 1) * float(1 + 0.5 * std::log(5.0)), 1e-6);
  REQUIRE_TENSORS_CLOSE(full.narrow(2, 0, 3), q.narrow(2, 0, 3), 0.0);  // below the first step
  // inspect: the step table starts at position 3 with 1 + 0.5·ln 2.
  const torch::Tensor steps = inspect_table(*s, 4, "steps");
  REQUIRE(steps[0][0].item<double>() == 3.0);
  REQUIRE(std::abs(steps[0][1].item<double>() - (1 + 0.5 * std::log(2.0))) < 1e-12);
}

TEST_CASE("nope_temperature: bad settings name the key", "[position][nope_temperature][errors]") {
  const std::string msg = config_error("nope_temperature", "{floor_scale: 0}", test_context(2));
  INFO(msg);
  REQUIRE(contains(msg, "test.yaml:1:"));
  REQUIRE(contains(msg, "position.floor_scale: must be a finite number >= 1"));
  REQUIRE(contains(config_error("nope_temperature", "{attn_scale: -0.1}", test_context(2)),
                   "position.attn_scale: must be a finite number >= 0"));
  REQUIRE(contains(config_error("nope_temperature", "{attn_scale: .inf}", test_context(2)),
                   "position.attn_scale: expected a finite number"));
  REQUIRE(config_error("nope_temperature", "{attn_scale: 0}", test_context(2)).empty());
}

}  // namespace nope_temperature_test
