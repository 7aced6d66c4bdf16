// RMSNorm and the gated RMSNorm of Gated DeltaNet's output: a worked example by hand, and the
// forward-only fused CPU pass against the autograd tensor form.

#include <torch/torch.h>

#include <catch2/catch.hpp>

#include <cmath>

#include "layers/norm.h"
#include "support/tensor_match.h"

using namespace hybridlab;

TEST_CASE("RMSNorm and gated RMSNorm: a worked example", "[norm]") {
  // x = (3, 4): mean square 12.5, x / sqrt(12.5) = (0.848528, 1.131371); weight (1, 2).
  RMSNorm norm(2, /*eps=*/0.0);
  GatedRMSNorm gated(2, /*eps=*/0.0);
  {
    torch::NoGradGuard no_grad;
    norm.weight.copy_(torch::tensor({1.0, 2.0}));
    gated.weight.copy_(torch::tensor({1.0, 2.0}));
  }
  const torch::Tensor x = torch::tensor({{3.0, 4.0}}, torch::kDouble);
  const double r = 1.0 / std::sqrt(12.5);
  const torch::Tensor want = torch::tensor({{3 * r, 2 * 4 * r}}, torch::kDouble);
  // z = (0, 1): silu(0) = 0, silu(1) = 1 / (1 + e^-1) = 0.731059.
  const torch::Tensor z = torch::tensor({{0.0, 1.0}}, torch::kDouble);
  const torch::Tensor want_gated =
      torch::tensor({{0.0, 2 * 4 * r / (1 + std::exp(-1.0))}}, torch::kDouble);
  for (bool grad : {false, true}) {
    CAPTURE(grad);
    torch::AutoGradMode mode(grad);  // grad on: the tensor form; off: the fused pass
    REQUIRE_TENSORS_CLOSE(norm.forward(x), want, 1e-12);
    REQUIRE_TENSORS_CLOSE(gated.forward(x, z), want_gated, 1e-12);
  }
}

TEST_CASE("RMSNorm and gated RMSNorm: fused pass == tensor form, strided input, fp32/fp64",
          "[norm]") {
  const bool fp64 = GENERATE(false, true);
  const auto dt = fp64 ? torch::kDouble : torch::kFloat;
  torch::manual_seed(5);
  RMSNorm norm(16, 1e-6);
  GatedRMSNorm gated(16, 1e-6);
  {
    torch::NoGradGuard no_grad;
    norm.weight.uniform_(0.5, 1.5);
    gated.weight.uniform_(0.5, 1.5);
  }
  // [B,H,T,D] viewed as [B,T,H,D], as the Gated DeltaNet layer hands its kernel output over.
  const torch::Tensor x = torch::randn({2, 3, 7, 16}, dt).transpose(1, 2);
  const torch::Tensor z = torch::randn({2, 7, 3, 16}, dt);
  const torch::Tensor tensor_norm = norm.forward(x).detach();
  const torch::Tensor tensor_gated = gated.forward(x, z).detach();
  REQUIRE(norm.forward(x).requires_grad());  // grad mode on, weight requires grad: tensor form
  torch::NoGradGuard no_grad;
  const double tol = fp64 ? 1e-12 : 1e-5;
  REQUIRE_TENSORS_CLOSE(norm.forward(x), tensor_norm, tol);
  REQUIRE_TENSORS_CLOSE(gated.forward(x, z), tensor_gated, tol);
}
