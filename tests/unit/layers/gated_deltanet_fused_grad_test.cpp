// The fused CPU training kernel of the gated delta rule (chunk_gated_delta_rule_fused): values and
// gradients of every input (q, k, v, g, β, h0) against the autograd tensor form
// (chunk_gated_delta_rule_torch), the recurrent form, and central finite differences; odd shapes
// (short last chunk, T < C, GVA 2× and 4×, d_k ≠ d_v, token-major strided inputs), gradients into
// o only, the final state only, or both; strong decay and full reset; the dispatch and its switch;
// the layer's parameter gradients with the fused and the reference kernels.

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "layers/gated_deltanet.h"
#include "layers/kernels/gated_deltanet_kernels.h"
#include "layers/norm.h"
#include "layers_test_util.h"

using namespace hybridlab;
using hybridlab::test::err_ratio;
using hybridlab::test::max_abs_diff;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace gated_deltanet_fused_grad_test {
namespace {

struct Inputs {
  torch::Tensor q, k, v, g, beta, h0;
};

// fla tests/ops/test_gdn.py's vectors: L2-normalised q, k; v ~ N(0,1); β = sigmoid(N(0,1));
// g = logsigmoid(U(0,1)) / lambda.
Inputs make_inputs(int64_t B, int64_t Hk, int64_t Hv, int64_t T, int64_t K, int64_t V, bool with_h0,
                   double lambda, uint64_t seed) {
  torch::manual_seed(seed);
  const auto o = torch::TensorOptions().dtype(torch::kDouble);
  Inputs in;
  in.q = l2_normalize(torch::randn({B, Hk, T, K}, o));
  in.k = l2_normalize(torch::randn({B, Hk, T, K}, o));
  in.v = torch::randn({B, Hv, T, V}, o);
  in.beta = torch::sigmoid(torch::randn({B, Hv, T}, o));
  in.g = torch::log_sigmoid(torch::rand({B, Hv, T}, o)) / lambda;
  if (with_h0) in.h0 = torch::randn({B, Hv, K, V}, o);
  return in;
}

// The same values stored token-major ([B,T,H,D] in memory), as the layer's projections are.
torch::Tensor token_major(const torch::Tensor& x) {
  return x.transpose(1, 2).contiguous().transpose(1, 2);
}

enum class Form { fused, tensor, recurrent };
enum class Into { both, output, state };

struct Run {
  torch::Tensor o, state;
  std::vector<torch::Tensor> grads;  // q, k, v, g, beta, h0 (undefined without h0)
};

// Forward and backward of L = Σ o⊙w_o + Σ h_T⊙w_h (or one of the two) through one form, on the
// inputs converted to dtype (and laid out token-major when strided).
Run run(Form form, const Inputs& in, torch::Dtype dtype, double scale, int64_t C,
        bool strided = false, Into into = Into::both) {
  std::vector<torch::Tensor> xs = {in.q, in.k, in.v, in.g, in.beta, in.h0};
  for (size_t i = 0; i < xs.size(); ++i) {
    if (!xs[i].defined()) continue;
    xs[i] = xs[i].to(dtype);
    if (strided && i < 5) xs[i] = token_major(xs[i]);  // q, k, v, g, beta; h0 stays [B,H,K,V]
    xs[i] = xs[i].detach().requires_grad_(true);
  }
  GatedDeltaResult r;
  switch (form) {
    case Form::fused:
      r = chunk_gated_delta_rule_fused(xs[0], xs[1], xs[2], xs[3], xs[4], scale, xs[5], C);
      break;
    case Form::tensor:
      r = chunk_gated_delta_rule_torch(xs[0], xs[1], xs[2], xs[3], xs[4], scale, xs[5], C);
      break;
    case Form::recurrent:
      r = recurrent_gated_delta_rule(xs[0], xs[1], xs[2], xs[3], xs[4], scale, xs[5]);
      break;
  }
  torch::manual_seed(1234);  // the same loss weights for every form
  const torch::Tensor wo = torch::randn(r.o.sizes(), torch::kDouble).to(r.o.scalar_type());
  const torch::Tensor wh = torch::randn(r.state.sizes(), torch::kDouble).to(r.state.scalar_type());
  torch::Tensor loss = torch::zeros({}, r.o.options());
  if (into != Into::state) loss = loss + (r.o * wo).sum();
  if (into != Into::output) loss = loss + (r.state * wh).sum();
  loss.backward();
  Run out{r.o.detach(), r.state.detach(), {}};
  for (auto& x : xs) out.grads.push_back(x.defined() ? x.grad() : torch::Tensor());
  return out;
}

// max |a − b| / max |b|: the relative tolerance of the fp64 comparisons.
double rel_max(const torch::Tensor& a, const torch::Tensor& b) {
  const double den = b.to(torch::kDouble).abs().max().item<double>();
  return max_abs_diff(a, b) / std::max(den, 1e-300);
}

const char* const kNames[] = {"q", "k", "v", "g", "beta", "h0"};

struct Shape {
  int64_t B, Hk, Hv, T, K, V, C;
  bool h0, strided;
};

}  // namespace

TEST_CASE("fused training kernel: values and every gradient == tensor form (fp64 1e-10, fp32 1e-5)",
          "[gdn][fused]") {
  const Shape sh = GENERATE(Shape{1, 1, 2, 7, 4, 4, 4, true, false},  // short last chunk, GVA 2×
                            Shape{2, 2, 4, 65, 16, 32, 64, true, false},  // last chunk of 1 token
                            Shape{1, 1, 4, 30, 8, 12, 64, false, false},  // T < C, GVA 4×, K ≠ V
                            Shape{2, 2, 2, 128, 16, 16, 32, true, false},  // whole chunks, no GVA
                            Shape{2, 2, 8, 150, 16, 24, 64, true, true},   // token-major, GVA 4×
                            Shape{1, 2, 4, 97, 32, 8, 16, false, true});   // token-major, K > V
  const Into into = GENERATE(Into::both, Into::output, Into::state);
  CAPTURE(sh.B, sh.Hk, sh.Hv, sh.T, sh.K, sh.V, sh.C, sh.h0, sh.strided, static_cast<int>(into));
  const Inputs in = make_inputs(sh.B, sh.Hk, sh.Hv, sh.T, sh.K, sh.V, sh.h0, 1.0,
                                static_cast<uint64_t>(sh.T * 13 + sh.Hv));
  const double scale = 1.0 / std::sqrt(static_cast<double>(sh.K));

  const Run ref = run(Form::tensor, in, torch::kDouble, scale, sh.C, sh.strided, into);
  const Run f64 = run(Form::fused, in, torch::kDouble, scale, sh.C, sh.strided, into);
  const Run f32 = run(Form::fused, in, torch::kFloat, scale, sh.C, sh.strided, into);
  const Run t32 = run(Form::tensor, in, torch::kFloat, scale, sh.C, sh.strided, into);
  REQUIRE(rel_max(f64.o, ref.o) < 1e-10);
  REQUIRE(rel_max(f64.state, ref.state) < 1e-10);
  REQUIRE(err_ratio(f32.o, ref.o) < 1e-5);
  for (size_t i = 0; i < 6; ++i) {
    INFO("gradient of " << kNames[i]);
    if (!ref.grads[i].defined()) {
      // No path from this input to the loss in the tensor form's graph (q when only the final
      // state is used; h0 when there is none): the fused gradient is absent or zero.
      REQUIRE((!f64.grads[i].defined() || f64.grads[i].abs().max().item<double>() == 0.0));
      continue;
    }
    REQUIRE(f64.grads[i].sizes() == ref.grads[i].sizes());
    REQUIRE(f64.grads[i].scalar_type() == torch::kDouble);
    REQUIRE(f32.grads[i].scalar_type() == torch::kFloat);
    REQUIRE(rel_max(f64.grads[i], ref.grads[i]) < 1e-10);
    // fp32 against the fp64 truth, and no worse than the fp32 tensor form by much.
    const double e32 = err_ratio(f32.grads[i], ref.grads[i]);
    CAPTURE(e32, err_ratio(t32.grads[i], ref.grads[i]));
    REQUIRE(e32 < 1e-5);
  }
}

TEST_CASE("fused training kernel: gradients == recurrent form and finite differences (fp64)",
          "[gdn][fused]") {
  // T = 7 with C = 4: one whole and one partial chunk; GVA 1 → 2; K ≠ V; non-zero h0.
  const Inputs in = make_inputs(1, 1, 2, 7, 4, 3, true, 1.0, 31);
  const Run f = run(Form::fused, in, torch::kDouble, 0.5, 4);
  const Run rec = run(Form::recurrent, in, torch::kDouble, 0.5, 4);
  for (size_t i = 0; i < 6; ++i) {
    INFO("gradient of " << kNames[i]);
    REQUIRE(rel_max(f.grads[i], rec.grads[i]) < 1e-10);
  }
  // Central differences of the same loss, element by element.
  std::vector<torch::Tensor> xs = {in.q.clone(), in.k.clone(),    in.v.clone(),
                                   in.g.clone(), in.beta.clone(), in.h0.clone()};
  torch::manual_seed(1234);
  const torch::Tensor wo = torch::randn({1, 2, 7, 3}, torch::kDouble);
  const torch::Tensor wh = torch::randn({1, 2, 4, 3}, torch::kDouble);
  auto loss = [&]() {
    auto r = chunk_gated_delta_rule_fused(xs[0], xs[1], xs[2], xs[3], xs[4], 0.5, xs[5], 4);
    return (r.o * wo).sum() + (r.state * wh).sum();
  };
  for (size_t i = 0; i < 6; ++i) {
    INFO("input " << kNames[i]);
    const torch::Tensor numeric = hybridlab::test::numeric_grad(loss, xs[i]);
    REQUIRE(rel_max(f.grads[i], numeric) < 1e-8);  // central differences: ~1e-10 truncation
  }
}

TEST_CASE("fused training kernel: strong decay and full reset, gradients exact in relative terms",
          "[gdn][fused]") {
  // lambda 0.02: g down to about −35 per token (large A); −50 and −1e4: full reset.
  const int kind = GENERATE(0, 1, 2);
  CAPTURE(kind);
  Inputs in = make_inputs(1, 1, 2, 67, 8, 8, true, kind == 0 ? 0.02 : 1.0, 51 + kind);
  if (kind > 0) {
    in.g = torch::full_like(in.g, kind == 1 ? -50.0 : -1e4) + 0.1 * torch::rand_like(in.g);
  }
  const Run f = run(Form::fused, in, torch::kDouble, 0.35, 16);
  const Run rec = run(Form::recurrent, in, torch::kDouble, 0.35, 16);
  const Run f32 = run(Form::fused, in, torch::kFloat, 0.35, 16);
  for (size_t i = 0; i < 6; ++i) {
    INFO("gradient of " << kNames[i]);
    REQUIRE(torch::isfinite(f.grads[i]).all().item<bool>());
    REQUIRE(torch::isfinite(f32.grads[i]).all().item<bool>());
    // Relative to the gradient's own size: the log-decay gradient is tiny under strong decay
    // (about e^{-50}) and must not drown in an O(1)·eps rounding error.
    REQUIRE(err_ratio(f.grads[i], rec.grads[i]) < 1e-10);
    REQUIRE(err_ratio(f32.grads[i], rec.grads[i]) < 1e-5);
  }
  if (kind == 1) {
    const double dg_rms = rec.grads[3].pow(2).mean().sqrt().item<double>();
    CAPTURE(dg_rms);
    REQUIRE(dg_rms < 1e-15);  // the regime the check above is about
    REQUIRE(dg_rms > 0);
  }
}

TEST_CASE("fused training kernel: only some inputs need gradients, threads change nothing",
          "[gdn][fused]") {
  const Inputs in = make_inputs(2, 2, 4, 70, 8, 16, true, 1.0, 71);
  // v alone requires grad.
  const torch::Tensor v = in.v.clone().requires_grad_(true);
  auto r = chunk_gated_delta_rule_fused(in.q, in.k, v, in.g, in.beta, 0.4, in.h0, 32);
  (r.o.sum() + r.state.sum()).backward();
  const torch::Tensor v_ref = in.v.clone().requires_grad_(true);
  auto t = chunk_gated_delta_rule_torch(in.q, in.k, v_ref, in.g, in.beta, 0.4, in.h0, 32);
  (t.o.sum() + t.state.sum()).backward();
  REQUIRE(rel_max(v.grad(), v_ref.grad()) < 1e-10);
  // Heads are independent: 1 and 2 intra-op threads give bitwise-identical gradients.
  const int before = at::get_num_threads();
  at::set_num_threads(1);
  const Run one = run(Form::fused, in, torch::kFloat, 0.4, 32);
  at::set_num_threads(2);
  const Run two = run(Form::fused, in, torch::kFloat, 0.4, 32);
  at::set_num_threads(before);
  for (size_t i = 0; i < 6; ++i) REQUIRE(torch::equal(one.grads[i], two.grads[i]));
}

TEST_CASE("chunk_gated_delta_rule dispatch: fused for CPU training, tensor form when switched off",
          "[gdn][fused]") {
  const Inputs in = make_inputs(1, 1, 2, 40, 8, 8, true, 1.0, 81);
  const torch::Tensor v = in.v.to(torch::kFloat).requires_grad_(true);
  auto call = [&](bool fused) {
    return chunk_gated_delta_rule(in.q.to(torch::kFloat), in.k.to(torch::kFloat), v,
                                  in.g.to(torch::kFloat), in.beta.to(torch::kFloat), 0.3,
                                  in.h0.to(torch::kFloat), 16, fused);
  };
  const GatedDeltaResult on = call(true), off = call(false);
  REQUIRE(on.state.grad_fn());
  REQUIRE(off.state.grad_fn());
  const std::string on_fn = on.state.grad_fn()->name(), off_fn = off.state.grad_fn()->name();
  CAPTURE(on_fn, off_fn);
  REQUIRE(on_fn.find("ChunkGatedDeltaRuleFused") != std::string::npos);
  REQUIRE(off_fn.find("ChunkGatedDeltaRuleFused") == std::string::npos);
  REQUIRE(err_ratio(on.o, off.o) < 1e-6);
  REQUIRE(err_ratio(on.state, off.state) < 1e-6);
  // The fused backward is not differentiable: asking for a graph of the gradient throws.
  const torch::Tensor l = on.o.sum() + on.state.sum();
  REQUIRE_THROWS_WITH(torch::autograd::grad({l}, {v}, {}, true, /*create_graph=*/true),
                      Catch::Matchers::Contains("not differentiable"));
}

TEST_CASE("Gated DeltaNet layer: fused and reference kernels give the same parameter gradients",
          "[gdn][fused]") {
  GatedDeltaNetOptions opts;
  opts.n_heads = 2;
  opts.n_v_heads = 4;  // GVA 2×
  opts.head_dim = 16;
  opts.expand_v = 1.5;  // d_v 24 ≠ d_k
  opts.chunk_size = 32;
  auto grads = [&](bool fused) {
    opts.fused_kernels = fused;
    torch::manual_seed(5);
    GatedDeltaNet layer(opts, 32);
    layer.to(torch::kDouble);
    torch::manual_seed(6);
    const torch::Tensor x = torch::randn({2, 70, 32}, torch::kDouble);  // 70: a short last chunk
    const torch::Tensor y = layer.forward(x, torch::arange(70), nullptr);
    (y * torch::randn_like(y)).sum().backward();
    std::vector<std::pair<std::string, torch::Tensor>> out;
    for (const auto& p : layer.named_parameters()) out.emplace_back(p.key(), p.value().grad());
    return out;
  };
  const auto fused = grads(true), reference = grads(false);
  REQUIRE(fused.size() == reference.size());
  for (size_t i = 0; i < fused.size(); ++i) {
    INFO("parameter " << fused[i].first);
    REQUIRE(fused[i].second.defined());
    REQUIRE(rel_max(fused[i].second, reference[i].second) < 1e-10);
  }
}

}  // namespace gated_deltanet_fused_grad_test
