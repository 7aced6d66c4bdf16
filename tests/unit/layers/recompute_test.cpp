// Recomputation in the backward (layers/kernels/recompute.h): the gradients of a function of inputs
// and of a parameter it reads directly equal autograd's through the same function kept whole.

#include <torch/torch.h>

#include <catch2/catch.hpp>

#include "layers/kernels/recompute.h"
#include "support/tensor_match.h"

using namespace hybridlab;

TEST_CASE("recompute_in_backward: values and gradients == the function kept whole", "[recompute]") {
  torch::manual_seed(1);
  const torch::Tensor a0 = torch::randn({3, 4}, torch::kDouble);
  const torch::Tensor b0 = torch::randn({4, 5}, torch::kDouble);
  const torch::Tensor p = torch::randn({5}, torch::kDouble).requires_grad_();
  const torch::Tensor fixed = torch::randn({3, 5}, torch::kDouble);  // no gradient wanted
  const auto fn = [&](const std::vector<torch::Tensor>& in) {
    return torch::tanh(torch::matmul(in[0], in[1]) * p) + in[2] * in[2];
  };
  const torch::Tensor weight = torch::randn({3, 5}, torch::kDouble);
  torch::Tensor grads[2][3];
  torch::Tensor outs[2];
  for (int i = 0; i < 2; ++i) {
    torch::Tensor a = a0.clone().requires_grad_(), b = b0.clone().requires_grad_();
    // The upstream op makes the inputs non-leaves, as a layer's projections are.
    const std::vector<torch::Tensor> in = {a * 2.0, b, fixed};
    outs[i] = i == 0 ? fn(in) : recompute_in_backward(fn, in, {p});
    (outs[i] * weight).sum().backward();
    grads[i][0] = a.grad();
    grads[i][1] = b.grad();
    grads[i][2] = p.grad().clone();
    p.grad().zero_();
  }
  REQUIRE_TENSORS_CLOSE(outs[1], outs[0], 1e-14);
  for (int k = 0; k < 3; ++k) {
    CAPTURE(k);
    REQUIRE_TENSORS_CLOSE(grads[1][k], grads[0][k], 1e-14);
  }
  // The forward keeps no graph of the function: only this node.
  torch::Tensor a = a0.clone().requires_grad_();
  const torch::Tensor y = recompute_in_backward(fn, {a, b0, fixed}, {});
  REQUIRE(y.grad_fn() != nullptr);
  CHECK(y.grad_fn()->next_edges().size() == 3);
  CHECK_THROWS_WITH(recompute_in_backward(fn, {a, torch::Tensor(), fixed}, {}),
                    Catch::Contains("every input must be defined"));
}
