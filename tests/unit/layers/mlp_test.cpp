// SwiGLU: the automatic hidden width, a worked example by hand, and the fused training pass
// (values and gradients) against the tensor form and finite differences.

#include <torch/torch.h>

#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "layers/kernels/swiglu_cpu.h"
#include "layers/mlp.h"
#include "support/tensor_match.h"

namespace mlp_test {

using hybridlab::SwiGLU;

// x and the parameters' gradients of sum(y ⊙ dy) through a SwiGLU whose weights are copied from
// `from`.
struct Grads {
  torch::Tensor y, dx;
  std::vector<torch::Tensor> dparams;
};

Grads run_swiglu(SwiGLU& from, bool fused, const torch::Tensor& x_in, const torch::Tensor& dy) {
  SwiGLU m(x_in.size(-1), from.hidden(), fused);
  {
    torch::NoGradGuard no_grad;
    const auto src = from.parameters();
    auto dst = m.parameters();
    for (size_t i = 0; i < src.size(); ++i) dst[i].copy_(src[i]);
  }
  m.to(x_in.scalar_type());
  torch::Tensor x = x_in.detach().requires_grad_(true);
  const torch::Tensor y = m.forward(x);
  (y * dy).sum().backward();
  Grads g{y.detach(), x.grad(), {}};
  for (const auto& p : m.parameters()) g.dparams.push_back(p.grad());
  return g;
}

TEST_CASE("SwiGLU: the automatic hidden width rounds 8·d/3 up to multiple_of", "[mlp]") {
  hybridlab::MlpOptions o;
  CHECK(hybridlab::mlp_hidden_size(o, 64) == 192);   // 8·64/3 = 170.7 → 192
  CHECK(hybridlab::mlp_hidden_size(o, 96) == 256);   // 256 exactly
  CHECK(hybridlab::mlp_hidden_size(o, 100) == 320);  // 266.7 → 320
  o.intermediate_size = 500;
  CHECK(hybridlab::mlp_hidden_size(o, 64) == 500);
}

TEST_CASE("SwiGLU: a worked example", "[mlp]") {
  // d_model 1, hidden 2: gate weights (1, 2), up weights (3, -1), down weights (1, 1); x = 1:
  // SiLU(1) · 3 + SiLU(2) · (−1) = 0.731059 · 3 − 1.761594 = 0.431582.
  const bool fused = GENERATE(true, false);
  CAPTURE(fused);
  SwiGLU m(1, 2, fused);
  {
    torch::NoGradGuard no_grad;
    auto p = m.named_parameters();
    p["gate_proj.weight"].copy_(torch::tensor({{1.0}, {2.0}}));
    p["up_proj.weight"].copy_(torch::tensor({{3.0}, {-1.0}}));
    p["down_proj.weight"].copy_(torch::tensor({{1.0, 1.0}}));
  }
  const torch::Tensor x = torch::tensor({{1.0f}}).requires_grad_(true);
  const torch::Tensor y = m.forward(x);
  const double silu1 = 1 / (1 + std::exp(-1.0)), silu2 = 2 / (1 + std::exp(-2.0));
  CHECK(y.item<double>() == Approx(3 * silu1 - silu2).epsilon(1e-6));
}

TEST_CASE("SwiGLU in training: fused pass == tensor form, values and gradients", "[mlp]") {
  const bool fp64 = GENERATE(false, true);
  CAPTURE(fp64);
  const auto dt = fp64 ? torch::kDouble : torch::kFloat;
  torch::manual_seed(21);
  SwiGLU ref(24, 37);  // odd hidden width
  const torch::Tensor x = torch::randn({3, 5, 24}, dt);
  const torch::Tensor dy = torch::randn({3, 5, 24}, dt);
  const Grads f = run_swiglu(ref, true, x, dy);
  const Grads t = run_swiglu(ref, false, x, dy);
  const double tol = fp64 ? 1e-10 : 1e-5;
  REQUIRE_TENSORS_CLOSE(f.y, t.y, tol);
  REQUIRE_TENSORS_CLOSE(f.dx, t.dx, tol);
  REQUIRE(f.dparams.size() == 3);
  for (size_t i = 0; i < f.dparams.size(); ++i) {
    CAPTURE(i);
    REQUIRE_TENSORS_CLOSE(f.dparams[i], t.dparams[i], tol * 10);  // sums over 15 rows
  }
}

TEST_CASE("swiglu_fused_cpu: gradients == finite differences (fp64)", "[mlp]") {
  torch::manual_seed(22);
  const torch::Tensor a = torch::randn({4, 7}, torch::kDouble);
  const torch::Tensor b = torch::randn({4, 7}, torch::kDouble);
  const torch::Tensor dh = torch::randn({4, 7}, torch::kDouble);
  const torch::Tensor ag = a.clone().requires_grad_(true), bg = b.clone().requires_grad_(true);
  (hybridlab::swiglu_fused_cpu(ag, bg) * dh).sum().backward();
  const auto loss = [&](const torch::Tensor& aa, const torch::Tensor& bb) {
    return (aa * torch::sigmoid(aa) * bb * dh).sum().item<double>();
  };
  const double h = 1e-6;
  for (int64_t i = 0; i < a.numel(); i += 3) {
    CAPTURE(i);
    torch::Tensor ap = a.clone(), am = a.clone(), bp = b.clone(), bm = b.clone();
    ap.view(-1)[i] += h;
    am.view(-1)[i] -= h;
    bp.view(-1)[i] += h;
    bm.view(-1)[i] -= h;
    CHECK(ag.grad().view(-1)[i].item<double>() ==
          Approx((loss(ap, b) - loss(am, b)) / (2 * h)).epsilon(1e-7).margin(1e-9));
    CHECK(bg.grad().view(-1)[i].item<double>() ==
          Approx((loss(a, bp) - loss(a, bm)) / (2 * h)).epsilon(1e-7).margin(1e-9));
  }
  CHECK_THROWS_WITH(hybridlab::swiglu_fused_cpu(a, b.to(torch::kFloat)),
                    Catch::Matchers::Contains("one dtype"));
}

}  // namespace mlp_test
