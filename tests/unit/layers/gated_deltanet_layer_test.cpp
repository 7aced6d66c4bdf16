// The Gated DeltaNet layer: streaming (two pieces with carried state and conv cache == whole),
// token-by-token decoding == whole, the gate initialisation, and a finite-difference gradient
// check of the whole layer in double (A_log, dt_bias and the projections).

#include <torch/torch.h>

#include <catch2/catch.hpp>

#include <cmath>

#include "layers/gated_deltanet.h"
#include "layers/kernels/gated_deltanet_kernels.h"
#include "layers_test_util.h"
#include "model/builtin_mixers.h"

using namespace hybridlab;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace gated_deltanet_layer_test {
namespace {
GatedDeltaNetOptions small_options() {
  GatedDeltaNetOptions o;
  o.n_heads = 2;
  o.n_v_heads = 4;
  o.head_dim = 8;
  o.expand_v = 1.5;
  o.chunk_size = 16;
  return o;
}
}  // namespace

TEST_CASE("GDN layer: two pieces with carried state and conv cache == whole sequence", "[gdn]") {
  torch::manual_seed(1);
  GatedDeltaNet layer(small_options(), 32);
  const torch::Tensor x = torch::randn({2, 75, 32});
  const torch::Tensor pos = torch::arange(75);
  const torch::Tensor whole = layer.forward(x, pos, nullptr);
  const int64_t split = GENERATE(1, 2, 16, 40, 74);
  CAPTURE(split);
  auto cache = layer.make_cache();
  const torch::Tensor a =
      layer.forward(x.narrow(1, 0, split), pos.narrow(0, 0, split), cache.get());
  const torch::Tensor b =
      layer.forward(x.narrow(1, split, 75 - split), pos.narrow(0, split, 75 - split), cache.get());
  REQUIRE_TENSORS_CLOSE(torch::cat({a, b}, 1), whole, 1e-5);
}

TEST_CASE("GDN layer: prefill then token-by-token decoding == whole sequence", "[gdn]") {
  torch::manual_seed(2);
  GatedDeltaNet layer(small_options(), 32);
  const torch::Tensor x = torch::randn({1, 40, 32});
  const torch::Tensor pos = torch::arange(40);
  const torch::Tensor whole = layer.forward(x, pos, nullptr);
  auto cache = layer.make_cache();
  std::vector<torch::Tensor> outs = {
      layer.forward(x.narrow(1, 0, 23), pos.narrow(0, 0, 23), cache.get())};
  for (int64_t t = 23; t < 40; ++t) {
    outs.push_back(layer.forward(x.narrow(1, t, 1), pos.narrow(0, t, 1), cache.get()));
  }
  REQUIRE_TENSORS_CLOSE(torch::cat(outs, 1), whole, 1e-5);
  // The recurrent mode of the layer gives the same as the chunked one.
  GatedDeltaNetOptions ro = small_options();
  ro.mode = "recurrent";
  GatedDeltaNet rec(ro, 32);
  {
    torch::NoGradGuard ng;
    auto src = layer.named_parameters(), dst = rec.named_parameters();
    for (auto& p : src) dst[p.key()].copy_(p.value());
  }
  REQUIRE_TENSORS_CLOSE(rec.forward(x, pos, nullptr), whole, 1e-5);
}

TEST_CASE("GDN layer: A_log and dt_bias follow the paper's initialisation", "[gdn]") {
  torch::manual_seed(3);
  GatedDeltaNetOptions o;
  o.n_heads = 4;
  o.n_v_heads = 64;
  GatedDeltaNet layer(o, 64);
  const torch::Tensor A = layer.A_log.exp();
  REQUIRE(A.min().item<float>() > 0.0f);
  REQUIRE(A.max().item<float>() <= 16.0f);
  // softplus(dt_bias) recovers dt in [1e-3, 0.1].
  const torch::Tensor dt = torch::softplus(layer.dt_bias);
  REQUIRE(dt.min().item<float>() >= 1e-3f * 0.999f);
  REQUIRE(dt.max().item<float>() <= 0.1f * 1.001f);
}

TEST_CASE("GDN layer: finite-difference gradient check in double on a tiny layer", "[gdn]") {
  torch::manual_seed(4);
  GatedDeltaNetOptions o;
  o.n_heads = 1;
  o.n_v_heads = 2;
  o.head_dim = 4;
  o.expand_v = 1.0;
  o.chunk_size = 4;
  GatedDeltaNet layer(o, 6);
  layer.to(torch::kDouble);
  const torch::Tensor x = torch::randn({1, 7, 6}, torch::kDouble);
  const torch::Tensor w = torch::randn({1, 7, 6}, torch::kDouble);
  const torch::Tensor pos = torch::arange(7);
  auto loss = [&]() { return (layer.forward(x, pos, nullptr) * w).sum(); };
  layer.zero_grad();
  loss().backward();
  for (const auto& p : layer.named_parameters()) {
    const std::string& name = p.key();
    if (name != "A_log" && name != "dt_bias" && name != "q_proj.weight" &&
        name != "k_proj.weight" && name != "b_proj.weight" && name != "a_proj.weight" &&
        name != "q_conv" && name != "o_norm.weight") {
      continue;
    }
    INFO("parameter " << name);
    const torch::Tensor analytic = p.value().grad().clone();
    const torch::Tensor numeric = hybridlab::test::numeric_grad(loss, p.value().detach());
    REQUIRE(analytic.abs().max().item<double>() > 0);
    REQUIRE_TENSORS_CLOSE(analytic, numeric, 1e-7);
  }
}

TEST_CASE("GDN layer: causal (a future token changes no earlier output)", "[gdn]") {
  torch::manual_seed(5);
  GatedDeltaNet layer(small_options(), 32);
  torch::Tensor x = torch::randn({1, 50, 32});
  const torch::Tensor pos = torch::arange(50);
  const torch::Tensor y = layer.forward(x, pos, nullptr);
  x.select(1, 37).add_(3.0);
  const torch::Tensor y2 = layer.forward(x, pos, nullptr);
  REQUIRE_TENSORS_CLOSE(y2.narrow(1, 0, 37), y.narrow(1, 0, 37), 1e-6);
  REQUIRE(hybridlab::test::max_abs_diff(y2.select(1, 37), y.select(1, 37)) > 1e-3);
}

namespace {
MixerContext gdn_context(int64_t d_model, bool fused_kernels) {
  MixerContext ctx;
  ctx.d_model = d_model;
  ctx.fused_kernels = fused_kernels;
  return ctx;
}
}  // namespace

TEST_CASE("GDN options: an overflowing value width is a located error", "[gdn]") {
  // head_dim 32 * 99999999999999999999 would overflow the width's llround (found by the fuzz
  // harness's per-key cases: "GatedDeltaNet: bad head layout" from LibTorch).
  for (const char* v : {"99999999999999999999", "1e13"}) {
    INFO(v);
    Config cfg = Config::parse(std::string("g: {n_heads: 2, expand_v: ") + v + "}\n", "g.yaml");
    Section g = cfg.section("g");
    read_gated_deltanet_options(g, gdn_context(64, true));
    REQUIRE(cfg.errors().size() == 1u);
    CHECK_THAT(cfg.errors()[0], Catch::Contains("g.yaml:1:17: g.expand_v: head_dim * expand_v "
                                                "must be a whole number from 1 to 2^40"));
  }
}

TEST_CASE("GDN options: fused_kernels belongs to model.fused_kernels, an equal old key still loads",
          "[gdn]") {
  // Configurations resolved before model.fused_kernels owned the key carry both, equal.
  Config same = Config::parse("g: {n_heads: 2, fused_kernels: false}\n", "g.yaml");
  Section g = same.section("g");
  const GatedDeltaNetOptions o = read_gated_deltanet_options(g, gdn_context(64, false));
  CHECK(same.errors().empty());
  CHECK_FALSE(o.fused_kernels);  // the model's value, whatever the default
  Config differ = Config::parse("g: {n_heads: 2, fused_kernels: false}\n", "g.yaml");
  Section d = differ.section("g");
  read_gated_deltanet_options(d, gdn_context(64, true));
  REQUIRE(differ.errors().size() == 1u);
  CHECK_THAT(differ.errors()[0],
             Catch::Contains("g.yaml:1:17: g.fused_kernels: model.fused_kernels switches every "
                             "fused kernel"));
}

TEST_CASE("GDN layer: allow_neg_eigval doubles beta, decoding and recurrent mode still agree",
          "[gdn]") {
  torch::manual_seed(4);
  GatedDeltaNetOptions o = small_options();
  o.allow_neg_eigval = true;
  GatedDeltaNet layer(o, 32), plain(small_options(), 32);
  {
    torch::NoGradGuard ng;
    auto src = layer.named_parameters(), dst = plain.named_parameters();
    for (auto& p : src) dst[p.key()].copy_(p.value());
  }
  torch::Tensor beta_neg, beta_plain;
  layer.set_probe([&](const torch::Tensor&, const torch::Tensor& b) { beta_neg = b.detach(); });
  plain.set_probe([&](const torch::Tensor&, const torch::Tensor& b) { beta_plain = b.detach(); });
  const torch::Tensor x = torch::randn({1, 30, 32});
  const torch::Tensor pos = torch::arange(30);
  const torch::Tensor whole = layer.forward(x, pos, nullptr);
  plain.forward(x, pos, nullptr);
  REQUIRE_TENSORS_CLOSE(beta_neg, 2 * beta_plain, 0.0);
  REQUIRE(beta_neg.max().item<double>() > 1.0);  // the range past 1 is used at this init
  auto cache = layer.make_cache();
  std::vector<torch::Tensor> outs = {
      layer.forward(x.narrow(1, 0, 11), pos.narrow(0, 0, 11), cache.get())};
  for (int64_t t = 11; t < 30; ++t)
    outs.push_back(layer.forward(x.narrow(1, t, 1), pos.narrow(0, t, 1), cache.get()));
  REQUIRE_TENSORS_CLOSE(torch::cat(outs, 1), whole, 1e-5);
  o.mode = "recurrent";
  GatedDeltaNet rec(o, 32);
  {
    torch::NoGradGuard ng;
    auto src = layer.named_parameters(), dst = rec.named_parameters();
    for (auto& p : src) dst[p.key()].copy_(p.value());
  }
  REQUIRE_TENSORS_CLOSE(rec.forward(x, pos, nullptr), whole, 1e-5);
}
}  // namespace gated_deltanet_layer_test
