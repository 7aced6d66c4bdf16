// The Forgetting Transformer's forget gate (the `fox` plugin, Lin et al., ICLR 2025) through the
// data_bias hook (plugin API v2): the reference notes' hand values (mixers_and_schemes_v2.md §4),
// a constant gate == ALiBi, f ≡ 1 == no position, the first gate's zero gradient, the tiled path
// == the dense path (values and every gradient, the gate's projection and the layer input
// included) and central finite differences through the tiled path, decoding with a window, and
// the settings a config may get wrong.

#include <torch/torch.h>

#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "hybridlab/config.h"
#include "hybridlab/error.h"
#include "hybridlab/position.h"
#include "layers/attention.h"
#include "layers/kernels/attention_tiled.h"
#include "layers_test_util.h"

using namespace hybridlab;
using hybridlab::test::err_ratio;
using hybridlab::test::numeric_grad;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace fox_test {
namespace {

PositionContext context(int64_t d_model, int64_t H, int64_t Hkv, int64_t Dh) {
  return hybridlab::test::attention_context(H, Hkv, Dh, true, d_model);
}

std::shared_ptr<PositionScheme> make(const std::string& name, const std::string& yaml,
                                     const PositionContext& ctx) {
  return hybridlab::test::make_scheme(name, yaml, ctx);
}

std::string config_error(const std::string& yaml, const PositionContext& ctx) {
  try {
    make("fox", yaml, ctx);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

AttentionOptions attention_options(int64_t H, int64_t Hkv, int64_t Dh, int64_t window = 0) {
  AttentionOptions o;
  o.n_heads = H;
  o.n_kv_heads = Hkv;
  o.head_dim = Dh;
  o.window = window;
  o.block_size = 8;
  return o;
}

// The data gate's projection set to weight 0 and bias `b`: f = σ(b) for every token.
void constant_data_gate(PositionScheme& s, double b) {
  torch::NoGradGuard no_grad;
  auto p = s.named_parameters();
  p["fgate_proj.weight"].zero_();
  p["fgate_proj.bias"].fill_(b);
}

SeparableBias separable(PositionScheme& s, const torch::Tensor& x, const torch::Tensor& pos) {
  const DataBias d = s.data_bias(x, pos, torch::Tensor());
  return {d.query, d.key};
}

}  // namespace

TEST_CASE("fox: the reference's hand values (τ = 10, f = 1/2 gives weights 1/7, 2/7, 4/7)",
          "[position][fox]") {
  // τ = 10: b = −ln(expm1(1/10)) = 2.2521685 and ln σ(b) = −0.1 (§4 tests).
  auto fixed = make("fox", "{gate: fixed, tau_min: 10, tau_max: 10}", context(8, 1, 1, 8));
  CHECK(fixed->parameters().empty());  // fixed: a buffer, not learned
  CHECK(std::abs(fixed->named_buffers()["fgate_bias"].item<double>() - 2.2521685) < 1e-6);
  const torch::Tensor logf = fixed->inspect(4)[0].values;  // [H, (ln f, τ)]
  CHECK(std::abs(logf[0][0].item<double>() + 0.1) < 1e-6);
  CHECK(std::abs(logf[0][1].item<double>() - 10.0) < 1e-4);

  // f = σ(0) = 1/2 and zero logits: row 2 weighs keys 0, 1, 2 as 1/4 : 1/2 : 1, i.e. 1/7, 2/7,
  // 4/7 — in the dense and in the tiled path.
  auto half = make("fox", "{}", context(8, 1, 1, 3));
  constant_data_gate(*half, 0.0);
  Attention att(attention_options(1, 1, 3), 8, half, true);
  const torch::Tensor pos = torch::arange(3);
  const SeparableBias bias = separable(*half, torch::randn({1, 3, 8}), pos);
  REQUIRE(bias.query.sizes() == at::IntArrayRef({1, 1, 3}));
  const torch::Tensor zeros = torch::zeros({1, 1, 3, 3});
  const torch::Tensor v = torch::eye(3).view({1, 1, 3, 3});
  const torch::Tensor want = torch::tensor({1.0f / 7, 2.0f / 7, 4.0f / 7});
  for (AttendPath path : {AttendPath::kDense, AttendPath::kTiled}) {
    att.set_attend_path(path);
    const torch::Tensor o = att.attend(zeros, zeros, v, pos, pos, 8, false, bias);
    REQUIRE_TENSORS_CLOSE(o[0][0][2], want, 1e-6);
    REQUIRE_TENSORS_CLOSE(o[0][0][1], torch::tensor({1.0f / 3, 2.0f / 3, 0.0f}), 1e-6);
  }
}

TEST_CASE("fox: a constant gate is ALiBi with slope −ln f, f ≡ 1 is no position at all",
          "[position][fox]") {
  torch::manual_seed(3);
  const PositionContext ctx = context(32, 4, 4, 8);
  auto fox = make("fox", "{gate: fixed, tau_min: 2, tau_max: 64}", ctx);
  fox->to(torch::kDouble);
  // ALiBi with the slopes −ln σ(b_h) of the fixed gate (ln σ(b) = −1/τ up to b's float rounding).
  const torch::Tensor slopes = -torch::log_sigmoid(fox->named_buffers()["fgate_bias"]);
  std::string list;
  for (int64_t h = 0; h < 4; ++h)
    list += fmt::format("{}{:.17g}", h ? ", " : "", slopes[h].item<double>());
  auto alibi = make("alibi", "{slopes: [" + list + "]}", ctx);
  Attention a(attention_options(4, 4, 8), 32, fox, true);
  Attention b(attention_options(4, 4, 8), 32, alibi, true);
  a.to(torch::kDouble);
  b.to(torch::kDouble);
  {
    torch::NoGradGuard no_grad;
    for (const char* w : {"q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight"})
      b.named_parameters()[w].copy_(a.named_parameters()[w]);
  }
  const torch::Tensor x = torch::randn({2, 29, 32}, torch::kDouble);
  const torch::Tensor pos = torch::arange(29);
  // ALiBi builds its bias in fp32 (a rounding of ~1e-7 relative per logit).
  REQUIRE(err_ratio(a.forward(x, pos, nullptr), b.forward(x, pos, nullptr)) < 1e-7);

  // f = σ(40) = 1 − 4e−18: the bias vanishes and FoX is plain causal attention (NoPE).
  auto one = make("fox", "{bias_init: 40}", ctx);
  constant_data_gate(*one, 40.0);
  auto nope = make("nope", "{}", ctx);
  Attention c(attention_options(4, 4, 8), 32, one, true);
  Attention d(attention_options(4, 4, 8), 32, nope, true);
  {
    torch::NoGradGuard no_grad;
    for (const char* w : {"q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight"})
      d.named_parameters()[w].copy_(c.named_parameters()[w]);
  }
  const torch::Tensor xf = torch::randn({2, 29, 32});
  REQUIRE(err_ratio(c.forward(xf, pos, nullptr), d.forward(xf, pos, nullptr)) < 1e-6);
}

TEST_CASE("fox: the first token's forget gate gets no gradient, every later one does",
          "[position][fox]") {
  // ln f_0 never enters any D_ij = Σ_{l=j+1..i} ln f_l (§4 tests), so ∂L/∂ln f_0 = 0.
  torch::manual_seed(5);
  const int64_t B = 2, H = 2, T = 21, Dh = 4;
  const torch::Tensor logf =
      torch::log_sigmoid(torch::randn({B, H, T}, torch::kDouble) + 1.0).detach().requires_grad_();
  const torch::Tensor q = torch::randn({B, H, T, Dh}, torch::kDouble);
  const torch::Tensor k = torch::randn({B, H, T, Dh}, torch::kDouble);
  const torch::Tensor v = torch::randn({B, H, T, Dh}, torch::kDouble);
  const torch::Tensor pos = torch::arange(T);
  TiledAttentionOptions t;
  t.tile_q = 4;
  t.tile_k = 8;
  const torch::Tensor c = logf.cumsum(-1);
  const torch::Tensor o = tiled_attention(q, k, v, pos, pos, nullptr, t, {c, -c});
  const torch::Tensor g = torch::autograd::grad({(o * torch::randn_like(o)).sum()}, {logf})[0];
  REQUIRE(g.select(2, 0).abs().max().item<double>() < 1e-13);
  REQUIRE(g.narrow(2, 1, T - 1).abs().min().item<double>() > 1e-8);
}

TEST_CASE("fox: tiled == dense in values and gradients (q, k, v, the gate, the layer input)",
          "[position][fox][attention_tiled]") {
  const torch::Dtype dtype = GENERATE(torch::kDouble, torch::kFloat);
  const int64_t kv_heads = GENERATE(4, 2);
  const int64_t window = GENERATE(0, 5);
  CAPTURE(dtype, kv_heads, window);
  torch::manual_seed(11);
  const int64_t B = 2, H = 4, D = 16, Dh = 4, Tk = 43, Tq = 37;  // 6 cached keys, odd tiles
  auto fox = make("fox", "{}", context(D, H, kv_heads, Dh));
  fox->to(dtype);
  {
    torch::NoGradGuard no_grad;  // gates away from 1/2, varied per token and head
    fox->named_parameters()["fgate_proj.weight"].normal_(0.0, 0.5);
    fox->named_parameters()["fgate_proj.bias"].uniform_(0.0, 3.0);
  }
  Attention att(attention_options(H, kv_heads, Dh, window), D, fox, true);
  att.to(dtype);
  const auto o = torch::TensorOptions().dtype(dtype);
  const torch::Tensor x = torch::randn({B, Tk, D}, o).requires_grad_();
  const torch::Tensor q = torch::randn({B, H, Tq, Dh}, o).requires_grad_();
  const torch::Tensor k = torch::randn({B, kv_heads, Tk, Dh}, o).requires_grad_();
  const torch::Tensor v = torch::randn({B, kv_heads, Tk, Dh}, o).requires_grad_();
  const torch::Tensor k_pos = torch::arange(Tk) + 2, q_pos = k_pos.narrow(0, Tk - Tq, Tq);
  const torch::Tensor w = torch::randn({B, H, Tq, Dh}, o);
  std::vector<torch::Tensor> inputs = {q, k, v, x};
  for (const auto& p : fox->parameters()) inputs.push_back(p);

  auto run = [&](bool tiled) {
    const DataBias d = fox->data_bias(x, k_pos, torch::Tensor());
    const SeparableBias bias{d.query.narrow(2, Tk - Tq, Tq), d.key};
    torch::Tensor out;
    if (tiled) {
      TiledAttentionOptions t;
      t.window = window;
      t.tile_q = 8;
      t.tile_k = 16;
      out = tiled_attention(q, k, v, q_pos, k_pos, fox, t, bias);
    } else {
      att.set_attend_path(AttendPath::kDense);
      out = att.attend(q, k, v, q_pos, k_pos, 8, false, bias);
    }
    auto grads = torch::autograd::grad({(out * w).sum()}, inputs);
    grads.insert(grads.begin(), out);
    return grads;
  };
  const auto dense = run(false), tiled = run(true);
  const double tol = dtype == torch::kDouble ? 1e-10 : 1e-5;
  for (size_t i = 0; i < dense.size(); ++i) {
    INFO("item " << i << " (output, then the gradients of q, k, v, x, weight, bias)");
    REQUIRE(dense[i].abs().max().item<double>() > 0);
    REQUIRE(err_ratio(tiled[i], dense[i]) <= tol);
  }
}

TEST_CASE("fox: gradients through the tiled path == central finite differences (fp64)",
          "[position][fox][attention_tiled]") {
  torch::manual_seed(13);
  const int64_t H = 2, D = 6, Dh = 3, T = 11;
  auto fox = make("fox", "{bias_init: 1.0}", context(D, H, H, Dh));
  fox->to(torch::kDouble);
  {
    torch::NoGradGuard no_grad;
    fox->named_parameters()["fgate_proj.weight"].normal_(0.0, 0.5);
  }
  const torch::Tensor x = torch::randn({1, T, D}, torch::kDouble).requires_grad_();
  const torch::Tensor q = torch::randn({1, H, T, Dh}, torch::kDouble);
  const torch::Tensor k = torch::randn({1, H, T, Dh}, torch::kDouble);
  const torch::Tensor v = torch::randn({1, H, T, Dh}, torch::kDouble);
  const torch::Tensor w = torch::randn({1, H, T, Dh}, torch::kDouble);
  const torch::Tensor pos = torch::arange(T);
  TiledAttentionOptions t;
  t.tile_q = 4;
  t.tile_k = 4;
  auto loss = [&] {
    const DataBias d = fox->data_bias(x, pos, torch::Tensor());
    return (tiled_attention(q, k, v, pos, pos, fox, t, {d.query, d.key}) * w).sum();
  };
  torch::Tensor weight = fox->named_parameters()["fgate_proj.weight"];
  torch::Tensor bias = fox->named_parameters()["fgate_proj.bias"];
  const auto analytic = torch::autograd::grad({loss()}, {x, weight, bias});
  const std::vector<torch::Tensor> wrt = {x, weight, bias};
  for (size_t i = 0; i < wrt.size(); ++i) {
    INFO("gradient " << i << " (x, weight, bias)");
    const torch::Tensor numeric = numeric_grad(loss, wrt[i].detach());
    REQUIRE(numeric.abs().max().item<double>() > 1e-4);
    REQUIRE(err_ratio(analytic[i], numeric) < 1e-6);
  }
}

TEST_CASE("fox: prefill + decoding == one forward, with a window the cache keeps its key terms",
          "[position][fox]") {
  torch::manual_seed(17);
  const int64_t window = GENERATE(0, 5);
  CAPTURE(window);
  auto fox = make("fox", "{bias_init: 2.0}", context(16, 4, 2, 4));
  Attention att(attention_options(4, 2, 4, window), 16, fox, true);
  const torch::Tensor x = torch::randn({2, 20, 16});
  const torch::Tensor pos = torch::arange(20);
  torch::NoGradGuard no_grad;
  const torch::Tensor whole = att.forward(x, pos, nullptr);
  auto cache = att.make_cache();
  std::vector<torch::Tensor> outs = {
      att.forward(x.narrow(1, 0, 7), pos.narrow(0, 0, 7), cache.get())};
  for (int64_t t = 7; t < 20; ++t)
    outs.push_back(att.forward(x.narrow(1, t, 1), pos.narrow(0, t, 1), cache.get()));
  REQUIRE(err_ratio(torch::cat(outs, 1), whole) < 1e-5);
  const auto* c = dynamic_cast<AttentionCache*>(cache.get());
  REQUIRE(c);
  // One term per kept key and head, and the running c per head.
  REQUIRE(c->bias_key.sizes() == at::IntArrayRef({2, 4, window > 0 ? window : 20}));
  REQUIRE(c->bias_state.sizes() == at::IntArrayRef({2, 4}));
  CHECK(c->nbytes() >= (c->k.numel() + c->v.numel() + c->bias_key.numel() + 8) * 4);
}

TEST_CASE("fox: bad settings and the model-level input name the key", "[position][fox]") {
  const PositionContext ctx = context(16, 4, 4, 4);
  CHECK_THAT(config_error("{gate: forget}", ctx),
             Catch::Contains("gate") && Catch::Contains("bias_only"));
  CHECK_THAT(config_error("{gate: fixed, tau_min: 8, tau_max: 2}", ctx),
             Catch::Contains("tau_max") && Catch::Contains(">= tau_min"));
  CHECK_THAT(config_error("{tau_min: 0}", ctx), Catch::Contains("tau_min"));
  CHECK_THAT(config_error("{bias_init: .nan}", ctx), Catch::Contains("bias_init"));
  CHECK_THAT(config_error("{rope_theta: 10000}", ctx), Catch::Contains("rope_theta"));
  // Keys the chosen gate does not read never look applied.
  CHECK_THAT(config_error("{tau_min: 2, tau_max: 8}", ctx),
             Catch::Contains("tau_min") && Catch::Contains("applies only to gate: bias_only"));
  CHECK_THAT(config_error("{gate: fixed, bias_init: 3}", ctx),
             Catch::Contains("bias_init") && Catch::Contains("applies only to gate: data"));
  CHECK(config_error("{gate: bias_only, tau_min: 2, tau_max: 8}", ctx).empty());
  // Bidirectional attention: future keys would get no decay.
  PositionContext bidirectional = ctx;
  bidirectional.causal = false;
  CHECK_THAT(config_error("{}", bidirectional), Catch::Contains("causal attention"));
  PositionContext input = ctx;  // the model-level scheme: no heads, no layer input of its own
  input.n_heads = 0;
  input.n_kv_heads = 0;
  input.head_dim = 0;
  CHECK_THAT(config_error("{}", input), Catch::Contains("model-level input scheme"));
}

}  // namespace fox_test
