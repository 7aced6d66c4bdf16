// Mixer plugins: the host finds, probes and builds them; the DeltaNet plugin's delta rule against
// hand-derived values (reference notes, mixers_and_schemes_v2.md §2), its chunked form against its
// recurrent one, decoding against the whole sequence, and its gradients against finite
// differences; a conformance loop that every registered mixer type passes, built-in and plugin
// (causality, decode == forward, finite gradients); a model of D and A layers read from YAML.

#include <torch/torch.h>

#include <catch2/catch.hpp>

#include <cmath>
#include <tuple>

#include "hybridlab/mixer_ops.h"
#include "layers_test_util.h"
#include "mixer_plugin_test_util.h"
#include "model/hybrid_model.h"
#include "model/layer_positions.h"
#include "model/model_options.h"

using namespace hybridlab;
using Catch::Matchers::Contains;

namespace mixer_plugins_test {
namespace {

using test::check_chunked_layer;
using test::copy_parameters;
using test::make_mixer;

// The delta rule without decay, one head: S0 [dk,dv] and (k, v, β) per step; returns S_T.
torch::Tensor delta_rule_state(const torch::Tensor& k, const torch::Tensor& v,
                               const torch::Tensor& beta, const torch::Tensor& h0, bool chunked) {
  const int64_t T = k.size(0), dk = k.size(1), dv = v.size(1);
  const torch::Tensor q = torch::zeros({1, 1, T, dk}, torch::kDouble);
  const torch::Tensor g = torch::zeros({1, 1, T}, torch::kDouble);
  const auto r =
      chunked ? chunk_gated_delta_rule(q, k.view({1, 1, T, dk}), v.view({1, 1, T, dv}), g,
                                       beta.view({1, 1, T}), 1.0, h0.view({1, 1, dk, dv}), 4)
              : recurrent_gated_delta_rule(q, k.view({1, 1, T, dk}), v.view({1, 1, T, dv}), g,
                                           beta.view({1, 1, T}), 1.0, h0.view({1, 1, dk, dv}));
  return r.state[0][0];
}

}  // namespace

TEST_CASE("mixer plugins: the host lists deltanet as a mixer with letter D", "[mixer][plugins]") {
  auto host = test::test_host();
  const auto mixers = test::discovered_mixers(*host);
  auto it =
      std::find_if(mixers.begin(), mixers.end(), [](auto& r) { return r.name == "deltanet"; });
  REQUIRE(it != mixers.end());
  CHECK(it->kind == kPluginKindMixer);
  CHECK(it->letter == 'D');
  CHECK_THAT(it->file, Contains("deltanet.so"));
  for (const auto& r : test::discovered_schemes(*host)) CHECK(r.kind == kPluginKindPosition);
}

TEST_CASE("mixer plugins: names of the wrong kind and unknown names are refused",
          "[mixer][plugins]") {
  auto host = test::test_host();
  auto message = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const PluginError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(message([&] { make_mixer(*host, "deltanett", "{}"); }),
             Contains("unknown mixer 'deltanett'") && Contains("did you mean 'deltanet'"));
  CHECK_THAT(message([&] { make_mixer(*host, "rope", "{}"); }),
             Contains("'rope' is a position plugin"));
  Config cfg = Config::parse("{}", "test.yaml");
  Section params = cfg.root();
  PositionContext pc;
  pc.d_model = 32;
  pc.n_heads = 2;
  pc.n_kv_heads = 2;
  pc.head_dim = 16;
  CHECK_THAT(message([&] { host->create("deltanet", params, pc); }),
             Contains("'deltanet' is a mixer plugin"));
}

TEST_CASE("mixer plugins: deltanet's settings are read strictly", "[mixer][plugins]") {
  auto host = test::test_host();
  auto config_error = [&](const std::string& yaml) {
    try {
      make_mixer(*host, "deltanet", yaml);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(config_error("{num_head: 2}"),
             Contains("unknown key 'num_head'") && Contains("did you mean 'num_heads'"));
  CHECK_THAT(config_error("{num_heads: 3}"),
             Contains("test.yaml:1") && Contains("must split into num_heads = 3"));
  CHECK_THAT(config_error("{mode: fast}"), Contains("mode") && Contains("'fast'"));
  CHECK_THAT(config_error("{chunk_size: 0}"), Contains("chunk_size"));
  // A huge value is one problem at its key (no overflowed width beside it).
  const std::string huge = config_error("{expand_k: 99999999999999999999}");
  CHECK_THAT(huge, Contains("expand_k: must be in (0, 16]"));
  CHECK_THAT(huge, !Contains("problems"));
}

TEST_CASE(
    "mixer plugins: mamba2's, kda's and gated_deltaproduct's bad settings are one located error "
    "each",
    "[mixer][plugins]") {
  auto host = test::test_host();
  auto config_error = [&](const std::string& name, const std::string& yaml) {
    try {
      make_mixer(*host, name, yaml);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {"mamba2", "{A_init_range: [1.0e+300, 1.0e+300]}", "A_init_range: must be [low, high]"},
      {"mamba2", "{dt_init_floor: 1.0e+300}", "dt_init_floor: must be in (0, dt_max]"},
      {"mamba2", "{headdim: 12}", "must be a multiple of headdim = 12"},
      {"mamba2", "{headdim: 16, ngroups: 3}", "ngroups: the 4 heads must split into ngroups = 3"},
      {"kda", "{expand_v: 4096}", "expand_v: must be in (0, 16]"},
      {"kda", "{head_dim: 100000}", "head_dim: must be in [0, 1024]"},
      {"kda", "{lower_bound: -1.0e+39}", "lower_bound: must be 0"},
      {"kda", "{num_heads: 4096}", "num_heads: must be in [1, 1024]"},
      {"gated_deltaproduct", "{num_householder: 0}", "num_householder: must be in [1, 16]"},
      {"gated_deltaproduct", "{num_householder: 100000}", "num_householder: must be in [1, 16]"},
      {"gated_deltaproduct", "{num_householder: two}", "num_householder"},
      {"gated_deltaproduct", "{num_v_heads: 6}", "num_v_heads: must be a multiple of num_heads"},
      {"gated_deltaproduct", "{allow_neg_eigval: 2}", "allow_neg_eigval"},
  };
  for (const auto& [name, yaml, want] : cases) {
    CAPTURE(name, yaml);
    const std::string e = config_error(name, yaml);
    CHECK_THAT(e, Contains("test.yaml:1") && Contains(want));
    CHECK_THAT(e, !Contains("problems") && !Contains("Exception raised"));
  }
}

TEST_CASE("mixer plugins: deltanet's summary counts its state and parameters", "[mixer]") {
  auto host = test::test_host();
  const auto m = make_mixer(*host, "deltanet", "{num_heads: 2}");
  const MixerInfo info = m->info(64);
  // 2 heads of 16 x 16 state, 3 taps of the q, k (32 each) and v (32) convolutions.
  CHECK(info.state_floats == 2 * 16 * 16 + 3 * (32 + 32 + 32));
  CHECK_FALSE(info.pairwise);
  CHECK(m->state_reset_window() == 64);
  int64_t n = 0;
  for (const auto& p : m->parameters()) n += p.numel();
  // q, k, v, o projections 32x32, β 32x2, three convs 32x4, the norm weight 16.
  CHECK(n == 4 * 32 * 32 + 32 * 2 + 3 * 32 * 4 + 16);
  const auto gated = make_mixer(*host, "deltanet", "{num_heads: 2, use_gate: true}");
  int64_t ng = 0;
  for (const auto& p : gated->parameters()) ng += p.numel();
  CHECK(ng == n + 32 * 32);
}

TEST_CASE("delta rule without decay: hand-derived states (recurrent and chunked)", "[mixer]") {
  const bool chunked = GENERATE(false, true);
  CAPTURE(chunked);
  auto opts = torch::kDouble;
  SECTION("orthonormal keys with beta 1 store each value; reading with k_i returns v_i") {
    const torch::Tensor k = torch::eye(3, opts);  // three orthonormal keys
    const torch::Tensor v = torch::tensor({1.0, 2.0, 3.0, -1.0, 0.5, 4.0}, opts).view({3, 2});
    const torch::Tensor S =
        delta_rule_state(k, v, torch::ones({3}, opts), torch::zeros({3, 2}, opts), chunked);
    for (int i = 0; i < 3; ++i) CHECK(test::max_abs_diff(S.t().matmul(k[i]), v[i]) < 1e-12);
  }
  SECTION("a unit key with beta 1 gives S^T k = v whatever the history") {
    torch::manual_seed(3);
    const torch::Tensor h0 = torch::randn({4, 3}, opts);
    const torch::Tensor k = torch::nn::functional::normalize(
        torch::randn({5, 4}, opts), torch::nn::functional::NormalizeFuncOptions().dim(1));
    const torch::Tensor v = torch::randn({5, 3}, opts);
    const torch::Tensor S = delta_rule_state(k, v, torch::ones({5}, opts), h0, chunked);
    CHECK(test::max_abs_diff(S.t().matmul(k[4]), v[4]) < 1e-12);
  }
  SECTION("writing one pair again and again with beta 0.5 stores 0.5, 0.75, 0.875 of v") {
    const torch::Tensor k = torch::tensor({1.0, 0.0}, opts).repeat({3, 1});
    const torch::Tensor v = torch::tensor({2.0}, opts).repeat({3, 1});
    const std::vector<double> expected = {0.5, 0.75, 0.875};
    for (int64_t t = 1; t <= 3; ++t) {
      const torch::Tensor S =
          delta_rule_state(k.slice(0, 0, t), v.slice(0, 0, t), torch::full({t}, 0.5, opts),
                           torch::zeros({2, 1}, opts), chunked);
      CHECK(S[0][0].item<double>() == Approx(2.0 * expected[t - 1]).margin(1e-12));
      CHECK(S[1][0].item<double>() == Approx(0.0).margin(1e-12));
    }
  }
  SECTION("beta 0 leaves the state as it was") {
    torch::manual_seed(4);
    const torch::Tensor h0 = torch::randn({4, 3}, opts);
    const torch::Tensor S = delta_rule_state(torch::randn({6, 4}, opts), torch::randn({6, 3}, opts),
                                             torch::zeros({6}, opts), h0, chunked);
    CHECK(test::max_abs_diff(S, h0) < 1e-12);
  }
}

TEST_CASE("deltanet: the chunked layer equals the recurrent one, FD gradients", "[mixer]") {
  auto host = test::test_host();
  const bool fused = GENERATE(true, false);
  const bool neg = GENERATE(false, true);
  CAPTURE(fused, neg);
  torch::manual_seed(5);
  check_chunked_layer(
      *host, "deltanet",
      std::string("num_heads: 2, chunk_size: 4, use_gate: true, allow_neg_eigval: ") +
          (neg ? "true" : "false"),
      8, 37, {"q_proj.weight", "k_conv", "o_norm_weight"}, fused);
}

TEST_CASE("mixer conformance: every registered type, causal, decode == forward, finite gradients",
          "[mixer]") {
  auto host = test::test_host();
  // The registry of the default search path: the built-in types and the shipped plugins.
  const MixerRegistry& registry = MixerRegistry::of(Config{});
  REQUIRE(registry.types().size() >= 6);  // attention, gated_deltanet and four plugins
  for (const MixerType* type : registry.types()) {
    CAPTURE(type->name, registry.origin(type->name));
    torch::manual_seed(7);
    Config cfg = Config::parse("{}", "test.yaml");
    Section params = cfg.root();
    LayerPositions positions(*host, ModelBuildContext(64, 64));
    MixerContext ctx;
    ctx.d_model = 32;
    ctx.train_length = ctx.max_length = 64;
    ctx.position = &positions;
    auto m = build_mixer(*type, params, ctx, *host);
    REQUIRE(cfg.errors().empty());
    m->to(torch::kDouble);
    const int64_t T = 21;
    const torch::Tensor x = torch::randn({2, T, 32}, torch::kDouble);
    const torch::Tensor pos = torch::arange(T);
    torch::Tensor whole;
    {
      torch::NoGradGuard no_grad;
      whole = m->forward(x, pos, nullptr);
      REQUIRE(whole.sizes() == x.sizes());
      // Causal: changing the last 5 tokens leaves the first 16 outputs as they were.
      torch::Tensor changed = x.clone();
      changed.slice(1, 16).normal_();
      CHECK(test::max_abs_diff(m->forward(changed, pos, nullptr).slice(1, 0, 16),
                               whole.slice(1, 0, 16)) < 1e-12);
      // A prefill of 11 tokens, then one token at a time, equals the whole sequence.
      auto cache = m->make_cache();
      std::vector<torch::Tensor> parts = {
          m->forward(x.slice(1, 0, 11), pos.slice(0, 0, 11), cache.get())};
      for (int64_t t = 11; t < T; ++t)
        parts.push_back(m->forward(x.slice(1, t, t + 1), pos.slice(0, t, t + 1), cache.get()));
      CHECK(test::max_abs_diff(torch::cat(parts, 1), whole) < 1e-10);
      CHECK(cache->nbytes() > 0);
      CHECK(m->recurrent_state(*cache).defined() == (m->info(T).state_floats > 0));
    }
    const torch::Tensor xg = x.clone().requires_grad_(true);
    m->forward(xg, pos, nullptr).pow(2).sum().backward();
    CHECK(torch::isfinite(xg.grad()).all().item<bool>());
    for (const auto& p : m->parameters()) CHECK(torch::isfinite(p.grad()).all().item<bool>());
  }
}

TEST_CASE("mixer plugins: a model of D and A layers from YAML builds and runs", "[mixer]") {
  Config cfg = Config::parse(
      "model: {d_model: 32, vocab_size: 16, layers: DDA, deltanet: {num_heads: 2},\n"
      "        overrides: {1: {use_gate: true}}, attention: {n_heads: 2}}\n"
      "plugins: {paths: ['" +
          std::string(HYBRIDLAB_TEST_PLUGIN_DIR) + "']}\n",
      "model.yaml");
  const auto opts = read_model_options(cfg.root().child("model"));
  cfg.raise_errors();
  REQUIRE(opts->layers_text == "DDA");
  CHECK(opts->layers[0].type->name == "deltanet");
  auto host = test::test_host();
  ModelBuildContext ctx;
  ctx.train_length = 16;
  ctx.max_length = 16;
  HybridModel model(*opts, *host, ctx);
  int64_t gate_params = 0;
  for (const auto& p : model.named_parameters())
    if (p.key().find("g_proj") != std::string::npos) gate_params += p.value().numel();
  CHECK(gate_params == 32 * 32);  // only layer 1 has the override's output gate
  const torch::Tensor logits = model.forward(torch::randint(16, {2, 16}));
  CHECK(logits.sizes() == torch::IntArrayRef({2, 16, 16}));
  CHECK(torch::isfinite(logits).all().item<bool>());
}

TEST_CASE("mixer plugins: an unknown letter lists the plugin mixers", "[mixer]") {
  Config cfg = Config::parse("model: {layers: DXA}\nplugins: {paths: ['" +
                                 std::string(HYBRIDLAB_TEST_PLUGIN_DIR) + "']}\n",
                             "model.yaml");
  read_model_options(cfg.root().child("model"));
  REQUIRE(cfg.errors().size() == 1);
  CHECK_THAT(cfg.errors()[0], Contains("model.yaml:1") && Contains("letter 'X'") &&
                                  Contains("D (deltanet, plugin)"));
}

}  // namespace mixer_plugins_test

namespace mixer_plugins_test {
TEST_CASE("mixer plugins: a plugin mixer takes its scheme from MixerContext::position",
          "[mixer][plugins][position]") {
  PluginHost host({std::string(HYBRIDLAB_BINARY_DIR) + "/test-fixtures/positioned_mixer",
                   HYBRIDLAB_TEST_PLUGIN_DIR});
  LayerPositions positions(host, ModelBuildContext(64, 64));
  MixerContext ctx;
  ctx.d_model = 32;
  ctx.train_length = ctx.max_length = 64;
  ctx.position = &positions;
  Config cfg = Config::parse("{position: {scheme: alibi}}", "m.yaml");
  Section params = cfg.root();
  const std::shared_ptr<Mixer> m = host.create_mixer("positioned", params, ctx);
  REQUIRE(m->position_scheme());
  CHECK(m->position_scheme()->name() == "alibi");
  CHECK(m->info(64).position == "alibi");
  CHECK(m->position_scheme()->hooks() == kHookLogitBias);
  // The scheme reads its keys where they stand: a table shorter than the model serves is refused
  // at its key.
  Config short_cfg =
      Config::parse("{position: {scheme: learned, max_position_embeddings: 16}}", "short.yaml");
  Section short_params = short_cfg.root();
  try {
    host.create_mixer("positioned", short_params, ctx);
    FAIL("expected a ConfigError");
  } catch (const ConfigError& e) {
    CHECK_THAT(e.what(), Contains("short.yaml:1") &&
                             Contains("position.max_position_embeddings: the table has 16 rows") &&
                             Contains("used at length 64"));
  }
}

TEST_CASE("mixer plugins: a forward of the wrong shape is refused naming the plugin",
          "[mixer][plugins]") {
  PluginHost host({std::string(HYBRIDLAB_BINARY_DIR) + "/test-fixtures/mixer_clash"});
  try {
    make_mixer(host, "clash", "{}");
    FAIL("expected a PluginError");
  } catch (const PluginError& e) {
    CHECK_THAT(e.what(), Contains("plugin 'clash'") && Contains("mixer_clash.so") &&
                             Contains("forward at [1, 8, 32] float returned") &&
                             Contains("expected a float tensor [1, 8, 32]"));
  }
}
}  // namespace mixer_plugins_test

namespace mixer_plugins_test {
namespace {
// The SSD scan of one head with P = N = 1 and B = C = 1: x and per-step Δ, A (reference notes,
// mixers v2 §1: v = Δ·x, a = Δ·A, q = C, k = B).
std::vector<double> ssd_scalar(const std::vector<double>& x, double delta, double A, double D,
                               bool chunked) {
  const int64_t T = static_cast<int64_t>(x.size());
  auto opts = torch::kDouble;
  const torch::Tensor xt = torch::tensor(x, opts).view({1, 1, T, 1});
  const torch::Tensor ones = torch::ones({1, 1, T, 1}, opts);
  const torch::Tensor a = torch::full({1, 1, T}, delta * A, opts);
  const auto r = chunked ? chunk_ssd(ones, ones, xt * delta, a, {}, 2)
                         : recurrent_ssd(ones, ones, xt * delta, a);
  const torch::Tensor y = r.o + D * xt;
  return std::vector<double>(y.data_ptr<double>(), y.data_ptr<double>() + T);
}
}  // namespace

TEST_CASE("SSD scan: hand-derived values (recurrent and chunked)", "[mixer][mamba2]") {
  const bool chunked = GENERATE(false, true);
  CAPTURE(chunked);
  // A = 0, Δ = 1, D = 0: the cumulative sum of linear attention.
  auto y = ssd_scalar({1, 2, 3}, 1.0, 0.0, 0.0, chunked);
  CHECK(y == std::vector<double>{1, 3, 6});
  // exp(ΔA) = 0.5: 1, 0.5 + 2, 1.25 + 3.
  y = ssd_scalar({1, 2, 3}, 1.0, std::log(0.5), 0.0, chunked);
  CHECK(y[0] == Approx(1.0).margin(1e-12));
  CHECK(y[1] == Approx(2.5).margin(1e-12));
  CHECK(y[2] == Approx(4.25).margin(1e-12));
  // Δ = 0.5, A = −1, D = 1: h = 0.5, then e^{−0.5}·0.5 + 1.
  y = ssd_scalar({1, 2}, 0.5, -1.0, 1.0, chunked);
  CHECK(y[0] == Approx(1.5).margin(1e-12));
  CHECK(y[1] == Approx(3.3032653).margin(1e-7));
}

TEST_CASE("SSD scan: chunked == recurrent with groups, a partial chunk and h0 (fp64 1e-10)",
          "[mixer][mamba2]") {
  torch::manual_seed(8);
  auto opts = torch::kDouble;
  const int64_t B = 2, G = 2, H = 4, T = 10, N = 3, P = 5;
  const torch::Tensor q = torch::randn({B, G, T, N}, opts), k = torch::randn({B, G, T, N}, opts);
  const torch::Tensor v = torch::randn({B, H, T, P}, opts);
  const torch::Tensor a = -torch::rand({B, H, T}, opts) * 2;
  const torch::Tensor h0 = torch::randn({B, H, N, P}, opts);
  const auto ref = recurrent_ssd(q, k, v, a, h0);
  for (int64_t chunk : {1, 4, 10, 16}) {
    CAPTURE(chunk);
    const auto got = chunk_ssd(q, k, v, a, h0, chunk);
    CHECK(test::max_abs_diff(got.o, ref.o) < 1e-10);
    CHECK(test::max_abs_diff(got.state, ref.state) < 1e-10);
  }
  // Head 3 reads group 1 (heads 2 and 3 share it): the same as a scan of that group alone.
  const auto one = recurrent_ssd(q.slice(1, 1, 2), k.slice(1, 1, 2), v.slice(1, 3, 4),
                                 a.slice(1, 3, 4), h0.slice(1, 3, 4));
  CHECK(test::max_abs_diff(one.o, ref.o.slice(1, 3, 4)) < 1e-12);
}

TEST_CASE("mamba2: initialisation as the reference module", "[mixer][mamba2]") {
  auto host = test::test_host();
  torch::manual_seed(9);
  const auto m = make_mixer(*host, "mamba2", "{d_state: 8, headdim: 4}", 32);
  auto p = m->named_parameters();
  const torch::Tensor dt = torch::softplus(p["dt_bias"]);  // H = 64 / 4 = 16 heads
  REQUIRE(dt.numel() == 16);
  CHECK(dt.min().item<double>() >= 1e-3 * (1 - 1e-5));
  CHECK(dt.max().item<double>() <= 0.1 * (1 + 1e-5));
  const torch::Tensor A = p["A_log"].exp();
  CHECK(A.min().item<double>() >= 1.0 - 1e-5);
  CHECK(A.max().item<double>() <= 16.0 + 1e-4);
  CHECK(test::max_abs_diff(p["D"], torch::ones({16})) == 0);
  // in_proj: z and x (64 each), B and C (8 each), dt (16).
  CHECK(p["in_proj.weight"].sizes() == torch::IntArrayRef({64 + 64 + 16 + 16, 32}));
  CHECK(m->info(64).state_floats == 16 * 8 * 4 + 3 * (64 + 16));
}

TEST_CASE("mamba2: the chunked layer equals the recurrent one, FD gradients", "[mixer][mamba2]") {
  auto host = test::test_host();
  torch::manual_seed(10);
  check_chunked_layer(*host, "mamba2", "d_state: 4, headdim: 8, ngroups: 2, chunk_size: 8", 16, 21,
                      {"A_log", "dt_bias", "conv_bias", "D"});
}
}  // namespace mixer_plugins_test

namespace mixer_plugins_test {
TEST_CASE("KDA rule: per-channel decay, hand-derived and against Gated DeltaNet's rule",
          "[mixer][kda]") {
  auto opts = torch::kDouble;
  SECTION("beta 0, alpha (0.5, 1), S0 = [[1],[1]], q = (1, 1): o = 1.5 s") {
    const torch::Tensor q = torch::ones({1, 1, 1, 2}, opts), k = torch::randn({1, 1, 1, 2}, opts);
    const torch::Tensor g = torch::tensor({std::log(0.5), 0.0}, opts).view({1, 1, 1, 2});
    const torch::Tensor h0 = torch::ones({1, 1, 2, 1}, opts);
    const double s = 0.7;
    for (bool chunked : {false, true}) {
      const torch::Tensor v = torch::randn({1, 1, 1, 1}, opts),
                          beta = torch::zeros({1, 1, 1}, opts);
      const auto r =
          chunked ? chunk_kda(q, k, v, g, beta, s, h0, 4) : recurrent_kda(q, k, v, g, beta, s, h0);
      CHECK(r.o.item<double>() == Approx(1.5 * s).margin(1e-12));
    }
  }
  SECTION("alpha equal across channels is Gated DeltaNet's rule; chunked == recurrent") {
    torch::manual_seed(11);
    const int64_t B = 2, H = 3, T = 11, K = 4, V = 5;
    const torch::Tensor q = torch::randn({B, H, T, K}, opts);
    const torch::Tensor k = torch::nn::functional::normalize(
        torch::randn({B, H, T, K}, opts), torch::nn::functional::NormalizeFuncOptions().dim(-1));
    const torch::Tensor v = torch::randn({B, H, T, V}, opts);
    const torch::Tensor beta = torch::rand({B, H, T}, opts);
    const torch::Tensor h0 = torch::randn({B, H, K, V}, opts);
    const torch::Tensor g_head = -torch::rand({B, H, T}, opts);
    const auto gdn = recurrent_gated_delta_rule(q, k, v, g_head, beta, 0.5, h0);
    const auto kda =
        recurrent_kda(q, k, v, g_head.unsqueeze(-1).expand({B, H, T, K}), beta, 0.5, h0);
    CHECK(test::max_abs_diff(kda.o, gdn.o) < 1e-12);
    CHECK(test::max_abs_diff(kda.state, gdn.state) < 1e-12);
    // Per-channel decay, some of it strong (e^{-30} per token), a partial last chunk, h0.
    const torch::Tensor g = -torch::rand({B, H, T, K}, opts) * 3 -
                            (torch::rand({B, H, T, K}, opts) > 0.9).to(opts) * 27;
    const auto ref = recurrent_kda(q, k, v, g, beta, 0.5, h0);
    for (int64_t chunk : {1, 4, 11, 16}) {
      CAPTURE(chunk);
      const auto got = chunk_kda(q, k, v, g, beta, 0.5, h0, chunk);
      CHECK(test::max_abs_diff(got.o, ref.o) < 1e-10);
      CHECK(test::max_abs_diff(got.state, ref.state) < 1e-10);
    }
  }
}

TEST_CASE("kda: the gate's hand-derived values, through the gate observer", "[mixer][kda]") {
  auto host = test::test_host();
  for (const bool bounded : {false, true}) {
    CAPTURE(bounded);
    const auto m = make_mixer(*host, "kda",
                              bounded ? "{num_heads: 2, lower_bound: -5}" : "{num_heads: 2}", 16);
    {
      torch::NoGradGuard no_grad;
      auto p = m->named_parameters();
      p["A_log"].zero_();
      p["f_up.weight"].zero_();  // f = 0
      p["dt_bias"].fill_(bounded ? 0.0 : -2.2521685);
    }
    torch::Tensor seen;
    MixerProbes probes;
    probes.gates = [&](const torch::Tensor& g, const torch::Tensor&) { seen = g; };
    m->set_probes(probes);
    torch::NoGradGuard no_grad;
    m->forward(torch::randn({1, 5, 16}), torch::arange(5), nullptr);
    REQUIRE(seen.defined());
    // Unbounded: −exp(0)·softplus(−2.2521685) = −0.1; bounded: −5·σ(0) = −2.5.
    const double want = bounded ? -2.5 : -0.1;
    CHECK(seen.min().item<double>() == Approx(want).margin(1e-6));
    CHECK(seen.max().item<double>() == Approx(want).margin(1e-6));
  }
}

TEST_CASE("kda: the chunked layer equals the recurrent one, FD gradients", "[mixer][kda]") {
  auto host = test::test_host();
  torch::manual_seed(12);
  check_chunked_layer(*host, "kda", "num_heads: 2, chunk_size: 4", 16, 19,
                      {"A_log", "dt_bias", "g_up.bias", "f_down.weight"});
}

TEST_CASE("kda: allow_neg_eigval doubles beta, chunked == recurrent, FD gradients",
          "[mixer][kda]") {
  auto host = test::test_host();
  torch::manual_seed(13);
  check_chunked_layer(*host, "kda", "num_heads: 2, chunk_size: 4, allow_neg_eigval: true", 16, 19,
                      {"A_log", "dt_bias", "b_proj.weight"});
  // The rule itself with β near 2 (eigenvalue 1 − β along k near −1): chunked == recurrent.
  const auto opts = torch::kDouble;
  const int64_t B = 1, H = 2, T = 13, K = 4, V = 3;
  const torch::Tensor q = torch::randn({B, H, T, K}, opts);
  const torch::Tensor k = torch::nn::functional::normalize(
      torch::randn({B, H, T, K}, opts), torch::nn::functional::NormalizeFuncOptions().dim(-1));
  const torch::Tensor v = torch::randn({B, H, T, V}, opts);
  const torch::Tensor beta = 1.9 + 0.1 * torch::rand({B, H, T}, opts);
  const torch::Tensor g = -torch::rand({B, H, T, K}, opts);
  const auto ref = recurrent_kda(q, k, v, g, beta, 0.5, {});
  const auto got = chunk_kda(q, k, v, g, beta, 0.5, {}, 4);
  CHECK(test::max_abs_diff(got.o, ref.o) < 1e-10);
  CHECK(test::max_abs_diff(got.state, ref.state) < 1e-10);
  // The layer's β, through the gate observer: twice the plain layer's with equal weights.
  const auto neg = make_mixer(*host, "kda", "{num_heads: 2, allow_neg_eigval: true}", 16);
  const auto plain = make_mixer(*host, "kda", "{num_heads: 2}", 16);
  {
    torch::NoGradGuard ng;
    auto src = neg->named_parameters(), dst = plain->named_parameters();
    for (auto& p : src) dst[p.key()].copy_(p.value());
  }
  torch::Tensor b_neg, b_plain;
  MixerProbes pn, pp;
  pn.gates = [&](const torch::Tensor&, const torch::Tensor& b) { b_neg = b; };
  pp.gates = [&](const torch::Tensor&, const torch::Tensor& b) { b_plain = b; };
  neg->set_probes(pn);
  plain->set_probes(pp);
  torch::NoGradGuard ng;
  const torch::Tensor x = torch::randn({1, 6, 16});
  neg->forward(x, torch::arange(6), nullptr);
  plain->forward(x, torch::arange(6), nullptr);
  CHECK(test::max_abs_diff(b_neg, 2 * b_plain) < 1e-12);
}
}  // namespace mixer_plugins_test
