// Gated DeltaNet kernels: the recurrent form against an independent scalar loop of the paper's
// equation, the chunked form against the recurrent one (values, final states, gradients), a
// finite-difference gradient check, the semantic identities and the numerical traps of
// ../shared/reference/gated_deltanet.md §2.3 and §6.

#include <torch/torch.h>

#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "layers/kernels/gated_deltanet_kernels.h"
#include "layers/norm.h"
#include "layers_test_util.h"

using namespace hybridlab;
using hybridlab::test::err_ratio;
using hybridlab::test::max_abs_diff;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace gated_deltanet_kernels_test {
namespace {

struct Inputs {
  torch::Tensor q, k, v, g, beta, h0;
};

// Test vectors as in fla tests/ops/test_gdn.py: L2-normalised q, k; v ~ N(0,1);
// β = sigmoid(N(0,1)); g = logsigmoid(U(0,1)) / lambda.
Inputs make_inputs(int64_t B, int64_t Hk, int64_t Hv, int64_t T, int64_t K, int64_t V,
                   torch::Dtype dt, bool with_h0, double lambda = 1.0, uint64_t seed = 0) {
  torch::manual_seed(seed);
  auto o = torch::TensorOptions().dtype(dt);
  Inputs in;
  in.q = l2_normalize(torch::randn({B, Hk, T, K}, o));
  in.k = l2_normalize(torch::randn({B, Hk, T, K}, o));
  in.v = torch::randn({B, Hv, T, V}, o);
  in.beta = torch::sigmoid(torch::randn({B, Hv, T}, o));
  in.g = torch::log_sigmoid(torch::rand({B, Hv, T}, o)) / lambda;
  if (with_h0) in.h0 = torch::randn({B, Hv, K, V}, o);
  return in;
}

// The paper's recurrence (eq. 8) written element by element in double, state S = hᵀ [V,K]:
// S_t = α_t S_{t-1} + β_t (v_t − α_t S_{t-1} k_t) k_tᵀ, o_t = S_t (s·q_t); value head j reads key
// head j / (Hv/Hk).
std::pair<torch::Tensor, torch::Tensor> scalar_oracle(const Inputs& in, double scale) {
  const int64_t B = in.v.size(0), Hv = in.v.size(1), T = in.v.size(2), V = in.v.size(3);
  const int64_t Hk = in.q.size(1), K = in.q.size(3), r = Hv / Hk;
  auto q = in.q.to(torch::kDouble).contiguous(), k = in.k.to(torch::kDouble).contiguous();
  auto v = in.v.to(torch::kDouble).contiguous(), g = in.g.to(torch::kDouble).contiguous();
  auto beta = in.beta.to(torch::kDouble).contiguous();
  torch::Tensor o = torch::zeros({B, Hv, T, V}, torch::kDouble);
  torch::Tensor hT = torch::zeros({B, Hv, K, V}, torch::kDouble);
  auto qa = q.accessor<double, 4>(), ka = k.accessor<double, 4>(), va = v.accessor<double, 4>();
  auto ga = g.accessor<double, 3>(), ba = beta.accessor<double, 3>();
  auto oa = o.accessor<double, 4>(), ha = hT.accessor<double, 4>();
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t j = 0; j < Hv; ++j) {
      const int64_t kh = j / r;
      std::vector<double> S(V * K, 0.0);  // S[vi*K + ki]
      if (in.h0.defined()) {
        auto h0 = in.h0.to(torch::kDouble).contiguous();
        auto h0a = h0.accessor<double, 4>();
        for (int64_t vi = 0; vi < V; ++vi)
          for (int64_t ki = 0; ki < K; ++ki) S[vi * K + ki] = h0a[b][j][ki][vi];
      }
      for (int64_t t = 0; t < T; ++t) {
        const double alpha = std::exp(ga[b][j][t]), bt = ba[b][j][t];
        for (double& s : S) s *= alpha;
        for (int64_t vi = 0; vi < V; ++vi) {
          double sk = 0;
          for (int64_t ki = 0; ki < K; ++ki) sk += S[vi * K + ki] * ka[b][kh][t][ki];
          const double err = bt * (va[b][j][t][vi] - sk);
          for (int64_t ki = 0; ki < K; ++ki) S[vi * K + ki] += err * ka[b][kh][t][ki];
        }
        for (int64_t vi = 0; vi < V; ++vi) {
          double acc = 0;
          for (int64_t ki = 0; ki < K; ++ki) acc += S[vi * K + ki] * scale * qa[b][kh][t][ki];
          oa[b][j][t][vi] = acc;
        }
      }
      for (int64_t vi = 0; vi < V; ++vi)
        for (int64_t ki = 0; ki < K; ++ki) ha[b][j][ki][vi] = S[vi * K + ki];
    }
  }
  return {o, hT};
}

}  // namespace

TEST_CASE("recurrent kernel equals the paper's recurrence written as a scalar loop", "[gdn]") {
  const bool with_h0 = GENERATE(false, true);
  const int64_t Hv = GENERATE(2, 4);  // Hk = 2: GVA with r = 1 and r = 2
  Inputs in = make_inputs(2, 2, Hv, 9, 4, 3, torch::kDouble, with_h0, 1.0, 3);
  const double scale = 0.5;
  auto [o_ref, h_ref] = scalar_oracle(in, scale);
  auto r = recurrent_gated_delta_rule(in.q, in.k, in.v, in.g, in.beta, scale, in.h0);
  REQUIRE_TENSORS_CLOSE(r.o, o_ref, 1e-12);
  REQUIRE_TENSORS_CLOSE(r.state, h_ref, 1e-12);
}

TEST_CASE("GVA maps value head j to key head j/(Hv/Hk), not a tiled repeat", "[gdn]") {
  Inputs in = make_inputs(1, 2, 4, 6, 4, 3, torch::kDouble, false, 1.0, 5);
  auto r = recurrent_gated_delta_rule(in.q, in.k, in.v, in.g, in.beta, 1.0);
  // repeat_interleave explicitly: heads (0,0,1,1).
  auto ri = recurrent_gated_delta_rule(in.q.repeat_interleave(2, 1), in.k.repeat_interleave(2, 1),
                                       in.v, in.g, in.beta, 1.0);
  REQUIRE_TENSORS_CLOSE(r.o, ri.o, 1e-14);
  // A tiled repeat (0,1,0,1) must give something else.
  auto tiled = recurrent_gated_delta_rule(in.q.repeat({1, 2, 1, 1}), in.k.repeat({1, 2, 1, 1}),
                                          in.v, in.g, in.beta, 1.0);
  REQUIRE(max_abs_diff(r.o, tiled.o) > 1e-3);
  auto c = chunk_gated_delta_rule(in.q, in.k, in.v, in.g, in.beta, 1.0, {}, 4);
  REQUIRE_TENSORS_CLOSE(c.o, r.o, 1e-12);
}

TEST_CASE("chunked == recurrent: outputs and final state, fp64 and fp32", "[gdn]") {
  const int64_t T = GENERATE(1, 63, 64, 65, 500);
  const int64_t C = GENERATE(16, 32, 64);
  const bool with_h0 = GENERATE(false, true);
  const bool fp64 = GENERATE(true, false);
  CAPTURE(T, C, with_h0, fp64);
  // n_v_heads = 2 * n_heads.
  Inputs in = make_inputs(2, 2, 4, T, 16, 32, fp64 ? torch::kDouble : torch::kFloat, with_h0, 1.0,
                          static_cast<uint64_t>(T * 7 + C));
  const double scale = 1.0 / std::sqrt(16.0);
  auto r = recurrent_gated_delta_rule(in.q, in.k, in.v, in.g, in.beta, scale, in.h0);
  auto c = chunk_gated_delta_rule(in.q, in.k, in.v, in.g, in.beta, scale, in.h0, C);
  auto ct = chunk_gated_delta_rule_torch(in.q, in.k, in.v, in.g, in.beta, scale, in.h0, C);
  const double tol = fp64 ? 1e-10 : 1e-4;
  REQUIRE_TENSORS_CLOSE(c.o, r.o, tol);
  REQUIRE_TENSORS_CLOSE(c.state, r.state, tol);
  REQUIRE_TENSORS_CLOSE(ct.o, r.o, tol);
  REQUIRE_TENSORS_CLOSE(ct.state, r.state, tol);
  if (!fp64) {
    REQUIRE(err_ratio(c.o, r.o) < 1e-5);
  }
}

TEST_CASE("chunked == recurrent across decay strengths (lambda 0.1, 10) and 4x GVA", "[gdn]") {
  const double lambda = GENERATE(0.1, 10.0);
  Inputs in = make_inputs(1, 1, 4, 130, 8, 8, torch::kDouble, true, lambda, 11);
  auto r = recurrent_gated_delta_rule(in.q, in.k, in.v, in.g, in.beta, 0.3, in.h0);
  for (const auto& c :
       {chunk_gated_delta_rule(in.q, in.k, in.v, in.g, in.beta, 0.3, in.h0, 32),
        chunk_gated_delta_rule_torch(in.q, in.k, in.v, in.g, in.beta, 0.3, in.h0, 32)}) {
    REQUIRE_TENSORS_CLOSE(c.o, r.o, 1e-10);
    REQUIRE_TENSORS_CLOSE(c.state, r.state, 1e-10);
  }
}

// chunk_gated_delta_rule runs the fused CPU kernels (forward only without grad, the fused
// autograd Function with it) unless switched off, the autograd tensor form then: the forward
// kernel and the tensor form are checked here against the recurrent oracle and each other (the
// fused backward in gated_deltanet_fused_grad_test.cpp).
TEST_CASE("fused CPU chunk kernel == autograd tensor form == recurrent", "[gdn]") {
  const int64_t T = GENERATE(1, 63, 64, 65, 500);
  const int64_t C = GENERATE(16, 64);
  const bool with_h0 = GENERATE(false, true);
  const bool fp64 = GENERATE(true, false);
  CAPTURE(T, C, with_h0, fp64);
  Inputs in = make_inputs(2, 2, 4, T, 16, 32, fp64 ? torch::kDouble : torch::kFloat, with_h0, 1.0,
                          static_cast<uint64_t>(T * 3 + C));
  const double scale = 0.25;
  const auto r = recurrent_gated_delta_rule(in.q, in.k, in.v, in.g, in.beta, scale, in.h0);
  const auto fused = chunk_gated_delta_rule_cpu(in.q, in.k, in.v, in.g, in.beta, scale, in.h0, C);
  const auto tensor_form =
      chunk_gated_delta_rule_torch(in.q, in.k, in.v, in.g, in.beta, scale, in.h0, C);
  const double tol = fp64 ? 1e-10 : 1e-4;
  REQUIRE_TENSORS_CLOSE(fused.o, r.o, tol);
  REQUIRE_TENSORS_CLOSE(fused.state, r.state, tol);
  REQUIRE_TENSORS_CLOSE(fused.o, tensor_form.o, tol);
  REQUIRE_TENSORS_CLOSE(fused.state, tensor_form.state, tol);
  // The entry point: the fused forward kernel with and without grad, the tensor form when the
  // fused kernels are switched off.
  const auto dispatched = chunk_gated_delta_rule(in.q, in.k, in.v, in.g, in.beta, scale, in.h0, C);
  REQUIRE(torch::equal(dispatched.o, fused.o));
  const torch::Tensor vg = in.v.clone().requires_grad_(true);
  const auto with_grad = chunk_gated_delta_rule(in.q, in.k, vg, in.g, in.beta, scale, in.h0, C);
  REQUIRE(with_grad.o.requires_grad());
  REQUIRE(torch::equal(with_grad.o.detach(), fused.o));
  const auto unfused =
      chunk_gated_delta_rule(in.q, in.k, vg, in.g, in.beta, scale, in.h0, C, /*fused=*/false);
  REQUIRE(unfused.o.requires_grad());
  REQUIRE(torch::equal(unfused.o.detach(), tensor_form.o));
}

TEST_CASE("fused CPU chunk kernel: strong decay and full reset stay finite and exact", "[gdn]") {
  const double g_value = GENERATE(-50.0, -1e4);
  Inputs in = make_inputs(1, 1, 2, 67, 8, 8, torch::kFloat, true, 1.0, 52);
  in.g = torch::full_like(in.g, g_value) + 0.1 * torch::rand_like(in.g);
  const auto f = chunk_gated_delta_rule_cpu(in.q, in.k, in.v, in.g, in.beta, 0.35, in.h0, 64);
  const auto r = recurrent_gated_delta_rule(in.q, in.k, in.v, in.g, in.beta, 0.35, in.h0);
  REQUIRE(torch::isfinite(f.o).all().item<bool>());
  REQUIRE_TENSORS_CLOSE(f.o, r.o, 1e-4);
  REQUIRE_TENSORS_CLOSE(f.state, r.state, 1e-5);
}

TEST_CASE("fused CPU chunk kernel reads [B,T,H,D] layouts in place, 4x GVA, short last chunk",
          "[gdn]") {
  Inputs in = make_inputs(2, 2, 8, 150, 16, 24, torch::kDouble, true, 1.0, 77);
  const auto r = recurrent_gated_delta_rule(in.q, in.k, in.v, in.g, in.beta, 0.3, in.h0);
  // The same values, stored token-major as the layer's projections are.
  auto token_major = [](const torch::Tensor& x) {
    return x.transpose(1, 2).contiguous().transpose(1, 2);
  };
  const auto f =
      chunk_gated_delta_rule_cpu(token_major(in.q), token_major(in.k), token_major(in.v),
                                 token_major(in.g), token_major(in.beta), 0.3, in.h0, 64);
  REQUIRE_FALSE(token_major(in.q).is_contiguous());
  REQUIRE_TENSORS_CLOSE(f.o, r.o, 1e-10);
  REQUIRE_TENSORS_CLOSE(f.state, r.state, 1e-10);
  REQUIRE(f.o.transpose(1, 2).is_contiguous());  // [B,T,H,V] in memory, for the output norm
  // h0 is read, not written.
  const torch::Tensor h0_before = in.h0.clone();
  chunk_gated_delta_rule_cpu(in.q, in.k, in.v, in.g, in.beta, 0.3, in.h0, 64);
  REQUIRE(torch::equal(in.h0, h0_before));
}

TEST_CASE("fused CPU chunk kernel refuses inputs that need gradients", "[gdn]") {
  Inputs in = make_inputs(1, 1, 1, 8, 4, 4, torch::kFloat, false);
  in.v.requires_grad_(true);
  REQUIRE_THROWS_WITH(chunk_gated_delta_rule_cpu(in.q, in.k, in.v, in.g, in.beta, 0.5, {}, 4),
                      Catch::Matchers::Contains("forward only"));
  torch::NoGradGuard no_grad;  // with grad mode off the same inputs are fine
  REQUIRE_NOTHROW(chunk_gated_delta_rule_cpu(in.q, in.k, in.v, in.g, in.beta, 0.5, {}, 4));
}

TEST_CASE("gradients of the chunked and recurrent forms agree (fp32, incl. strong decay)",
          "[gdn]") {
  const double lambda = GENERATE(1.0, 0.02);  // 0.02: g down to about -35 per token (large A)
  CAPTURE(lambda);
  Inputs base = make_inputs(1, 2, 4, 70, 8, 8, torch::kFloat, true, lambda, 21);
  auto grads = [&](bool chunked) {
    std::vector<torch::Tensor> xs = {base.q.clone(), base.k.clone(),    base.v.clone(),
                                     base.g.clone(), base.beta.clone(), base.h0.clone()};
    for (auto& x : xs) x.requires_grad_(true);
    auto res = chunked ? chunk_gated_delta_rule(xs[0], xs[1], xs[2], xs[3], xs[4], 0.35, xs[5], 16)
                       : recurrent_gated_delta_rule(xs[0], xs[1], xs[2], xs[3], xs[4], 0.35, xs[5]);
    // randn with sizes, not randn_like: the weights must not depend on the output's memory layout
    // (the fused kernel returns o as a token-major view).
    torch::manual_seed(99);
    const torch::Tensor wo = torch::randn(res.o.sizes(), res.o.options());
    const torch::Tensor wh = torch::randn(res.state.sizes(), res.state.options());
    ((res.o * wo).sum() + (res.state * wh).sum()).backward();
    std::vector<torch::Tensor> gs;
    for (auto& x : xs) gs.push_back(x.grad());
    return gs;
  };
  auto gc = grads(true), gr = grads(false);
  const char* names[] = {"q", "k", "v", "g", "beta", "h0"};
  for (size_t i = 0; i < gc.size(); ++i) {
    INFO("gradient of " << names[i]);
    REQUIRE(torch::isfinite(gc[i]).all().item<bool>());
    REQUIRE(err_ratio(gc[i], gr[i]) < 1e-4);
  }
}

TEST_CASE("finite-difference gradient check of the chunked kernel in double", "[gdn]") {
  // T = 7 with C = 4: one full and one partial chunk; GVA 1 -> 2 heads; non-zero h0.
  Inputs in = make_inputs(1, 1, 2, 7, 4, 4, torch::kDouble, true, 1.0, 31);
  std::vector<torch::Tensor> xs = {in.q, in.k, in.v, in.g, in.beta, in.h0};
  torch::manual_seed(7);
  const torch::Tensor wo = torch::randn({1, 2, 7, 4}, torch::kDouble);
  const torch::Tensor wh = torch::randn({1, 2, 4, 4}, torch::kDouble);
  auto loss = [&]() {
    auto r = chunk_gated_delta_rule(xs[0], xs[1], xs[2], xs[3], xs[4], 0.5, xs[5], 4);
    return (r.o * wo).sum() + (r.state * wh).sum();
  };
  for (auto& x : xs) x.requires_grad_(true);
  loss().backward();
  const char* names[] = {"q", "k", "v", "g", "beta", "h0"};
  for (size_t i = 0; i < xs.size(); ++i) {
    INFO("input " << names[i]);
    torch::Tensor analytic = xs[i].grad().clone();
    torch::Tensor numeric = hybridlab::test::numeric_grad(loss, xs[i].detach());
    REQUIRE_TENSORS_CLOSE(analytic, numeric, 1e-7);
  }
}

TEST_CASE("identity: alpha = 1 and beta = 0 leave the state unchanged", "[gdn]") {
  Inputs in = make_inputs(1, 2, 2, 37, 8, 6, torch::kDouble, true, 1.0, 41);
  in.g.zero_();
  in.beta.zero_();
  for (bool chunked : {false, true}) {
    auto r = chunked ? chunk_gated_delta_rule(in.q, in.k, in.v, in.g, in.beta, 0.7, in.h0, 16)
                     : recurrent_gated_delta_rule(in.q, in.k, in.v, in.g, in.beta, 0.7, in.h0);
    REQUIRE_TENSORS_CLOSE(r.state, in.h0, chunked ? 1e-13 : 0.0);
    // o_t = s · h0ᵀ q_t.
    REQUIRE_TENSORS_CLOSE(r.o, torch::matmul(in.q * 0.7, in.h0), 1e-12);
  }
}

TEST_CASE("identity: decay only (beta = 0, constant g) gives h_T = e^{sum g} h0", "[gdn]") {
  Inputs in = make_inputs(1, 1, 1, 20, 4, 4, torch::kDouble, true, 1.0, 43);
  in.beta.zero_();
  in.g.fill_(-0.05);
  auto c = chunk_gated_delta_rule(in.q, in.k, in.v, in.g, in.beta, 1.0, in.h0, 8);
  REQUIRE_TENSORS_CLOSE(c.state, in.h0 * std::exp(-0.05 * 20), 1e-13);
}

TEST_CASE("identity: the delta rule overwrites (k, v1) by (k, v2), linear attention would sum",
          "[gdn]") {
  const auto dt = torch::kFloat;
  torch::Tensor k = torch::zeros({1, 1, 3, 4}, dt);
  k.select(2, 0).select(-1, 1).fill_(1.0);  // unit key e_1 written twice, read with q = k
  k.select(2, 1).select(-1, 1).fill_(1.0);
  k.select(2, 2).select(-1, 1).fill_(1.0);
  torch::Tensor q = k.clone();
  torch::Tensor v = torch::zeros({1, 1, 3, 2}, dt);
  v[0][0][0] = torch::tensor({1.0f, 2.0f});   // v1
  v[0][0][1] = torch::tensor({-3.0f, 0.5f});  // v2
  // Third step: beta = 0 (read only).
  torch::Tensor beta = torch::tensor({1.0f, 1.0f, 0.0f}).view({1, 1, 3});
  torch::Tensor g = torch::zeros({1, 1, 3}, dt);
  const double s = 0.5;
  for (bool chunked : {false, true}) {
    auto r = chunked ? chunk_gated_delta_rule(q, k, v, g, beta, s, {}, 2)
                     : recurrent_gated_delta_rule(q, k, v, g, beta, s);
    const torch::Tensor read = r.o[0][0][2];
    REQUIRE_TENSORS_CLOSE(read, torch::tensor({-3.0f, 0.5f}) * s, 1e-6);
    REQUIRE(max_abs_diff(read, torch::tensor({-2.0f, 2.5f}) * s) > 0.5);  // not v1 + v2
  }
}

TEST_CASE("identity: orthonormal keys with beta = 1 are all recalled exactly", "[gdn]") {
  const int64_t K = 6;
  const torch::Tensor eye = torch::eye(K, torch::kDouble);
  torch::Tensor k = eye.view({1, 1, K, K});  // token t writes key e_t
  torch::Tensor v = torch::randn({1, 1, K, 3}, torch::kDouble);
  auto r = chunk_gated_delta_rule(k, k, v, torch::zeros({1, 1, K}, torch::kDouble),
                                  torch::ones({1, 1, K}, torch::kDouble), 1.0, {}, 4);
  // Reading e_i from the final state gives v_i: h = Σ e_i v_iᵀ.
  REQUIRE_TENSORS_CLOSE(r.state[0][0], v[0][0], 1e-13);
}

TEST_CASE("strong decay (g about -50 per token) and full reset give no NaN, values or grads",
          "[gdn]") {
  const double g_value = GENERATE(-50.0, -1e4);
  Inputs in = make_inputs(1, 1, 2, 67, 8, 8, torch::kFloat, true, 1.0, 51);
  in.g = torch::full_like(in.g, g_value) + 0.1 * torch::rand_like(in.g);
  std::vector<torch::Tensor> xs = {in.q, in.k, in.v, in.g, in.beta, in.h0};
  for (auto& x : xs) x.requires_grad_(true);
  auto c = chunk_gated_delta_rule(xs[0], xs[1], xs[2], xs[3], xs[4], 0.35, xs[5], 64);
  auto r = recurrent_gated_delta_rule(xs[0], xs[1], xs[2], xs[3], xs[4], 0.35, xs[5]);
  REQUIRE(torch::isfinite(c.o).all().item<bool>());
  REQUIRE(torch::isfinite(c.state).all().item<bool>());
  REQUIRE_TENSORS_CLOSE(c.o, r.o, 1e-4);
  // Full reset: each token only sees its own write, h_t = β_t k_t v_tᵀ.
  const auto last = in.v.size(2) - 1;
  const torch::Tensor own =
      torch::matmul(in.k.select(2, last).unsqueeze(-1).repeat_interleave(2, 1),
                    (in.v.select(2, last) * in.beta.select(2, last).unsqueeze(-1)).unsqueeze(-2));
  REQUIRE_TENSORS_CLOSE(c.state.detach(), own, 1e-5);
  (c.o.sum() + c.state.sum()).backward();
  for (auto& x : xs) REQUIRE(torch::isfinite(x.grad()).all().item<bool>());
}

TEST_CASE("L2 norm of a zero vector is zero with finite gradient", "[gdn]") {
  torch::Tensor x = torch::zeros({2, 4}, torch::kFloat).requires_grad_(true);
  torch::Tensor y = l2_normalize(x);
  REQUIRE(y.abs().max().item<float>() == 0.0f);
  y.sum().backward();
  REQUIRE(torch::isfinite(x.grad()).all().item<bool>());
  // eps inside the sqrt: x / sqrt(|x|² + 1e-6).
  torch::Tensor a = torch::tensor({3e-3, 4e-3}, torch::kDouble);
  REQUIRE_TENSORS_CLOSE(l2_normalize(a), a / std::sqrt(25e-6 + 1e-6), 1e-15);
}

TEST_CASE("gate: finite g <= 0 for extreme A_log and a + dt_bias, fp32 even from fp16", "[gdn]") {
  const std::vector<double> A_logs = {-10, 0, 2.77, 100};
  const std::vector<double> pre = {-200, -20, 0, 20, 200};
  for (double al : A_logs) {
    for (double p : pre) {
      CAPTURE(al, p);
      const torch::Tensor a = torch::full({1, 1}, p, torch::kHalf);
      const torch::Tensor g = gated_delta_gate(a, torch::full({1}, al), torch::zeros({1}));
      REQUIRE(g.scalar_type() == torch::kFloat);
      const float gv = g.item<float>();
      REQUIRE(std::isfinite(gv));
      REQUIRE(gv <= 0.0f);
      // Independent value: −exp(A_log)·softplus(p) in double, floored at −1e4 like the kernel.
      const double sp = p > 20 ? p : std::log1p(std::exp(p));
      const double expected = std::max(-std::exp(al) * sp, -1e4);
      REQUIRE(gv == Approx(expected).epsilon(1e-4).margin(1e-30));
    }
  }
}

TEST_CASE("short conv: causal, zero left padding, SiLU after the conv, cache == whole", "[gdn]") {
  torch::manual_seed(61);
  const torch::Tensor x = torch::randn({2, 11, 5}, torch::kDouble);
  const torch::Tensor w = torch::randn({5, 1, 4}, torch::kDouble);
  const torch::Tensor y = short_conv(x, w).y;
  // Independent loop: y[b,t,c] = silu(Σ_{i=0..3} w[c,0,i] · x[b, t-3+i, c]), x = 0 before t = 0.
  torch::Tensor ref = torch::zeros_like(x);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t t = 0; t < 11; ++t)
      for (int64_t c = 0; c < 5; ++c) {
        double acc = 0;
        for (int64_t i = 0; i < 4; ++i) {
          const int64_t src = t - 3 + i;
          if (src >= 0) acc += w[c][0][i].item<double>() * x[b][src][c].item<double>();
        }
        ref[b][t][c] = acc / (1.0 + std::exp(-acc));
      }
  REQUIRE_TENSORS_CLOSE(y, ref, 1e-12);
  auto first = short_conv(x.narrow(1, 0, 2), w);  // shorter than the kernel
  auto second = short_conv(x.narrow(1, 2, 9), w, first.cache);
  REQUIRE_TENSORS_CLOSE(torch::cat({first.y, second.y}, 1), y, 1e-12);
  // The autograd tensor form (inputs that require grad) gives the same values and caches as the
  // fused forward-only pass above.
  const torch::Tensor xg = x.clone().requires_grad_(true);
  auto g_first = short_conv(xg.narrow(1, 0, 2), w);
  auto g_second = short_conv(xg.narrow(1, 2, 9), w, g_first.cache);
  REQUIRE(g_second.y.requires_grad());
  REQUIRE_TENSORS_CLOSE(torch::cat({g_first.y, g_second.y}, 1).detach(), ref, 1e-12);
  REQUIRE_TENSORS_CLOSE(g_second.cache.detach(), second.cache, 0.0);
  // fp32 fused pass against the fp64 reference.
  REQUIRE_TENSORS_CLOSE(short_conv(x.to(torch::kFloat), w.to(torch::kFloat)).y, ref, 1e-5);
}

TEST_CASE("short conv in training: fused == tensor form, values and gradients of x, cache, weight",
          "[gdn]") {
  const bool fp64 = GENERATE(false, true);
  const int64_t Kc = GENERATE(4, 1, 2);
  CAPTURE(fp64, Kc);
  const auto dt = fp64 ? torch::kDouble : torch::kFloat;
  torch::manual_seed(62);
  // Strided x (a transposed view), a carried cache that requires grad, an fp32 weight.
  const torch::Tensor x0 = torch::randn({7, 3, 5}, dt).transpose(0, 1);  // [3,7,5]
  const torch::Tensor c0 = torch::randn({3, Kc - 1, 5}, dt);
  const torch::Tensor w0 = torch::randn({5, 1, Kc});
  const torch::Tensor dy = torch::randn({3, 7, 5}, dt);
  const torch::Tensor dcache = torch::randn({3, Kc - 1, 5}, dt);
  struct Out {
    torch::Tensor y, cache, dx, dc, dw;
  };
  const auto run = [&](bool fused) {
    torch::Tensor x = x0.detach().requires_grad_(true);
    torch::Tensor c = c0.detach().requires_grad_(true), w = w0.detach().requires_grad_(true);
    ShortConvResult r = short_conv(x, w, c, fused);
    ((r.y * dy).sum() + (r.cache * dcache).sum()).backward();
    return Out{r.y.detach(), r.cache.detach(), x.grad(), c.grad(), w.grad()};
  };
  const Out f = run(true), t = run(false);
  const double tol = fp64 ? 1e-10 : 1e-5;
  REQUIRE_TENSORS_CLOSE(f.y, t.y, tol);
  REQUIRE_TENSORS_CLOSE(f.dx, t.dx, tol);
  if (Kc > 1) {  // K = 1 keeps no cache
    REQUIRE_TENSORS_CLOSE(f.cache, t.cache, 0.0);
    REQUIRE_TENSORS_CLOSE(f.dc, t.dc, tol);
  }
  REQUIRE_TENSORS_CLOSE(f.dw, t.dw, tol * 10);  // sums over 21 positions
}

// Negative eigenvalues (allow_neg_eigval: β ∈ (0, 2); Grazzi et al. 2025, arXiv 2411.12537,
// §4.2): the chunked algorithm is unchanged, so every path must still match the oracle with β
// near 2, where the transition I − βkkᵀ reflects the state along k.
TEST_CASE("negative eigenvalues: chunked, fused and tensor forms == recurrent with beta near 2",
          "[gdn]") {
  const bool fp64 = GENERATE(true, false);
  const int64_t T = GENERATE(65, 200);
  CAPTURE(fp64, T);
  Inputs in = make_inputs(2, 2, 4, T, 16, 16, fp64 ? torch::kDouble : torch::kFloat, true, 1.0,
                          static_cast<uint64_t>(T + 17));
  in.beta = 1.9 + 0.1 * in.beta;  // (1.9, 2.0)
  const double scale = 0.25;
  const auto r = recurrent_gated_delta_rule(in.q, in.k, in.v, in.g, in.beta, scale, in.h0);
  auto [o_ref, h_ref] = scalar_oracle(in, scale);
  REQUIRE_TENSORS_CLOSE(r.o, o_ref.to(r.o.scalar_type()), fp64 ? 1e-10 : 1e-4);
  const double tol = fp64 ? 1e-10 : 1e-4;
  for (const auto& c :
       {chunk_gated_delta_rule_cpu(in.q, in.k, in.v, in.g, in.beta, scale, in.h0, 32),
        chunk_gated_delta_rule_torch(in.q, in.k, in.v, in.g, in.beta, scale, in.h0, 32)}) {
    REQUIRE(torch::isfinite(c.o).all().item<bool>());
    REQUIRE_TENSORS_CLOSE(c.o, r.o, tol);
    REQUIRE_TENSORS_CLOSE(c.state, r.state, tol);
  }
}

TEST_CASE(
    "negative eigenvalues: beta = 2 with no decay flips the state's sign along k (hand "
    "case)",
    "[gdn]") {
  // d_k = 2, d_v = 1, S0 = 0, k = (1, 0) every step, α = 1 (g = 0), β = 2 (reference notes §11):
  // v = 1 writes S = (2, 0); then v = 0 gives kᵀS_new = −kᵀS_old + 2v = −2, i.e. (−2, 0), then
  // (2, 0), (−2, 0): eigenvalue −1 along k, a sign flip per step.
  auto o = torch::TensorOptions().dtype(torch::kDouble);
  const torch::Tensor k = torch::tensor({1.0, 0.0}, o).view({1, 1, 1, 2}).expand({1, 1, 4, 2});
  const torch::Tensor q = k.clone();
  const torch::Tensor v = torch::tensor({1.0, 0.0, 0.0, 0.0}, o).view({1, 1, 4, 1});
  const torch::Tensor g = torch::zeros({1, 1, 4}, o);
  const torch::Tensor beta = torch::full({1, 1, 4}, 2.0, o);
  const torch::Tensor want = torch::tensor({2.0, -2.0, 2.0, -2.0}, o).view({1, 1, 4, 1});
  for (bool chunked : {false, true}) {
    const auto r =
        chunked ? chunk_gated_delta_rule(q.contiguous(), k.contiguous(), v, g, beta, 1.0, {}, 2)
                : recurrent_gated_delta_rule(q.contiguous(), k.contiguous(), v, g, beta, 1.0);
    REQUIRE_TENSORS_CLOSE(r.o, want, 1e-12);
    REQUIRE(r.state[0][0][0][0].item<double>() == Approx(-2.0).margin(1e-12));
    REQUIRE(r.state[0][0][1][0].item<double>() == Approx(0.0).margin(1e-12));
  }
}

TEST_CASE("negative eigenvalues: finite-difference gradients of the chunked kernel, beta near 2",
          "[gdn]") {
  Inputs in = make_inputs(1, 1, 2, 7, 4, 4, torch::kDouble, true, 1.0, 37);
  in.beta = 1.8 + 0.15 * in.beta;
  std::vector<torch::Tensor> xs = {in.q, in.k, in.v, in.g, in.beta, in.h0};
  torch::manual_seed(9);
  const torch::Tensor wo = torch::randn({1, 2, 7, 4}, torch::kDouble);
  auto loss = [&]() {
    auto r = chunk_gated_delta_rule(xs[0], xs[1], xs[2], xs[3], xs[4], 0.5, xs[5], 4);
    return (r.o * wo).sum() + r.state.sum();
  };
  for (auto& x : xs) x.requires_grad_(true);
  loss().backward();
  for (size_t i = 0; i < xs.size(); ++i) {
    INFO("input " << i);
    const torch::Tensor analytic = xs[i].grad().clone();
    REQUIRE_TENSORS_CLOSE(analytic, hybridlab::test::numeric_grad(loss, xs[i].detach()), 1e-7);
  }
}
}  // namespace gated_deltanet_kernels_test
