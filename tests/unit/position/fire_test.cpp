// FIRE (Li et al., ICLR 2024, arXiv 2310.04418) through the `fire` plugin: the progressive
// interpolation of mixers_and_schemes_v2.md §6 at its test values, the learned threshold, the
// absolute query position (not Toeplitz), decoding rows and gradients.

#include <cmath>

#include "scheme_loader.h"

using namespace hybridlab;
using namespace hybridlab::test;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace fire_test {
namespace {
// Makes the MLP pass its input through: hidden unit 0 = x (ReLU is the identity on [0, 1]),
// head h = (h + 1)·unit 0. logit_bias then returns (h + 1)·ψ(i−j)/(ψ(max(i, L)) + ε).
void identity_mlp(PositionScheme& s) {
  torch::NoGradGuard no_grad;
  auto p = s.named_parameters();
  for (const char* name : {"mlp_in.weight", "mlp_in.bias", "mlp_out.weight"}) p[name].zero_();
  p["mlp_in.weight"][0][0] = 1.0;
  p["mlp_out.weight"].select(1, 0).copy_(torch::arange(1, p["mlp_out.weight"].size(0) + 1));
}
double input_at(PositionScheme& s, int64_t i, int64_t j) {
  return s.logit_bias(positions({i}), positions({j}))[0][0][0].item<double>();
}
}  // namespace

TEST_CASE("fire: MLP inputs at the reference's hand-checked values (c = 0.1, L = 512)",
          "[position][fire]") {
  auto fire = make_scheme("fire", "", test_context(2));
  identity_mlp(*fire);
  // ψ(x) = ln(|0.1x| + 1); input ψ(i−j)/(ψ(max(i, 512)) + 1e-6) (§6 tests).
  REQUIRE(std::abs(input_at(*fire, 100, 90) - 0.1752548) < 1e-6);    // ln 2 / ln 52.2
  REQUIRE(std::abs(input_at(*fire, 1000, 999) - 0.0206517) < 1e-6);  // ln 1.1 / ln 101
  REQUIRE(std::abs(input_at(*fire, 2048, 1024) - 0.8707879) < 1e-6);
  REQUIRE(std::abs(input_at(*fire, 1000, 0) - 0.9999998) < 1e-6);  // ε keeps it below 1
  REQUIRE(std::abs(input_at(*fire, 511, 0) - 0.9995149) < 1e-6);   // i < L: below 1
  // Head 1 gets twice the input; the diagonal is 0.
  const torch::Tensor b = fire->logit_bias(positions({100}), positions({90, 100}));
  REQUIRE(b.sizes() == torch::IntArrayRef({2, 1, 2}));
  REQUIRE(std::abs(b[1][0][0].item<double>() - 2 * 0.1752548) < 2e-6);
  REQUIRE(b[0][0][1].item<double>() == 0.0);
  // The inspect table holds the same inputs.
  const torch::Tensor x = inspect_table(*fire, 101, "mlp_input");
  REQUIRE(std::abs(x[100][90].item<double>() - 0.1752548) < 1e-6);
}

TEST_CASE("fire: the learned threshold L = |L_mult * 512| and c change the inputs",
          "[position][fire]") {
  // L_mult 0.5: L = 256 < i = 300, so (300, 0) is ψ(300)/ψ(300) = 1 − ε/ψ(300); with L = 512 it
  // is ln 31 / ln 52.2 = 0.8682465.
  auto half = make_scheme("fire", "{L_mult_init: 0.5}", test_context(1));
  auto full = make_scheme("fire", "", test_context(1));
  identity_mlp(*half);
  identity_mlp(*full);
  REQUIRE(std::abs(input_at(*half, 300, 0) - 1.0) < 1e-6);
  REQUIRE(std::abs(input_at(*full, 300, 0) - 0.8682465) < 1e-6);
  // c = 1: (100, 90) is ln 11 / ln 513 = 0.3842610.
  auto c1 = make_scheme("fire", "{c_init: 1}", test_context(1));
  identity_mlp(*c1);
  REQUIRE(std::abs(input_at(*c1, 100, 90) - std::log(11.0) / std::log(513.0)) < 1e-6);
}

TEST_CASE("fire: depends on the absolute query position, rows and tiles match the full bias",
          "[position][fire]") {
  torch::manual_seed(41);
  auto fire = make_scheme("fire", "", test_context(4));
  const torch::Tensor pos = torch::arange(600, 664, torch::kLong);
  const torch::Tensor full = fire->logit_bias(pos, pos);
  REQUIRE(full.sizes() == torch::IntArrayRef({4, 64, 64}));
  // A decoding step at the true position i, and a tile of queries (the MLP's matmul rounds
  // differently at another row count: fp32 ulps).
  REQUIRE_TENSORS_CLOSE(fire->logit_bias(positions({663}), pos), full.slice(1, 63, 64), 1e-6);
  REQUIRE_TENSORS_CLOSE(fire->logit_bias(pos.slice(0, 16, 32), pos), full.slice(1, 16, 32), 1e-6);
  // Not Toeplitz: the same distance 10 at i = 100 and at i = 1100 gives ln 2/ln 52.2 = 0.17525
  // and ln 2/ln 111 = 0.14718.
  identity_mlp(*fire);
  REQUIRE(std::abs(input_at(*fire, 1100, 1090) - std::log(2.0) / std::log(111.0)) < 1e-6);
  REQUIRE(std::abs(input_at(*fire, 100, 90) - input_at(*fire, 1100, 1090)) > 0.02);
}

TEST_CASE("fire: a bf16 model computes positions and the MLP in fp32", "[position][fire]") {
  // In bf16, 999 and 1000 are the same number; the input at (1000, 999) must stay ln 1.1 / ln 101.
  auto fire = make_scheme("fire", "", test_context(1));
  identity_mlp(*fire);
  fire->to(torch::kBFloat16);
  const torch::Tensor b = fire->logit_bias(positions({1000}), positions({999}));
  REQUIRE(b.scalar_type() == torch::kBFloat16);
  REQUIRE(std::abs(b.item<double>() - 0.0206517) < 2e-4);  // bf16 rounding of the result only
}

TEST_CASE("fire: gradients reach c, L_mult and the MLP", "[position][fire]") {
  torch::manual_seed(42);
  auto fire = make_scheme("fire", "", test_context(2));
  // Positions below L = 512: the threshold is the normaliser, so L_mult gets a gradient.
  const torch::Tensor pos = torch::arange(0, 40, torch::kLong) * 10;
  const torch::Tensor bias = fire->logit_bias(pos, pos);
  const torch::Tensor w = torch::randn_like(bias);
  auto params = fire->named_parameters();
  std::vector<torch::Tensor> inputs;
  for (const auto& p : params) inputs.push_back(p.value());
  const auto grads = torch::autograd::grad({(bias * w).sum()}, inputs);
  for (size_t i = 0; i < grads.size(); ++i) {
    CAPTURE(params.keys()[i]);
    REQUIRE(torch::isfinite(grads[i]).all().item<bool>());
    REQUIRE(grads[i].abs().max().item<double>() > 0);
  }
}

TEST_CASE("fire: bad settings name the key", "[position][fire][errors]") {
  const std::string c = config_error("fire", "{c_init: 0}", test_context(2));
  INFO(c);
  REQUIRE(contains(c, "test.yaml:1:"));
  REQUIRE(contains(c, "position.c_init: must be a finite number > 0"));
  // The config reader itself refuses .nan and .inf, at the key.
  const std::string nan = config_error("fire", "{L: .nan}", test_context(2));
  INFO(nan);
  REQUIRE(contains(nan, "position.L: expected a finite number"));
  REQUIRE(contains(config_error("fire", "{L_mult_init: .inf}", test_context(2)),
                   "position.L_mult_init: expected a finite number"));
  REQUIRE(contains(config_error("fire", "{L_mult_init: -1}", test_context(2)),
                   "position.L_mult_init: must be a finite number > 0"));
  REQUIRE(contains(config_error("fire", "{eps: -1}", test_context(2)), "position.eps"));
  REQUIRE(contains(config_error("fire", "{mlp_width: 0}", test_context(2)),
                   "position.mlp_width: must be > 0"));
  REQUIRE(
      config_error("fire", "{mlp_width: 8, shared_across_layers: true}", test_context(2)).empty());
}

}  // namespace fire_test
