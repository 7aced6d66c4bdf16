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

}  // namespace config_errors_test
