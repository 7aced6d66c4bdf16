// select_blas_kernels: OpenBLAS runs kernels this CPU supports, and they compute correctly.

#include <torch/torch.h>
#include <catch2/catch.hpp>

#include <strings.h>

#include <cstdlib>
#include <set>
#include <string>

#include "hybridlab/runtime.h"

TEST_CASE("BLAS kernels: an AVX2 CPU never runs OpenBLAS's pre-AVX2 kernels", "[runtime]") {
  const hybridlab::BlasKernels k = hybridlab::select_blas_kernels();
  INFO("detected '" << k.detected << "', active '" << k.active << "', note '" << k.note << "'");
  if (k.detected.empty() || k.note.rfind("chosen by OPENBLAS_CORETYPE", 0) == 0 ||
      k.note.rfind("OpenBLAS built for one", 0) == 0) {
    SUCCEED("not a dynamic-arch OpenBLAS left to hybridlab's choice");
    return;
  }
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  const bool avx2 = false;
#endif
  const std::set<std::string> avx2_or_better = {"Haswell",  "Zen",        "Excavator",
                                                "SkylakeX", "Cooperlake", "SapphireRapids"};
  if (avx2) CHECK(avx2_or_better.count(k.active) == 1);
  // Once per process: the second call reports the same choice.
  CHECK(hybridlab::select_blas_kernels().active == k.active);
  CHECK_THAT(hybridlab::blas_backend(), Catch::Matchers::Contains(k.active));
}

TEST_CASE("BLAS kernels: an OPENBLAS_CORETYPE below this CPU's best is honoured and named",
          "[runtime]") {
  const hybridlab::BlasKernels k = hybridlab::select_blas_kernels();
  const char* forced = std::getenv("OPENBLAS_CORETYPE");
  INFO("OPENBLAS_CORETYPE '" << (forced ? forced : "") << "', active '" << k.active << "', faster '"
                             << k.faster << "'");
  if (k.detected.empty() || k.note.rfind("OpenBLAS built for one", 0) == 0 || !forced) {
    CHECK(k.faster.empty());  // nothing forced: hybridlab chose, nothing better is left
    return;
  }
  CHECK(strcasecmp(k.active.c_str(), forced) == 0);  // the user's choice stands
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  if (avx512 && strcasecmp(forced, "Haswell") == 0) {
    CHECK(k.faster == "SkylakeX");
    CHECK_THAT(k.note, Catch::Matchers::Contains("unset it"));
  }
  if (strcasecmp(forced, "SkylakeX") == 0) CHECK(k.faster.empty());
#endif
}

TEST_CASE("BLAS kernels: sgemm, batched gemm and the triangular solve match double", "[runtime]") {
  hybridlab::select_blas_kernels();
  torch::manual_seed(3);
  const torch::Tensor a = torch::randn({257, 130}, torch::kDouble);
  const torch::Tensor b = torch::randn({130, 67}, torch::kDouble);
  const torch::Tensor ref = torch::mm(a, b);
  const torch::Tensor got = torch::mm(a.to(torch::kFloat), b.to(torch::kFloat)).to(torch::kDouble);
  CHECK((got - ref).abs().max().item<double>() < 1e-4 * ref.abs().max().item<double>());

  const torch::Tensor x = torch::randn({6, 64, 64}, torch::kDouble);
  const torch::Tensor y = torch::randn({6, 64, 96}, torch::kDouble);
  const torch::Tensor bref = torch::bmm(x, y);
  const torch::Tensor bgot =
      torch::bmm(x.to(torch::kFloat), y.to(torch::kFloat)).to(torch::kDouble);
  CHECK((bgot - bref).abs().max().item<double>() < 1e-4 * bref.abs().max().item<double>());

  // Unit lower-triangular system (the chunked Gated DeltaNet's solve): L·X = Y, checked by
  // multiplying back in double.
  const torch::Tensor L = (0.1 * torch::randn({6, 64, 64}, torch::kDouble)).tril(-1);
  const torch::Tensor X = at::linalg_solve_triangular(L.to(torch::kFloat), y.to(torch::kFloat),
                                                      /*upper=*/false, /*left=*/true,
                                                      /*unitriangular=*/true)
                              .to(torch::kDouble);
  const torch::Tensor back = X + torch::bmm(L, X);  // (I + strictly-lower L) X
  CHECK((back - y).abs().max().item<double>() < 1e-3);
}

TEST_CASE("BLAS threading: OpenBLAS's own report agrees with the library mapped", "[runtime]") {
  const std::string backend = hybridlab::blas_backend();
  const hybridlab::BlasThreading t = hybridlab::blas_threading();
  INFO("backend '" << backend << "', threading " << hybridlab::blas_threading_name(t));
  // Debian installs each OpenBLAS flavour in a folder named after its threading.
  if (backend.find("openblas-openmp") != std::string::npos) {
    CHECK(t == hybridlab::BlasThreading::kOpenMP);
  } else if (backend.find("openblas-pthread") != std::string::npos) {
    CHECK(t == hybridlab::BlasThreading::kPthreads);
  } else if (backend.find("openblas-serial") != std::string::npos) {
    CHECK(t == hybridlab::BlasThreading::kSequential);
  } else if (backend.find("openblas") == std::string::npos) {
    CHECK(t == hybridlab::BlasThreading::kUnknown);
    return;
  }
  CHECK_THAT(backend, Catch::Matchers::Contains(std::string("OpenBLAS (") +
                                                hybridlab::blas_threading_name(t) + ")"));
}
