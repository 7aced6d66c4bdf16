// linear_cpu: y = x Wᵀ and its gradients, split over threads by rows or columns, against
// torch::linear and LibTorch's autograd in fp64 (both split directions, 1 and 2 threads, strided
// inputs, one input without gradient), and project()'s choice of path. matmul_cpu against
// torch::matmul the same way, with b read plain and transposed, from narrowed views; bmm_cpu and
// bmm_add_ against at::bmm.

#include <ATen/Parallel.h>
#include <torch/torch.h>
#include <catch2/catch.hpp>

#include <tuple>

#include "layers/kernels/linear_cpu.h"
#include "support/tensor_match.h"

namespace linear_cpu_test {

using hybridlab::test::max_abs_diff;

// Restores LibTorch's intra-op thread count when a test case ends, however it ends.
class IntraOpThreads {
 public:
  IntraOpThreads() : before_(at::get_num_threads()) {}
  ~IntraOpThreads() { at::set_num_threads(before_); }
  IntraOpThreads(const IntraOpThreads&) = delete;
  IntraOpThreads& operator=(const IntraOpThreads&) = delete;

 private:
  int before_;
};

// Output and gradients of sum(y ⊙ r) through f, for fresh leaves copied from x and w.
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> run(
    const std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&)>& f,
    const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& r) {
  const torch::Tensor xl = x.detach().clone().requires_grad_(true);
  const torch::Tensor wl = w.detach().clone().requires_grad_(true);
  const torch::Tensor y = f(xl, wl);
  (y * r).sum().backward();
  return {y.detach(), xl.grad(), wl.grad()};
}

}  // namespace linear_cpu_test

using namespace linear_cpu_test;

TEST_CASE("linear_cpu equals torch::linear and its gradients in fp64, split by rows and columns",
          "[linear_cpu]") {
  const IntraOpThreads restore;
  torch::manual_seed(11);
  // {x shape, out}: rows ≥ out splits y by rows and dW by columns (out < in); rows < out splits y
  // by columns and dW by rows.
  const std::vector<std::pair<std::vector<int64_t>, int64_t>> cases = {
      {{2, 5, 7}, 3}, {{1, 3, 4}, 9}, {{6, 16}, 16}};
  for (int threads : {1, 2}) {
    at::set_num_threads(threads);
    for (const auto& [shape, out] : cases) {
      const torch::Tensor x = torch::randn(shape, torch::kDouble);
      const torch::Tensor w = torch::randn({out, shape.back()}, torch::kDouble);
      std::vector<int64_t> yshape = shape;
      yshape.back() = out;
      const torch::Tensor r = torch::randn(yshape, torch::kDouble);
      const auto [y, dx, dw] = run(hybridlab::linear_cpu, x, w, r);
      const auto [y_ref, dx_ref, dw_ref] =
          run([](const torch::Tensor& a, const torch::Tensor& b) { return torch::linear(a, b); }, x,
              w, r);
      INFO("threads " << threads << ", x " << x.sizes() << ", out " << out);
      CHECK(y.sizes() == y_ref.sizes());
      CHECK(max_abs_diff(y, y_ref) < 1e-12);
      CHECK(max_abs_diff(dx, dx_ref) < 1e-12);
      CHECK(max_abs_diff(dw, dw_ref) < 1e-12);
      // An independent value: one output element by hand.
      const double by_hand = (x.reshape({-1, shape.back()})[0] * w[out - 1]).sum().item<double>();
      CHECK(y.reshape({-1, out})[0][out - 1].item<double>() == Approx(by_hand).epsilon(1e-12));
    }
  }
}

TEST_CASE("linear_cpu in fp32 agrees with fp64, strided x, a gradient for one input only",
          "[linear_cpu]") {
  const IntraOpThreads restore;
  at::set_num_threads(2);
  torch::manual_seed(12);
  const torch::Tensor x64 = torch::randn({8, 3, 32}, torch::kDouble).transpose(0, 1);  // strided
  const torch::Tensor w64 = torch::randn({24, 32}, torch::kDouble);
  const torch::Tensor r64 = torch::randn({3, 8, 24}, torch::kDouble);
  const auto [y, dx, dw] = run(hybridlab::linear_cpu, x64.to(torch::kFloat), w64.to(torch::kFloat),
                               r64.to(torch::kFloat));
  const torch::Tensor y_ref = torch::matmul(x64, w64.t());
  CHECK(max_abs_diff(y, y_ref) < 1e-5 * y_ref.abs().max().item<double>());
  CHECK(max_abs_diff(dx, torch::matmul(r64, w64)) < 1e-4);
  CHECK(max_abs_diff(dw, torch::matmul(r64.reshape({-1, 24}).t(), x64.reshape({-1, 32}))) < 1e-4);

  // Only w needs a gradient (the first projection of a model): x gets none, w the right one.
  const torch::Tensor wl = w64.clone().requires_grad_(true);
  hybridlab::linear_cpu(x64, wl).mul(r64).sum().backward();
  CHECK(max_abs_diff(wl.grad(), torch::matmul(r64.reshape({-1, 24}).t(), x64.reshape({-1, 32}))) <
        1e-12);
}

TEST_CASE("linear_cpu refuses what it cannot take, project() falls back to the module",
          "[linear_cpu]") {
  const torch::Tensor x = torch::randn({4, 6});
  CHECK_FALSE(hybridlab::cpu_linear_applies(x, torch::randn({5, 6}, torch::kDouble)));
  CHECK_FALSE(hybridlab::cpu_linear_applies(x, torch::randn({5, 7})));
  CHECK_FALSE(hybridlab::cpu_linear_applies(x.to(torch::kLong), torch::ones({5, 6}, torch::kLong)));
  CHECK(hybridlab::cpu_linear_applies(x, torch::randn({5, 6})));
  CHECK_THROWS_WITH(hybridlab::linear_cpu(x, torch::randn({5, 7})),
                    Catch::Matchers::Contains("x [..., in] and w [out, in]"));

  torch::nn::Linear with_bias(torch::nn::LinearOptions(6, 5).bias(true));
  torch::nn::Linear no_bias(torch::nn::LinearOptions(6, 5).bias(false));
  // The bias is honoured (the module's own forward), and the fused path matches the module.
  CHECK(max_abs_diff(hybridlab::project(with_bias, x, true), with_bias(x)) == 0);
  CHECK(max_abs_diff(hybridlab::project(no_bias, x, false), no_bias(x)) == 0);
  CHECK(max_abs_diff(hybridlab::project(no_bias, x, true), no_bias(x)) < 1e-5);
}

TEST_CASE("matmul_cpu equals torch::matmul and its gradients in fp64, b plain and transposed",
          "[linear_cpu]") {
  const IntraOpThreads restore;
  torch::manual_seed(13);
  for (int threads : {1, 2}) {
    at::set_num_threads(threads);
    for (bool trans_b : {false, true}) {
      // Attention's shapes in miniature: narrowed [B,H,T,D] views (strided batch, unit rows).
      const torch::Tensor a = torch::randn({2, 3, 9, 5}, torch::kDouble).narrow(2, 1, 6);
      const torch::Tensor b = trans_b ? torch::randn({2, 3, 10, 5}, torch::kDouble).narrow(2, 2, 7)
                                      : torch::randn({2, 3, 5, 7}, torch::kDouble);
      const torch::Tensor r = torch::randn({2, 3, 6, 7}, torch::kDouble);
      const auto [c, da, db] =
          run([trans_b](const torch::Tensor& x,
                        const torch::Tensor& y) { return hybridlab::matmul_cpu(x, y, trans_b); },
              a, b, r);
      const auto [c_ref, da_ref, db_ref] = run(
          [trans_b](const torch::Tensor& x, const torch::Tensor& y) {
            return torch::matmul(x, trans_b ? y.transpose(-1, -2) : y);
          },
          a, b, r);
      INFO("threads " << threads << ", trans_b " << trans_b);
      CHECK(c.sizes() == c_ref.sizes());
      CHECK(max_abs_diff(c, c_ref) < 1e-12);
      CHECK(max_abs_diff(da, da_ref) < 1e-12);
      CHECK(max_abs_diff(db, db_ref) < 1e-12);
      const double by_hand =
          (a[1][2][5] * (trans_b ? b[1][2][6] : b[1][2].select(1, 6))).sum().item<double>();
      CHECK(c[1][2][5][6].item<double>() == Approx(by_hand).epsilon(1e-12));
    }
  }
  CHECK_FALSE(hybridlab::matmul_cpu_applies(torch::randn({2, 3, 4}), torch::randn({3, 4, 5}),
                                            false));  // batch sizes differ
  CHECK_FALSE(hybridlab::matmul_cpu_applies(torch::randn({3, 4}), torch::randn({4, 5}), false));
  CHECK_THROWS_WITH(hybridlab::matmul_cpu(torch::randn({2, 3, 4}), torch::randn({2, 5, 4}), false),
                    Catch::Matchers::Contains("same batch dimensions"));
}

TEST_CASE("bmm_cpu and bmm_add_ equal at::bmm through transposed and narrowed views",
          "[linear_cpu]") {
  const IntraOpThreads restore;
  torch::manual_seed(14);
  for (int threads : {1, 2}) {
    at::set_num_threads(threads);
    INFO("threads " << threads);
    const torch::Tensor a = torch::randn({3, 6, 4}, torch::kDouble);
    const torch::Tensor bt = torch::randn({3, 7, 4}, torch::kDouble);   // read as b = btᵀ
    const torch::Tensor at_ = torch::randn({3, 4, 6}, torch::kDouble);  // read as a = at_ᵀ
    const torch::Tensor ref = at::bmm(a, bt.transpose(1, 2));
    CHECK(max_abs_diff(hybridlab::bmm_cpu(a, bt.transpose(1, 2)), ref) < 1e-12);
    CHECK(max_abs_diff(hybridlab::bmm_cpu(at_.transpose(1, 2), bt.transpose(1, 2)),
                       at::bmm(at_.transpose(1, 2), bt.transpose(1, 2))) < 1e-12);
    const double by_hand = (a[2][5] * bt[2][6]).sum().item<double>();
    CHECK(hybridlab::bmm_cpu(a, bt.transpose(1, 2))[2][5][6].item<double>() ==
          Approx(by_hand).epsilon(1e-12));

    // Accumulate into rows 2..7 of a larger [3, 10, 7] buffer, scaled, leaving the rest alone.
    const torch::Tensor start = torch::randn({3, 10, 7}, torch::kDouble);
    torch::Tensor big = start.clone();
    hybridlab::bmm_add_(big.narrow(1, 2, 6), a, bt.transpose(1, 2), 0.5);
    CHECK(max_abs_diff(big.narrow(1, 2, 6), start.narrow(1, 2, 6) + 0.5 * ref) < 1e-12);
    CHECK(max_abs_diff(big.narrow(1, 0, 2), start.narrow(1, 0, 2)) == 0);
    CHECK(max_abs_diff(big.narrow(1, 8, 2), start.narrow(1, 8, 2)) == 0);
  }
  // Autograd would record: LibTorch's bmm, with its gradient.
  const torch::Tensor x = torch::randn({2, 3, 4}).requires_grad_(true);
  const torch::Tensor y = hybridlab::bmm_cpu(x, torch::randn({2, 4, 5}));
  CHECK(y.requires_grad());
  CHECK_THROWS_WITH(hybridlab::bmm_cpu(torch::randn({2, 3, 4}), torch::randn({2, 5, 4})),
                    Catch::Matchers::Contains("a [N, m, k] and b [N, k, n]"));
}
