// xPos (Sun et al., ACL 2023, arXiv 2212.10554) through the `xpos` plugin: the per-pair decay of
// mixers_and_schemes_v2.md §5, its test values, shifts, reciprocal scales, decoding steps and
// storage in fp16.

#include <cmath>

#include "scheme_loader.h"

using namespace hybridlab;
using namespace hybridlab::test;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace xpos_test {
TEST_CASE("xpos: zeta_k and the pair factor at distance 1024 (reference values)",
          "[position][xpos]") {
  auto xpos = make_scheme("xpos", "", test_context(1, 8));
  // d = 8, γ = 0.4: ζ_k = (k/4 + 0.4)/1.4 = 0.285714, 0.464286, 0.642857, 0.821429 (§5 tests).
  const torch::Tensor zeta = inspect_table(*xpos, 4, "zeta").select(1, 0);
  REQUIRE_TENSORS_CLOSE(zeta, torch::tensor({0.285714f, 0.464286f, 0.642857f, 0.821429f}), 1e-6);
  // Pair k alone: q = e_2k at n = 1024, keys e_2k and e_2k+1 at m = 0 (interleaved pairs). The
  // pair's logit is ζ_k^((n−m)/B)·(cos, sin)((n−m)θ_k) with B = 512: amplitude ζ_k² =
  // 0.081633, 0.215561, 0.413265, 0.674745 (§5 tests), θ_k = 10000^(−2k/8).
  const std::vector<double> want = {0.081633, 0.215561, 0.413265, 0.674745};
  for (int64_t k = 0; k < 4; ++k) {
    CAPTURE(k);
    torch::Tensor q = torch::zeros({1, 1, 1, 8}, torch::kDouble);
    torch::Tensor keys = torch::zeros({1, 1, 2, 8}, torch::kDouble);
    q[0][0][0][2 * k] = 1.0;
    keys[0][0][0][2 * k] = 1.0;
    keys[0][0][1][2 * k + 1] = 1.0;
    const auto [rq, rk] = xpos->rotate(q, keys, positions({1024}), positions({0, 0}));
    const torch::Tensor l = scores(rq, rk)[0][0][0];  // [2]
    const double angle = 1024.0 * std::pow(10000.0, -2.0 * double(k) / 8.0);
    REQUIRE(std::abs(l[0].item<double>() - want[size_t(k)] * std::cos(angle)) < 2e-6);
    REQUIRE(std::abs(l[1].item<double>() - want[size_t(k)] * std::sin(angle)) < 2e-6);
    REQUIRE(std::abs(std::hypot(l[0].item<double>(), l[1].item<double>()) - want[size_t(k)]) <
            1e-6);
  }
}

TEST_CASE("xpos: shifts leave the logits unchanged, q and k scales are reciprocal",
          "[position][xpos]") {
  torch::manual_seed(31);
  for (const char* layout : {"interleaved", "half"}) {
    CAPTURE(layout);
    auto xpos = make_scheme("xpos", std::string("{layout: ") + layout + "}", test_context(2, 16));
    const torch::Tensor q = torch::randn({2, 2, 9, 16}, torch::kDouble);
    const torch::Tensor k = torch::randn({2, 2, 9, 16}, torch::kDouble);
    const torch::Tensor pos = torch::arange(9, torch::kLong) * 37;
    const auto [q0, k0] = xpos->rotate(q, k, pos, pos);
    const torch::Tensor s0 = scores(q0, k0);
    // fp64: the centre moves with the positions and cancels (§5: ~1e-12).
    for (int64_t shift : {1, 1000, 30000}) {
      CAPTURE(shift);
      const auto [q1, k1] = xpos->rotate(q, k, pos + shift, pos + shift);
      REQUIRE(max_abs_diff(scores(q1, k1), s0) <= 1e-10 * s0.abs().max().item<double>());
    }
    // Equal positions: the scales ζ^((n−c)/B) and ζ^(−(n−c)/B) multiply to 1 exactly in exact
    // arithmetic and the rotation is orthogonal, so q_n'·q_n' = |q_n|² for the same vector.
    const auto [qq, kq] = xpos->rotate(q, q, pos, pos);
    const torch::Tensor diag = (qq * kq).sum(-1);
    REQUIRE(max_abs_diff(diag, (q * q).sum(-1)) <= 1e-12 * diag.abs().max().item<double>());
    // ... while each side alone is scaled: position 0 is 148 before the centre 148 (positions
    // 0..296), so its pair 0 is scaled by ζ_0^(−148/512) = (1/0.285714)^(0.289) = 1.4363.
    const double pair0 =
        std::hypot(qq[0][0][0][0].item<double>(),
                   qq[0][0][0][std::string(layout) == "half" ? 8 : 1].item<double>());
    const double raw0 =
        std::hypot(q[0][0][0][0].item<double>(),
                   q[0][0][0][std::string(layout) == "half" ? 8 : 1].item<double>());
    REQUIRE(std::abs(pair0 / raw0 - std::pow(1.4 / 0.4, 148.0 / 512.0)) < 1e-9);
    // The decay: moving the keys back by 512 multiplies every pair's amplitude by ζ_k < 1, so
    // moving only the keys changes the logits.
    const auto [q2, k2] = xpos->rotate(q, k, pos, pos - 512);
    REQUIRE(max_abs_diff(scores(q2, k2), s0) > 1e-2);
  }
}

TEST_CASE("xpos: a decoding step and a query tile equal the rows of one call", "[position][xpos]") {
  torch::manual_seed(32);
  auto xpos = make_scheme("xpos", "", test_context(4, 16));
  const torch::Tensor q = torch::randn({1, 4, 40, 16}, torch::kDouble);
  const torch::Tensor k = torch::randn({1, 2, 40, 16}, torch::kDouble);  // GQA: 2 key heads
  const torch::Tensor pos = torch::arange(40, torch::kLong);
  const auto [fq, fk] = xpos->rotate(q, k, pos, pos);
  const torch::Tensor full = scores(fq, fk.repeat_interleave(2, 1));
  // Step t = 25 with the 26 cached keys: the centre is 13 instead of 20, the logits the same.
  const auto [dq, dk] =
      xpos->rotate(q.narrow(2, 25, 1), k.narrow(2, 0, 26), positions({25}), pos.narrow(0, 0, 26));
  REQUIRE_TENSORS_CLOSE(scores(dq, dk.repeat_interleave(2, 1)),
                        full.narrow(2, 25, 1).narrow(3, 0, 26), 1e-12);
  const auto [tq, tk] = xpos->rotate(q.narrow(2, 8, 8), k, pos.narrow(0, 8, 8), pos);
  REQUIRE_TENSORS_CLOSE(scores(tq, tk.repeat_interleave(2, 1)), full.narrow(2, 8, 8), 1e-12);
}

TEST_CASE("xpos: centred scales keep fp16 finite where uncentred ones overflow",
          "[position][xpos]") {
  // 8192 positions starting at 100000: centred, the largest scale is (1/ζ_0)^(4096/512) = 3.5^8
  // = 22518 < 65504; from position 0 it would be 3.5^(108191/512), far past fp16's maximum.
  auto xpos = make_scheme("xpos", "", test_context(1, 8));
  const torch::Tensor pos = torch::arange(100000, 108192, torch::kLong);
  const torch::Tensor ones = torch::ones({1, 1, 8192, 8}, torch::kHalf);
  const auto [rq, rk] = xpos->rotate(ones, ones, pos, pos);
  REQUIRE(torch::isfinite(rq).all().item<bool>());
  REQUIRE(torch::isfinite(rk).all().item<bool>());
  REQUIRE(rk.abs().max().item<double>() < 65504);
  REQUIRE(rk.abs().max().item<double>() > 10000);  // the scale really is large at the ends
  // At position 101024, 3072 before the centre 104096 (scale 3.5^6 = 1838 on q, its reciprocal on
  // k, both normal fp16 numbers) the pair-0 amplitudes multiply to |(1,1)|² = 2 up to fp16
  // rounding.
  const torch::Tensor q0 = rq[0][0][1024].to(torch::kDouble),
                      k0 = rk[0][0][1024].to(torch::kDouble);
  const double qa = std::hypot(q0[0].item<double>(), q0[1].item<double>());
  const double ka = std::hypot(k0[0].item<double>(), k0[1].item<double>());
  REQUIRE(std::abs(qa / std::sqrt(2.0) - std::pow(3.5, 6.0)) < 2.0);
  REQUIRE(std::abs(qa * ka / 2.0 - 1.0) < 3e-3);
  // A span of 10000 positions needs 3.5^(5000/512) = 2.0e5 > 65504: refused in fp16, with the
  // span named, instead of infinities; fine in bf16.
  const torch::Tensor wide = torch::arange(10000, torch::kLong);
  const torch::Tensor w16 = torch::ones({1, 1, 10000, 8}, torch::kHalf);
  REQUIRE_THROWS_WITH(xpos->rotate(w16, w16, wide, wide),
                      Catch::Contains("positions 0..9999") && Catch::Contains("fp16 maximum"));
  const auto [bq, bk] =
      xpos->rotate(w16.to(torch::kBFloat16), w16.to(torch::kBFloat16), wide, wide);
  REQUIRE(torch::isfinite(bq).all().item<bool>());
  REQUIRE(torch::isfinite(bk).all().item<bool>());
}

TEST_CASE("xpos: bad settings name the key", "[position][xpos][errors]") {
  for (const char* v : {"0", "-512"}) {
    const std::string msg =
        config_error("xpos", std::string("{scale_base: ") + v + "}", test_context(2, 16));
    INFO(v << ": " << msg);
    REQUIRE(contains(msg, "test.yaml:1:"));
    REQUIRE(contains(msg, "position.scale_base: must be a finite number > 0"));
  }
  // The config reader itself refuses .nan and .inf, at the key.
  REQUIRE(contains(config_error("xpos", "{scale_base: .inf}", test_context(2, 16)),
                   "position.scale_base: expected a finite number"));
  REQUIRE(contains(config_error("xpos", "{gamma: .nan}", test_context(2, 16)),
                   "position.gamma: expected a finite number"));
  REQUIRE(contains(config_error("xpos", "{gamma: 0}", test_context(2, 16)),
                   "position.gamma: must be a finite number > 0"));
  REQUIRE(
      contains(config_error("xpos", "{layout: pairs}", test_context(2, 16)), "position.layout"));
  REQUIRE(contains(config_error("xpos", "", test_context(2, 15)), "head_dim 15"));
  const std::string bi = config_error("xpos", "", test_context(2, 16, false));
  INFO(bi);
  REQUIRE(contains(bi, "causal"));
  REQUIRE(config_error("xpos", "{scale_base: 2048, gamma: 0.5}", test_context(2, 16)).empty());
}

}  // namespace xpos_test
