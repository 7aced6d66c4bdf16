// p-RoPE (Barbero et al., ICLR 2025, arXiv 2410.06205) through the `p_rope` plugin: its
// frequency set against the rope plugin's partial rotary at the same fraction
// (mixers_and_schemes_v2.md §9), p = 1 is RoPE, NoPE channels pass through, shifts, errors.

#include <cmath>

#include "scheme_loader.h"

using namespace hybridlab;
using namespace hybridlab::test;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace p_rope_test {
TEST_CASE("p_rope: keeps the top quarter of the full spectrum, unlike partial rotary 0.25",
          "[position][p_rope]") {
  // d = 256, p = 0.25 (§9): p-RoPE keeps base^(−2k/256) for k < 32, slowest base^(−62/256), and
  // sets k = 32 … 127 to 0; HF partial 0.25 rotates 64 channels with base^(−2k/64), slowest
  // base^(−62/64).
  auto p = make_scheme("p_rope", "{p: 0.25}", test_context(1, 256));
  auto partial = make_scheme("rope", "{partial_rotary_factor: 0.25}", test_context(1, 256));
  const torch::Tensor inv = inspect_table(*p, 4, "inv_freq");
  REQUIRE(inv.size(0) == 128);
  REQUIRE(std::abs(inv[0].item<double>() - 1.0) < 1e-15);
  REQUIRE(std::abs(inv[31].item<double>() - std::pow(10000.0, -62.0 / 256)) < 1e-15);
  REQUIRE(inv.slice(0, 32).abs().max().item<double>() == 0.0);
  REQUIRE((inv.slice(0, 0, 32) > 0).all().item<bool>());
  const torch::Tensor hf = inspect_table(*partial, 4, "inv_freq").select(1, 0);
  REQUIRE(hf.size(0) == 32);
  REQUIRE(std::abs(hf[31].item<double>() - std::pow(10000.0, -62.0 / 64)) < 1e-15);
  // 10000^(−62/256) = 0.107 vs 10000^(−62/64) = 1.33e-4: two different frequency sets.
  REQUIRE(inv[31].item<double>() / hf[31].item<double>() > 500);
}

TEST_CASE("p_rope: p = 1 is RoPE, and the dropped pairs pass through bit for bit",
          "[position][p_rope]") {
  torch::manual_seed(51);
  const torch::Tensor q = torch::randn({2, 2, 10, 16}), k = torch::randn({2, 2, 10, 16});
  const torch::Tensor pos = torch::arange(3, 13, torch::kLong);
  for (const char* layout : {"half", "interleaved"}) {
    CAPTURE(layout);
    const std::string l = std::string("layout: ") + layout;
    auto one = make_scheme("p_rope", "{p: 1, " + l + "}", test_context(2, 16));
    auto rope = make_scheme("rope", "{" + l + "}", test_context(2, 16));
    const auto [aq, ak] = one->rotate(q, k, pos, pos);
    const auto [bq, bk] = rope->rotate(q, k, pos, pos);
    REQUIRE_TENSORS_CLOSE(aq, bq, 1e-6);
    REQUIRE_TENSORS_CLOSE(ak, bk, 1e-6);
  }
  // p = 0.5 at head_dim 16: pairs 0..3 rotated, 4..7 NoPE. Half layout: pair k is (k, k+8), so
  // channels 4..7 and 12..15 are untouched; the kept pairs equal RoPE's.
  auto half = make_scheme("p_rope", "{p: 0.5}", test_context(2, 16));
  auto rope = make_scheme("rope", "", test_context(2, 16));
  const torch::Tensor rq = half->rotate(q, k, pos, pos).first;
  const torch::Tensor full = rope->rotate(q, k, pos, pos).first;
  for (int64_t start : {4, 12}) {
    REQUIRE(max_abs_diff(rq.narrow(-1, start, 4), q.narrow(-1, start, 4)) == 0.0);
    REQUIRE_TENSORS_CLOSE(rq.narrow(-1, start - 4, 4), full.narrow(-1, start - 4, 4), 1e-6);
    REQUIRE(max_abs_diff(rq.narrow(-1, start - 4, 4), q.narrow(-1, start - 4, 4)) > 1e-2);
  }
  // Interleaved: pair k is (2k, 2k+1), so channels 8..15 are untouched.
  auto inter = make_scheme("p_rope", "{p: 0.5, layout: interleaved}", test_context(2, 16));
  REQUIRE(max_abs_diff(inter->rotate(q, k, pos, pos).first.narrow(-1, 8, 8), q.narrow(-1, 8, 8)) ==
          0.0);
}

TEST_CASE("p_rope: logits depend on m − n only, decoding steps match", "[position][p_rope]") {
  torch::manual_seed(52);
  auto p = make_scheme("p_rope", "{p: 0.75}", test_context(2, 32));
  const torch::Tensor q = torch::randn({1, 2, 12, 32}), k = torch::randn({1, 2, 12, 32});
  const torch::Tensor pos = torch::arange(12, torch::kLong);
  const auto [q0, k0] = p->rotate(q, k, pos, pos);
  const auto [q1, k1] = p->rotate(q, k, pos + 777, pos + 777);
  REQUIRE_TENSORS_CLOSE(scores(q0, k0), scores(q1, k1), 1e-4);
  const auto [dq, dk] = p->rotate(q.narrow(2, 11, 1), k, positions({11}), pos);
  REQUIRE_TENSORS_CLOSE(scores(dq, dk), scores(q0, k0).narrow(2, 11, 1), 1e-5);
}

TEST_CASE("p_rope: bad settings name the key", "[position][p_rope][errors]") {
  for (const char* v : {"0", "-0.5", "1.5"}) {
    const std::string msg =
        config_error("p_rope", std::string("{p: ") + v + "}", test_context(2, 16));
    INFO(v << ": " << msg);
    REQUIRE(contains(msg, "test.yaml:1:"));
    REQUIRE(contains(msg, "position.p: must be in (0, 1]"));
  }
  REQUIRE(contains(config_error("p_rope", "{p: .nan}", test_context(2, 16)),
                   "position.p: expected a finite number"));
  // head_dim 16: 8 pairs, p = 0.1 keeps floor(0.8) = 0 of them.
  const std::string none = config_error("p_rope", "{p: 0.1}", test_context(2, 16));
  INFO(none);
  REQUIRE(contains(none, "position.p: keeps no frequency"));
  REQUIRE(contains(config_error("p_rope", "", test_context(2, 15)), "head_dim 15"));
  REQUIRE(config_error("p_rope", "{p: 0.125}", test_context(2, 16)).empty());
}

}  // namespace p_rope_test
