// The Gated DeltaProduct plugin (Siems et al. 2025, arXiv 2502.10297): the interleaved delta rule
// against hand-derived states (reference/order_and_state.md §11), the layer against an oracle
// written from the paper's per-token recurrence (n_h steps, the gate once, the read after the
// last step), n_h = 1 against hybridlab's Gated DeltaNet with the same weights, the chunked layer
// against its recurrent mode with finite-difference gradients, and its summary counts. The mixer
// conformance loop (mixer_plugins_test.cpp) covers causality and decoding.

#include <torch/torch.h>

#include <catch2/catch.hpp>

#include <cmath>

#include "hybridlab/mixer_ops.h"
#include "layers/gated_deltanet.h"
#include "layers_test_util.h"
#include "mixer_plugin_test_util.h"

using namespace hybridlab;

namespace gated_deltaproduct_test {
namespace {

namespace F = torch::nn::functional;

// One head, d_k = 2, d_v = 1, one token of two steps: S ← α S, then the two delta steps. Runs
// the interleaved sequence (g at step 0, q at step 1) through the recurrent or chunked kernel and
// returns the final state [2].
torch::Tensor two_step_state(double alpha, const torch::Tensor& s0, const torch::Tensor& k,
                             const torch::Tensor& v, const torch::Tensor& beta, bool chunked) {
  const auto opts = torch::kDouble;
  const torch::Tensor q = torch::zeros({1, 1, 2, 2}, opts);
  const torch::Tensor g = torch::tensor({std::log(alpha), 0.0}, opts).view({1, 1, 2});
  const torch::Tensor kk = k.view({1, 1, 2, 2}), vv = v.view({1, 1, 2, 1});
  const torch::Tensor bb = beta.view({1, 1, 2}), h0 = s0.view({1, 1, 2, 1});
  const GatedDeltaResult r = chunked ? chunk_gated_delta_rule(q, kk, vv, g, bb, 1.0, h0, 64)
                                     : recurrent_gated_delta_rule(q, kk, vv, g, bb, 1.0, h0);
  return r.state.view({2});
}

// SiLU of the causal depthwise convolution of x [B,T,C] with weight [C,1,K], from conv1d with
// K − 1 zeros of left padding (fla's ShortConvolution), independent of hybridlab's short_conv.
torch::Tensor causal_conv(const torch::Tensor& x, const torch::Tensor& w) {
  const int64_t K = w.size(2), C = x.size(2);
  const torch::Tensor xt = F::pad(x.transpose(1, 2), F::PadFuncOptions({K - 1, 0}));
  return torch::silu(F::conv1d(xt, w, F::Conv1dFuncOptions().groups(C)).transpose(1, 2));
}

torch::Tensor l2(const torch::Tensor& x) { return x / torch::sqrt(x.pow(2).sum(-1, true) + 1e-6); }

struct OracleShape {
  int64_t nh, hk, hv, dk, dv;
};

// The layer from the paper's equations, one token and one step at a time (fp64): S ← e^{g_t} S;
// for j: S ← S + β_j k_j (v_j − Sᵀ k_j)ᵀ; o_t = Sᵀ q_t / √d_k; then the gated RMSNorm and W_o.
torch::Tensor oracle(Mixer& m, const torch::Tensor& x, const OracleShape& s) {
  auto p = m.named_parameters();
  auto lin = [&](const char* name, const torch::Tensor& in) {
    return torch::matmul(in, p[std::string(name) + ".weight"].t());
  };
  const int64_t B = x.size(0), T = x.size(1);
  const torch::Tensor q = l2(causal_conv(lin("q_proj", x), p["q_conv"]).view({B, T, s.hk, s.dk}));
  const torch::Tensor k =
      l2(causal_conv(lin("k_proj", x), p["k_conv"]).view({B, T, s.nh, s.hk, s.dk}));
  const torch::Tensor v = causal_conv(lin("v_proj", x), p["v_conv"]).view({B, T, s.nh, s.hv, s.dv});
  const torch::Tensor beta = 2 * torch::sigmoid(lin("b_proj", x)).view({B, T, s.nh, s.hv});
  const torch::Tensor g =
      -p["A_log"].exp() * torch::softplus(lin("a_proj", x) + p["dt_bias"]);  // [B,T,Hv]
  torch::Tensor o = torch::zeros({B, T, s.hv, s.dv}, x.options());
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < s.hv; ++h) {
      const int64_t kh = h / (s.hv / s.hk);
      torch::Tensor S = torch::zeros({s.dk, s.dv}, x.options());
      for (int64_t t = 0; t < T; ++t) {
        S = S * g[b][t][h].exp();
        for (int64_t j = 0; j < s.nh; ++j) {
          const torch::Tensor kj = k[b][t][j][kh], vj = v[b][t][j][h];
          S = S + beta[b][t][j][h] * torch::outer(kj, vj - S.t().matmul(kj));
        }
        o[b][t][h] = S.t().matmul(q[b][t][kh]) / std::sqrt(static_cast<double>(s.dk));
      }
    }
  }
  const torch::Tensor n = o * torch::rsqrt(o.pow(2).mean(-1, true) + 1e-5) * p["o_norm_weight"];
  const torch::Tensor gated = n * torch::silu(lin("g_proj", x)).view({B, T, s.hv, s.dv});
  return lin("o_proj", gated.reshape({B, T, s.hv * s.dv}));
}

}  // namespace

TEST_CASE("gated deltaproduct: hand-derived states of two steps per token (recurrent, chunked)",
          "[mixer][deltaproduct]") {
  const auto opts = torch::kDouble;
  const double r = 1.0 / std::sqrt(2.0);
  const torch::Tensor k = torch::tensor({1.0, 0.0, r, r}, opts);
  const torch::Tensor e1 = torch::tensor({1.0, 0.0}, opts);
  for (const bool chunked : {false, true}) {
    CAPTURE(chunked);
    // α = 0.5, two reflections (β = 2) of zero values: (1,0) → (0.5,0) → (−0.5,0) → (0,0.5). The
    // gate acts once per token: α^2 would give (0, 0.25).
    const torch::Tensor zero_v = torch::zeros({2}, opts);
    const torch::Tensor two = torch::full({2}, 2.0, opts);
    REQUIRE_TENSORS_CLOSE(two_step_state(0.5, e1, k, zero_v, two, chunked),
                          torch::tensor({0.0, 0.5}, opts), 1e-12);
    // Without decay the product H₂H₁ = [[0,−1],[1,0]] turns e₁ into e₂: a rotation, which no
    // single reflection (determinant −1) can be.
    REQUIRE_TENSORS_CLOSE(two_step_state(1.0, e1, k, zero_v, two, chunked),
                          torch::tensor({0.0, 1.0}, opts), 1e-12);
    // Values 1 (β = 2) then 0.5 (β = 1): (0.5,0) → (1.5,0) → (0.75 + 0.5/√2, −0.75 + 0.5/√2).
    REQUIRE_TENSORS_CLOSE(two_step_state(0.5, e1, k, torch::tensor({1.0, 0.5}, opts),
                                         torch::tensor({2.0, 1.0}, opts), chunked),
                          torch::tensor({0.75 + 0.5 * r, -0.75 + 0.5 * r}, opts), 1e-12);
  }
}

TEST_CASE("gated deltaproduct: the layer equals the per-token recurrence of the paper (fp64)",
          "[mixer][deltaproduct]") {
  auto host = test::test_host();
  torch::manual_seed(21);
  // Three steps per token, GVA (4 value heads over 2 key heads), a chunk that splits tokens.
  const std::string yaml =
      "{num_householder: 3, num_heads: 2, num_v_heads: 4, expand_v: 1, chunk_size: 4}";
  for (const bool fused : {true, false}) {
    CAPTURE(fused);
    auto m = test::make_mixer(*host, "gated_deltaproduct", yaml, 16, fused);
    m->to(torch::kDouble);
    {
      torch::NoGradGuard ng;  // A_log spread so that the decays differ per head
      m->named_parameters()["A_log"].copy_(torch::tensor({-2.0, -0.5, 0.3, 1.0}));
    }
    const torch::Tensor x = torch::randn({2, 7, 16}, torch::kDouble);
    torch::NoGradGuard ng;
    const torch::Tensor want = oracle(*m, x, {3, 2, 4, 8, 8});
    CHECK(test::max_abs_diff(m->forward(x, torch::arange(7), nullptr), want) < 1e-12);
  }
}

TEST_CASE("gated deltaproduct: one step per token is Gated DeltaNet with the same weights",
          "[mixer][deltaproduct]") {
  auto host = test::test_host();
  torch::manual_seed(22);
  const bool neg = GENERATE(false, true);
  CAPTURE(neg);
  auto m = test::make_mixer(
      *host, "gated_deltaproduct",
      std::string("{num_householder: 1, num_heads: 2, chunk_size: 8, allow_neg_eigval: ") +
          (neg ? "true}" : "false}"),
      16);
  GatedDeltaNetOptions go;
  go.n_heads = 2;
  go.chunk_size = 8;
  go.allow_neg_eigval = neg;
  GatedDeltaNet gdn(go, 16);
  {
    torch::NoGradGuard ng;
    auto src = m->named_parameters();
    for (auto& p : gdn.named_parameters()) {
      const std::string name = p.key() == "o_norm.weight" ? "o_norm_weight" : p.key();
      REQUIRE(src.contains(name));
      p.value().copy_(src[name]);
    }
  }
  m->to(torch::kDouble);
  gdn.to(torch::kDouble);
  const torch::Tensor x = torch::randn({2, 19, 16}, torch::kDouble);
  torch::NoGradGuard ng;
  CHECK(test::max_abs_diff(m->forward(x, torch::arange(19), nullptr),
                           gdn.forward(x, torch::arange(19), nullptr)) < 1e-12);
}

TEST_CASE("gated deltaproduct: the chunked layer equals the recurrent one, FD gradients",
          "[mixer][deltaproduct]") {
  auto host = test::test_host();
  const bool fused = GENERATE(true, false);
  CAPTURE(fused);
  torch::manual_seed(23);
  test::check_chunked_layer(
      *host, "gated_deltaproduct", "num_heads: 2, num_householder: 3, chunk_size: 4", 8, 19,
      {"A_log", "dt_bias", "b_proj.weight", "k_conv", "o_norm_weight"}, fused);
  // Without the forget gate and the output gate, positive eigenvalues only.
  test::check_chunked_layer(*host, "gated_deltaproduct",
                            "num_heads: 2, num_householder: 2, chunk_size: 4, use_forget_gate: "
                            "false, use_output_gate: false, allow_neg_eigval: false",
                            8, 13, {"v_proj.weight", "q_conv"}, fused);
}

TEST_CASE("gated deltaproduct: the summary counts its state, parameters and chunk window",
          "[mixer][deltaproduct]") {
  auto host = test::test_host();
  const auto m = test::make_mixer(*host, "gated_deltaproduct", "{num_heads: 2}");  // d_model 32
  const MixerInfo info = m->info(64);
  // d_k 16, d_v 32: 2 heads of 16 x 32 state; 3 taps of the q (32), k (2·32) and v (2·64) convs.
  CHECK(info.state_floats == 2 * 16 * 32 + 3 * (32 + 2 * 32 + 2 * 64));
  CHECK_FALSE(info.pairwise);
  CHECK(m->state_reset_window() == 32);  // a chunk of 64 steps is 32 tokens at n_h = 2
  int64_t n = 0;
  for (const auto& p : m->parameters()) n += p.numel();
  // q 32x32, k 32x64, v 32x128, β 32x4, a 32x2, A_log and dt_bias 2 each, g 32x64, o 64x32, the
  // convs (32 + 64 + 128) x 4, the norm weight 32.
  CHECK(n == 32 * 32 + 32 * 64 + 32 * 128 + 32 * 4 + 32 * 2 + 4 + 32 * 64 + 64 * 32 + 224 * 4 + 32);
  // Each extra step adds its key, value and β projections and conv channels, and a kernel step.
  const auto four =
      test::make_mixer(*host, "gated_deltaproduct", "{num_heads: 2, num_householder: 4}");
  CHECK(four->info(64).flops_per_token > 1.8 * info.flops_per_token);
}

}  // namespace gated_deltaproduct_test
