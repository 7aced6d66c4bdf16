// RMSNorm and the gated RMSNorm of Gated DeltaNet's output: a worked example by hand, the
// forward-only fused CPU pass and the fused training pass (values and gradients) against the
// autograd tensor form, and the training pass's gradients against finite differences.

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <catch2/catch.hpp>

#include <cmath>

#include "layers/norm.h"
#include "support/tensor_match.h"

using namespace hybridlab;

TEST_CASE("RMSNorm and gated RMSNorm: a worked example", "[norm]") {
  // x = (3, 4): mean square 12.5, x / sqrt(12.5) = (0.848528, 1.131371); weight (1, 2).
  const bool fused = GENERATE(true, false);
  CAPTURE(fused);
  RMSNorm norm(2, /*eps=*/0.0, fused);
  GatedRMSNorm gated(2, /*eps=*/0.0, fused);
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
    // grad on: the fused training pass or the tensor form; off: the forward-only fused pass
    torch::AutoGradMode mode(grad);
    REQUIRE_TENSORS_CLOSE(norm.forward(x), want, 1e-12);
    REQUIRE_TENSORS_CLOSE(gated.forward(x, z), want_gated, 1e-12);
  }
}

TEST_CASE("RMSNorm and gated RMSNorm: fused pass == tensor form, strided input, fp32/fp64",
          "[norm]") {
  const bool fp64 = GENERATE(false, true);
  const auto dt = fp64 ? torch::kDouble : torch::kFloat;
  torch::manual_seed(5);
  RMSNorm norm(16, 1e-6, /*fused_kernels=*/false);
  GatedRMSNorm gated(16, 1e-6, /*fused_kernels=*/false);
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

namespace norm_test {

struct Grads {
  torch::Tensor y, dx, dw, dz;
};

// y and the gradients of sum(y ⊙ dy) through the module's forward (grad mode on).
Grads run_norm(bool gated, bool fused, const torch::Tensor& weight, const torch::Tensor& x_in,
               const torch::Tensor& z_in, const torch::Tensor& dy) {
  const int64_t D = weight.size(0);
  torch::Tensor x = x_in.detach().requires_grad_(true);
  torch::Tensor z = z_in.detach().requires_grad_(true);
  torch::Tensor y;
  torch::Tensor w;
  if (gated) {
    GatedRMSNorm m(D, 1e-6, fused);
    {
      torch::NoGradGuard no_grad;
      m.weight.copy_(weight);
    }
    w = m.weight;
    y = m.forward(x, z);
  } else {
    RMSNorm m(D, 1e-6, fused);
    {
      torch::NoGradGuard no_grad;
      m.weight.copy_(weight);
    }
    w = m.weight;
    y = m.forward(x);
  }
  (y * dy).sum().backward();
  return {y.detach(), x.grad(), w.grad(), gated ? z.grad() : torch::Tensor()};
}

}  // namespace norm_test

TEST_CASE("RMSNorm and gated RMSNorm in training: fused pass == tensor form, values and gradients",
          "[norm]") {
  const bool fp64 = GENERATE(false, true);
  const bool gated = GENERATE(false, true);
  CAPTURE(fp64, gated);
  const auto dt = fp64 ? torch::kDouble : torch::kFloat;
  torch::manual_seed(9);
  const int64_t D = 37;  // odd: no vector width divides it
  // Strided input, as the Gated DeltaNet layer hands over its kernel output.
  const torch::Tensor x = torch::randn({2, 3, 5, D}, dt).transpose(1, 2);
  const torch::Tensor z = torch::randn({2, 5, 3, D}, dt);
  const torch::Tensor dy = torch::randn({2, 5, 3, D}, dt);
  const torch::Tensor w = torch::empty({D}).uniform_(0.5, 1.5);
  const norm_test::Grads f = norm_test::run_norm(gated, true, w, x, z, dy);
  const norm_test::Grads t = norm_test::run_norm(gated, false, w, x, z, dy);
  const double tol = fp64 ? 1e-10 : 1e-5;
  REQUIRE_TENSORS_CLOSE(f.y, t.y, tol);
  REQUIRE_TENSORS_CLOSE(f.dx, t.dx, tol);
  REQUIRE_TENSORS_CLOSE(f.dw, t.dw, tol * 10);  // a sum over 30 rows
  if (gated) REQUIRE_TENSORS_CLOSE(f.dz, t.dz, tol);
}

TEST_CASE("RMSNorm and gated RMSNorm in training: fused gradients == finite differences (fp64)",
          "[norm]") {
  const bool gated = GENERATE(false, true);
  CAPTURE(gated);
  torch::manual_seed(10);
  const int64_t D = 6;
  const torch::Tensor x = torch::randn({3, D}, torch::kDouble);
  const torch::Tensor z = torch::randn({3, D}, torch::kDouble);
  const torch::Tensor dy = torch::randn({3, D}, torch::kDouble);
  const torch::Tensor w = torch::empty({D}, torch::kDouble).uniform_(0.5, 1.5);
  const norm_test::Grads g = norm_test::run_norm(gated, true, w.to(torch::kFloat), x, z, dy);
  // L(x, z) = sum(y ⊙ dy) evaluated directly from the definition, in double.
  const auto loss = [&](const torch::Tensor& xx, const torch::Tensor& zz, const torch::Tensor& ww) {
    const torch::Tensor n = xx / (xx.pow(2).mean(-1, true) + 1e-6).sqrt();
    torch::Tensor y = n * ww;
    if (gated) y = y * zz * torch::sigmoid(zz);
    return (y * dy).sum().item<double>();
  };
  const double h = 1e-6;
  const torch::Tensor wf = w.to(torch::kFloat).to(torch::kDouble);  // the weight the module holds
  for (int64_t i = 0; i < x.numel(); i += 5) {
    CAPTURE(i);
    torch::Tensor xp = x.clone(), xm = x.clone();
    xp.view(-1)[i] += h;
    xm.view(-1)[i] -= h;
    CHECK(g.dx.view(-1)[i].item<double>() ==
          Approx((loss(xp, z, wf) - loss(xm, z, wf)) / (2 * h)).epsilon(1e-7).margin(1e-9));
    if (gated) {
      torch::Tensor zp = z.clone(), zm = z.clone();
      zp.view(-1)[i] += h;
      zm.view(-1)[i] -= h;
      CHECK(g.dz.view(-1)[i].item<double>() ==
            Approx((loss(x, zp, wf) - loss(x, zm, wf)) / (2 * h)).epsilon(1e-7).margin(1e-9));
    }
  }
  for (int64_t d = 0; d < D; ++d) {
    torch::Tensor wp = wf.clone(), wm = wf.clone();
    wp[d] += h;
    wm[d] -= h;
    // The weight is fp32 in the module: its gradient arrives through the cast, in fp32.
    CHECK(g.dw[d].item<double>() ==
          Approx((loss(x, z, wp) - loss(x, z, wm)) / (2 * h)).epsilon(1e-6).margin(1e-6));
  }
}

TEST_CASE("RMSNorm in training: two threads give the one-thread gradients", "[norm]") {
  torch::manual_seed(11);
  const int64_t D = 37;
  const torch::Tensor x = torch::randn({4, 300, D});  // 1200 rows: several tasks per thread
  const torch::Tensor z = torch::randn({4, 300, D});
  const torch::Tensor dy = torch::randn({4, 300, D});
  const torch::Tensor w = torch::empty({D}).uniform_(0.5, 1.5);
  const int before = at::get_num_threads();
  at::set_num_threads(1);
  const norm_test::Grads one = norm_test::run_norm(true, true, w, x, z, dy);
  at::set_num_threads(2);
  const norm_test::Grads two = norm_test::run_norm(true, true, w, x, z, dy);
  at::set_num_threads(before);
  REQUIRE_TENSORS_CLOSE(two.dx, one.dx, 1e-6);
  REQUIRE_TENSORS_CLOSE(two.dz, one.dz, 1e-6);
  REQUIRE_TENSORS_CLOSE(two.dw, one.dw, 1e-4);  // summed in another order
}

TEST_CASE("l2_normalize in training: fused == tensor form, values and gradients, a worked example",
          "[norm]") {
  // (3, 4) → (0.6, 0.8) with eps 0, both forms.
  for (const bool fused : {false, true}) {
    CAPTURE(fused);
    const torch::Tensor v = torch::tensor({{3.0, 4.0}}, torch::kDouble).requires_grad_(true);
    REQUIRE_TENSORS_CLOSE(l2_normalize(v, 0.0, fused), torch::tensor({{0.6, 0.8}}, torch::kDouble),
                          1e-12);
  }
  const bool fp64 = GENERATE(false, true);
  CAPTURE(fp64);
  const auto dt = fp64 ? torch::kDouble : torch::kFloat;
  torch::manual_seed(12);
  // [B,T,H,dk] with a zero row: eps keeps it finite.
  torch::Tensor x0 = torch::randn({2, 9, 3, 32}, dt);
  x0[0][0][0].zero_();
  const torch::Tensor dy = torch::randn({2, 9, 3, 32}, dt);
  torch::Tensor xf = x0.clone().requires_grad_(true), xt = x0.clone().requires_grad_(true);
  const torch::Tensor yf = l2_normalize(xf, 1e-6, true), yt = l2_normalize(xt, 1e-6, false);
  (yf * dy).sum().backward();
  (yt * dy).sum().backward();
  const double tol = fp64 ? 1e-10 : 1e-5;
  REQUIRE_TENSORS_CLOSE(yf, yt, tol);
  // The zero row's gradient is dy / sqrt(eps), ~1000: the tolerance scales with it.
  REQUIRE_TENSORS_CLOSE(xf.grad(), xt.grad(), tol * (1 + xt.grad().abs().max().item<double>()));
}
