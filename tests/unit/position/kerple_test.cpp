// KERPLE (Chi et al., NeurIPS 2022, arXiv 2205.09921) through the `kerple` plugin: the reference
// values of mixers_and_schemes_v2.md §7, the ALiBi special case, the projection of the
// parameters, tiles, decoding rows and shifts.

#include <cmath>

#include "scheme_loader.h"

using namespace hybridlab;
using namespace hybridlab::test;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace kerple_test {
namespace {
void set_parameters(PositionScheme& s, const torch::Tensor& r1, const torch::Tensor& r2) {
  torch::NoGradGuard no_grad;
  s.named_parameters()["r1"].copy_(r1);
  s.named_parameters()["r2"].copy_(r2);
}
}  // namespace

TEST_CASE("kerple: log and power kernels at the reference's hand-checked values",
          "[position][kerple]") {
  // Log kernel, r1 = r2 = 1, distance 3: −ln(1 + 3) = −1.3862944 (§7 tests).
  auto log = make_scheme("kerple", "{r1_init: 1, r2_init: 1}", test_context(2));
  const torch::Tensor b = log->logit_bias(positions({3}), positions({0, 1, 2, 3}));
  REQUIRE(b.sizes() == torch::IntArrayRef({2, 1, 4}));
  // Distances 3, 2, 1, 0: −ln 4, −ln 3, −ln 2, 0.
  const torch::Tensor want = torch::tensor({-1.3862944f, -1.0986123f, -0.6931472f, 0.0f});
  REQUIRE_TENSORS_CLOSE(b[0][0], want, 1e-6);
  REQUIRE_TENSORS_CLOSE(b[1][0], want, 1e-6);
  // Power kernel, r1 = 0.5, r2 = 1.5, distance 4: −0.5·4^1.5 = −4; distance 1: −0.5.
  auto power =
      make_scheme("kerple", "{kernel: power, r1_init: 0.5, r2_init: 1.5}", test_context(1));
  REQUIRE_TENSORS_CLOSE(power->logit_bias(positions({4}), positions({0, 3, 4}))[0][0],
                        torch::tensor({-4.0f, -0.5f, 0.0f}), 1e-6);
  // Per-head parameters: head 1 with r1 = 2, r2 = 0.5 at distance 6: −2·ln(1 + 3) = −2.7725887.
  set_parameters(*log, torch::tensor({1.0f, 2.0f}), torch::tensor({1.0f, 0.5f}));
  REQUIRE(std::abs(log->logit_bias(positions({6}), positions({0}))[1][0][0].item<double>() -
                   (-2.7725887)) < 1e-6);
}

TEST_CASE("kerple: the power kernel with exponent 1 and ALiBi's slopes is ALiBi",
          "[position][kerple]") {
  // §7: power with p = 1 and the ALiBi slopes equals ALiBi. Symmetric ALiBi is −m|i−j|.
  auto alibi = make_scheme("alibi", "{mode: symmetric}", test_context(8));
  auto power = make_scheme("kerple", "{kernel: power, r2_init: 1}", test_context(8));
  std::vector<float> slopes;
  for (int h = 1; h <= 8; ++h) slopes.push_back(std::exp2(-float(h)));  // 2^(−8h/8)
  set_parameters(*power, torch::tensor(slopes), torch::ones({8}));
  const torch::Tensor pos = torch::arange(40, torch::kLong);
  const torch::Tensor a = alibi->logit_bias(pos, pos), p = power->logit_bias(pos, pos);
  REQUIRE_TENSORS_CLOSE(p.slice(0, 0, 6), a.slice(0, 0, 6), 1e-6);
  // ... except where the reference's projection r ≥ 0.01 bites: slopes 2^−7 and 2^−8 are below
  // it and become 0.01, so those heads are −0.01·|i−j| (−0.39 at distance 39).
  REQUIRE_TENSORS_CLOSE(p.slice(0, 6, 8),
                        (-0.01 * (pos.unsqueeze(1) - pos.unsqueeze(0)).abs().to(torch::kFloat))
                            .unsqueeze(0)
                            .expand({2, 40, 40}),
                        1e-6);
}

TEST_CASE("kerple: parameters are projected into their domain before use, gradients finite",
          "[position][kerple]") {
  auto power = make_scheme("kerple", "{kernel: power}", test_context(2));
  // The reference init, projected: r1 in [0.01, 1), r2 in [0.01, 2).
  const torch::Tensor r1 = power->named_parameters()["r1"], r2 = power->named_parameters()["r2"];
  // Compared in float: the clamp's bound is float(0.01), just below the double 0.01.
  REQUIRE(r1.min().item<float>() >= 0.01f);
  REQUIRE(r1.max().item<float>() < 1.0f);
  REQUIRE(r2.min().item<float>() >= 0.01f);
  REQUIRE(r2.max().item<float>() < 2.0f);
  // An optimizer step that leaves the domain: the next use clamps (0.01 and 2 for the exponent).
  set_parameters(*power, torch::tensor({-1.0f, 0.3f}), torch::tensor({3.0f, -0.5f}));
  const torch::Tensor b = power->logit_bias(positions({2}), positions({0, 1, 2}));
  REQUIRE_TENSORS_CLOSE(r1.detach(), torch::tensor({0.01f, 0.3f}), 0.0);
  REQUIRE_TENSORS_CLOSE(r2.detach(), torch::tensor({2.0f, 0.01f}), 0.0);
  // Head 0: −0.01·d²; head 1: −0.3·d^0.01 (d = 2, 1, 0).
  REQUIRE_TENSORS_CLOSE(b[0][0], torch::tensor({-0.04f, -0.01f, 0.0f}), 1e-7);
  REQUIRE_TENSORS_CLOSE(b[1][0], torch::tensor({float(-0.3 * std::pow(2.0, 0.01)), -0.3f, 0.0f}),
                        1e-6);
  // d/dr2 of 0^r2 is masked to 0, not 0·ln 0 = NaN; d/dr2 of −r1·d^r2 = −r1·d^r2·ln d.
  const auto g = torch::autograd::grad({b.sum()}, {r1, r2});
  REQUIRE(torch::isfinite(g[0]).all().item<bool>());
  REQUIRE(torch::isfinite(g[1]).all().item<bool>());
  // Head 0 (r1 0.01, r2 2): −0.01·(4·ln 2 + 1·ln 1) = −0.0277259.
  REQUIRE(std::abs(g[1][0].item<double>() - (-0.01 * 4 * std::log(2.0))) < 1e-7);
  // A second call in the same graph leaves the version counter alone (autograd stays valid),
  // also when the first call had to clamp.
  set_parameters(*power, torch::tensor({-1.0f, 0.3f}), torch::tensor({3.0f, -0.5f}));
  const torch::Tensor b1 = power->logit_bias(positions({2}), positions({0, 1, 2}));
  const torch::Tensor b2 = power->logit_bias(positions({1}), positions({0, 1, 2}));
  REQUIRE_NOTHROW(torch::autograd::grad({(b1 + b2).sum()}, {r1, r2}));
}

TEST_CASE("kerple: tiles, decoding rows and shifts match the full bias", "[position][kerple]") {
  auto log = make_scheme("kerple", "", test_context(4));
  const torch::Tensor pos = torch::arange(48, torch::kLong);
  const torch::Tensor full = log->logit_bias(pos, pos);
  REQUIRE_TENSORS_CLOSE(log->logit_bias(pos.slice(0, 16, 32), pos), full.slice(1, 16, 32), 0.0);
  REQUIRE_TENSORS_CLOSE(log->logit_bias(positions({47}), pos), full.slice(1, 47, 48), 0.0);
  REQUIRE_TENSORS_CLOSE(log->logit_bias(pos + 1000, pos + 1000), full, 0.0);
  // Symmetric in i − j, zero on the diagonal, decreasing with distance.
  REQUIRE_TENSORS_CLOSE(full, full.transpose(1, 2), 0.0);
  REQUIRE(full.diagonal(0, 1, 2).abs().max().item<double>() == 0.0);
  REQUIRE((full[0][47].slice(0, 1) > full[0][47].slice(0, 0, 47)).all().item<bool>());
}

TEST_CASE("kerple: bad settings name the key", "[position][kerple][errors]") {
  const std::string k = config_error("kerple", "{kernel: gaussian}", test_context(2));
  INFO(k);
  REQUIRE(contains(k, "test.yaml:1:"));
  REQUIRE(contains(k, "position.kernel: expected log"));
  // The config reader itself refuses .nan and .inf, at the key.
  const std::string nan = config_error("kerple", "{r1_init: .nan}", test_context(2));
  INFO(nan);
  REQUIRE(contains(nan, "position.r1_init: expected a finite number"));
  REQUIRE(contains(config_error("kerple", "{r2_init: .inf}", test_context(2)),
                   "position.r2_init: expected a finite number"));
  REQUIRE(contains(config_error("kerple", "{r2_init: -1}", test_context(2)),
                   "position.r2_init: must be 0"));
  REQUIRE(contains(config_error("kerple", "{kernel: power, r2_init: 2.5}", test_context(2)),
                   "position.r2_init"));
  REQUIRE(
      contains(config_error("kerple", "{r1_init: 0.001}", test_context(2)), "position.r1_init"));
  REQUIRE(config_error("kerple", "{kernel: power, r1_init: 0.01, r2_init: 2}", test_context(2))
              .empty());
  REQUIRE(
      contains(config_error("kerple", "{r3_init: 1}", test_context(2)), "unknown key 'r3_init'"));
}

}  // namespace kerple_test
