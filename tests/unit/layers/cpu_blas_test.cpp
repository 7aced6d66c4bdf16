// cpu::gemm, cpu::trsm_unit_lower, cpu::trmm_unit_lower against LibTorch in double, and
// cpu::SingleThreadedBlas's effect on the thread counts.

#include <ATen/Parallel.h>
#include <torch/torch.h>
#include <catch2/catch.hpp>

#include "hybridlab/runtime.h"
#include "layers/kernels/cpu_blas.h"

namespace cpu_blas_test {

using hybridlab::BlasThreading;

// A row-major [rows, cols] block inside a wider buffer (row stride ld > cols), so a kernel that
// ignores ld reads the wrong numbers.
torch::Tensor padded(int64_t rows, int64_t cols, int64_t ld, torch::ScalarType dt) {
  return torch::randn({rows, ld}, torch::dtype(dt)).narrow(1, 0, cols);
}

template <class S>
void check_gemm(torch::ScalarType dt, double tol) {
  const int64_t m = 13, n = 7, k = 21;
  for (const bool ta : {false, true}) {
    for (const bool tb : {false, true}) {
      const torch::Tensor a = ta ? padded(k, m, m + 3, dt) : padded(m, k, k + 5, dt);
      const torch::Tensor b = tb ? padded(n, k, k + 2, dt) : padded(k, n, n + 4, dt);
      torch::Tensor c = padded(m, n, n + 6, dt);
      const torch::Tensor c0 = c.to(torch::kDouble, /*non_blocking=*/false, /*copy=*/true);
      const double alpha = 0.75, beta = -0.5;
      hybridlab::cpu::gemm<S>(ta, tb, m, n, k, static_cast<S>(alpha), a.data_ptr<S>(), a.stride(0),
                              b.data_ptr<S>(), b.stride(0), static_cast<S>(beta), c.data_ptr<S>(),
                              c.stride(0));
      const torch::Tensor ad = (ta ? a.t() : a).to(torch::kDouble);
      const torch::Tensor bd = (tb ? b.t() : b).to(torch::kDouble);
      const torch::Tensor want = alpha * torch::mm(ad, bd) + beta * c0;
      INFO("trans_a " << ta << " trans_b " << tb);
      CHECK((c.to(torch::kDouble) - want).abs().max().item<double>() < tol);
    }
  }
}

TEST_CASE("cpu::gemm: every transpose, row strides, alpha and beta match LibTorch", "[cpu_blas]") {
  torch::manual_seed(11);
  check_gemm<float>(torch::kFloat, 1e-4);
  check_gemm<double>(torch::kDouble, 1e-12);
}

// L m×m with a garbage diagonal and upper part: the kernels must take the diagonal as 1 and
// never read above it.
torch::Tensor unit_lower_with_garbage(int64_t m, torch::ScalarType dt) {
  const torch::Tensor strict = 0.2 * torch::randn({m, m}, torch::dtype(dt)).tril(-1);
  return strict + 100.0 * torch::rand({m, m}, torch::dtype(dt)).triu(0);
}

template <class S>
void check_triangular(torch::ScalarType dt, double tol) {
  const int64_t m = 19, n = 6;
  const torch::Tensor l = unit_lower_with_garbage(m, dt);
  const torch::Tensor unit = (l.tril(-1) + torch::eye(m, torch::dtype(dt))).to(torch::kDouble);
  const torch::Tensor b = torch::randn({m, n}, torch::dtype(dt));

  torch::Tensor x = b.clone();
  hybridlab::cpu::trsm_unit_lower<S>(m, n, l.data_ptr<S>(), m, x.data_ptr<S>(), n);
  CHECK((torch::mm(unit, x.to(torch::kDouble)) - b.to(torch::kDouble)).abs().max().item<double>() <
        tol);

  torch::Tensor y = b.clone();
  hybridlab::cpu::trmm_unit_lower<S>(m, n, l.data_ptr<S>(), m, y.data_ptr<S>(), n);
  CHECK((y.to(torch::kDouble) - torch::mm(unit, b.to(torch::kDouble))).abs().max().item<double>() <
        tol);
}

TEST_CASE("cpu::trsm_unit_lower and trmm_unit_lower: unit diagonal, upper part unread",
          "[cpu_blas]") {
  torch::manual_seed(12);
  check_triangular<float>(torch::kFloat, 1e-4);
  check_triangular<double>(torch::kDouble, 1e-12);
}

TEST_CASE("SingleThreadedBlas: OpenBLAS on one thread, LibTorch keeps its threads, both restored",
          "[cpu_blas]") {
  const int torch_before = at::get_num_threads();
  const BlasThreading threading = hybridlab::blas_threading();
  INFO("BLAS threading: " << hybridlab::blas_threading_name(threading));
  at::set_num_threads(2);
  hybridlab::set_blas_threads(2);
  {
    const hybridlab::cpu::SingleThreadedBlas guard;
    // The fused kernels spread their heads over LibTorch's threads while the guard lives: with
    // an OpenMP OpenBLAS, lowering BLAS's count would lower LibTorch's as well.
    CHECK(at::get_num_threads() == 2);
    if (threading == BlasThreading::kPthreads) CHECK(hybridlab::blas_threads() == 1);
  }
  CHECK(at::get_num_threads() == 2);
  if (threading == BlasThreading::kPthreads || threading == BlasThreading::kOpenMP) {
    CHECK(hybridlab::blas_threads() == 2);
  }
  at::set_num_threads(torch_before);
  hybridlab::set_blas_threads(torch_before);
}

}  // namespace cpu_blas_test
