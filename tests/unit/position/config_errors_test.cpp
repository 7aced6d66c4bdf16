// Bad settings fail when the scheme is built (config time), with the file, the key and a fix.

#include "scheme_loader.h"

using namespace hybridlab;
using namespace hybridlab::test;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace config_errors_test {
TEST_CASE("rope: odd head_dim and odd rotary dims are config errors", "[position][errors]") {
  const std::string odd = config_error("rope", "", test_context(2, 33));
  INFO(odd);
  REQUIRE(contains(odd, "test.yaml:1:"));
  REQUIRE(contains(odd, "head_dim 33"));
  REQUIRE(contains(odd, "even"));
  // 64 × 0.3 = 19.2 → int 19 rotary channels: odd.
  const std::string partial =
      config_error("rope", "{partial_rotary_factor: 0.3}", test_context(2, 64));
  INFO(partial);
  REQUIRE(contains(partial, "position.partial_rotary_factor"));
  REQUIRE(contains(partial, "19 rotary channels"));
  REQUIRE(config_error("rope", "{partial_rotary_factor: 0.25}", test_context(2, 64)).empty());
  REQUIRE(contains(config_error("rope", "{partial_rotary_factor: 1.5}", test_context(2, 64)),
                   "must be in (0, 1]"));
}

TEST_CASE("rope: unknown scaling type lists the valid ones", "[position][errors]") {
  const std::string msg =
      config_error("rope", "{rope_scaling: {type: yarnn}}", test_context(2, 64));
  INFO(msg);
  REQUIRE(contains(msg, "position.rope_scaling.type"));
  REQUIRE(contains(msg, "unknown rope_scaling type 'yarnn'"));
  REQUIRE(contains(msg, "did you mean 'yarn'"));
  REQUIRE(contains(msg, "default, linear, ntk, dynamic, yarn, longrope, llama3"));
}

TEST_CASE("rope: factor <= 0 and a missing factor", "[position][errors]") {
  for (const char* type : {"linear", "ntk", "dynamic", "yarn", "llama3"}) {
    for (const char* f : {"0", "-2"}) {
      const std::string msg = config_error(
          "rope", std::string("{rope_scaling: {type: ") + type + ", factor: " + f + "}}",
          test_context(2, 64));
      INFO(type << " factor " << f << ": " << msg);
      REQUIRE(contains(msg, "position.rope_scaling.factor: must be > 0"));
    }
    const std::string missing = config_error(
        "rope", std::string("{rope_scaling: {type: ") + type + "}}", test_context(2, 64));
    INFO(missing);
    REQUIRE(contains(missing, "position.rope_scaling.factor: required key is missing"));
  }
}

TEST_CASE("rope: longrope factor lists of the wrong length say expected and got",
          "[position][errors]") {
  std::string short31 = "[", long32 = "[";
  for (int i = 0; i < 31; ++i) short31 += std::string(i ? ", " : "") + "1.0";
  for (int i = 0; i < 32; ++i) long32 += std::string(i ? ", " : "") + "2.0";
  const std::string msg = config_error("rope",
                                       "{rope_scaling: {type: longrope, short_factor: " + short31 +
                                           "], long_factor: " + long32 + "]}}",
                                       test_context(2, 64));
  INFO(msg);
  REQUIRE(contains(msg, "position.rope_scaling.short_factor: expected 32 values"));
  REQUIRE(contains(msg, "got 31"));
  REQUIRE_FALSE(contains(msg, "long_factor"));
}

TEST_CASE("rope: keys of another scaling type are unknown keys", "[position][errors]") {
  const std::string msg = config_error(
      "rope", "{rope_scaling: {type: linear, factor: 2, beta_fast: 16}}", test_context(2, 64));
  INFO(msg);
  REQUIRE(contains(msg, "position.rope_scaling.beta_fast: unknown key 'beta_fast'"));
  const std::string typo = config_error("rope", "{rope_thetta: 500000}", test_context(2, 64));
  INFO(typo);
  REQUIRE(contains(typo, "did you mean 'rope_theta'"));
}

TEST_CASE("learned: a table shorter than the longest length is refused unless clamped",
          "[position][errors]") {
  PositionContext ctx = test_context(2, 8);
  ctx.train_length = 256;
  ctx.max_length = 2048;  // an eval length past the table
  const std::string msg = config_error("learned", "{max_position_embeddings: 1024}", ctx);
  INFO(msg);
  REQUIRE(contains(msg, "position.max_position_embeddings"));
  REQUIRE(contains(msg, "1024 rows"));
  REQUIRE(contains(msg, "length 2048"));
  REQUIRE(contains(msg, "beyond: clamp"));
  REQUIRE(config_error("learned", "{max_position_embeddings: 1024, beyond: clamp}", ctx).empty());
  REQUIRE(config_error("learned", "{max_position_embeddings: 2048}", ctx).empty());
  REQUIRE(
      contains(config_error("learned", "{beyond: wrap}", test_context(2, 8)), "expected error"));
}

TEST_CASE("alibi: causal form on a bidirectional model is refused", "[position][errors]") {
  const std::string msg = config_error("alibi", "{mode: causal}", test_context(4, 16, false));
  INFO(msg);
  REQUIRE(contains(msg, "position.mode"));
  REQUIRE(contains(msg, "bidirectional"));
  REQUIRE(contains(msg, "symmetric"));
  REQUIRE(config_error("alibi", "{mode: causal}", test_context(4, 16, true)).empty());
  const std::string n = config_error("alibi", "{slopes: [0.5, 0.25]}", test_context(4, 16));
  INFO(n);
  REQUIRE(contains(n, "expected one slope per head: 4 values, got 2"));
}

TEST_CASE("t5 and shaw: ranges", "[position][errors]") {
  REQUIRE(contains(config_error("t5", "{num_buckets: 2, bidirectional: true}", test_context(2, 8)),
                   "position.num_buckets: must be >= 4"));
  REQUIRE(contains(config_error("t5", "{max_distance: 8}", test_context(2, 8)),
                   "position.max_distance: must be larger"));
  REQUIRE(contains(config_error("shaw", "{max_relative_position: 0}", test_context(2, 8)),
                   "position.max_relative_position: must be > 0"));
}

TEST_CASE("rope: rotate_num_heads above n_heads or across a GQA group", "[position][errors]") {
  const std::string big = config_error("rope", "{rotate_num_heads: 5}", test_context(4, 16));
  INFO(big);
  REQUIRE(contains(big, "test.yaml:1:"));
  REQUIRE(contains(big, "position.rotate_num_heads: must be in [0, n_heads = 4]"));
  REQUIRE(contains(config_error("rope", "{rotate_num_heads: -1}", test_context(4, 16)),
                   "position.rotate_num_heads"));
  PositionContext gqa = test_context(4, 16);
  gqa.n_kv_heads = 2;
  const std::string group = config_error("rope", "{rotate_num_heads: 1}", gqa);
  INFO(group);
  REQUIRE(contains(group, "must be a multiple of 2"));
  REQUIRE(config_error("rope", "{rotate_num_heads: 2}", gqa).empty());
  REQUIRE(config_error("rope", "{rotate_num_heads: 4}", test_context(4, 16)).empty());
}

TEST_CASE("xpos: a scale_base whose scale overflows a float at the lengths used is refused",
          "[position][errors]") {
  // The largest scale is (1/zeta_0)^(reach/B), reach = max |p - c| = floor(L/2) for centre
  // c = floor(L/2); zeta_0 = 0.4/1.4, so 1/zeta_0 = 3.5. It must stay below FLT_MAX =
  // 3.4028235e38 (ln = 88.7228391): B > reach * ln 3.5 / 88.7228391. At L = 128 (reach 64) that is
  // B > 64 * 1.2527630 / 88.7228391 = 0.90368; at L = 4096 (reach 2048), B > 28.918.
  const std::string tiny = config_error("xpos", "{scale_base: 1e-300}", test_context(2, 16));
  INFO(tiny);
  REQUIRE(contains(tiny, "test.yaml:1:"));
  REQUIRE(contains(tiny,
                   "position.scale_base: 1e-300 makes the scale zeta^(n/B) overflow a "
                   "float at length 128"));
  REQUIRE(contains(tiny, "use scale_base > 0.903677"));
  CHECK_FALSE(config_error("xpos", "{scale_base: 0.9}", test_context(2, 16)).empty());
  CHECK(config_error("xpos", "{scale_base: 0.91}", test_context(2, 16)).empty());
  PositionContext long_ctx = test_context(2, 16);
  long_ctx.max_length = 4096;
  CHECK(contains(config_error("xpos", "{scale_base: 28.9}", long_ctx), "at length 4096"));
  CHECK(config_error("xpos", "{scale_base: 28.95}", long_ctx).empty());
  // Just inside the limit the scales are finite floats at every position of the length.
  auto ok = make_scheme("xpos", "{scale_base: 0.91}", test_context(2, 16));
  const torch::Tensor scale = inspect_table(*ok, 128, "query_scale");
  CHECK(torch::isfinite(scale).all().item<bool>());
  CHECK(scale.max().item<float>() > 1e38f);  // e^(64 * 1.2527630 / 0.91) = e^88.11 = 1.85e38
}

TEST_CASE("fox: a bias_init past a float, and a tau_min whose bias is infinite, are refused",
          "[position][errors]") {
  // FLT_MAX = 3.4028235e38: 3.4e38 fits a float, 3.5e38 does not.
  const std::string big = config_error("fox", "{bias_init: 3.5e38}", test_context(2, 16));
  INFO(big);
  REQUIRE(contains(big, "test.yaml:1:"));
  REQUIRE(contains(big, "position.bias_init: must be a finite number a float holds"));
  CHECK(contains(config_error("fox", "{bias_init: -3.5e38}", test_context(2, 16)),
                 "position.bias_init"));
  CHECK(config_error("fox", "{bias_init: 3.4e38}", test_context(2, 16)).empty());
  // b = -ln(expm1(1/tau)): expm1 overflows a double past 1/tau = ln(DBL_MAX) = 709.78, i.e. below
  // tau = 0.0014089; tau = 0.0015 (1/tau = 666.7) still gives a finite b = -666.7.
  const std::string tau =
      config_error("fox", "{gate: fixed, tau_min: 0.001, tau_max: 8}", test_context(2, 16));
  INFO(tau);
  CHECK(contains(tau, "position.tau_min: 0.001 tokens makes the gate's bias"));
  CHECK(config_error("fox", "{gate: fixed, tau_min: 0.0015, tau_max: 8}", test_context(2, 16))
            .empty());
}

}  // namespace config_errors_test
