// The layer graph: patterns, explicit lists and per-layer overrides land on the right layers,
// config errors name file:line:col and the key, the model decodes with a cache and is causal for
// every mixer and every discovered scheme, shared schemes are registered once, and the summary's
// figures match hand-computed values.

#include <torch/torch.h>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include "hybridlab/error.h"
#include "hybridlab/model.h"
#include "layers/attention.h"
#include "layers/gated_deltanet.h"
#include "layers_test_util.h"
#include "model/hybrid_model.h"
#include "model/model_options.h"

using namespace hybridlab;
using hybridlab::test::max_abs_diff;
using hybridlab::test::model_options_error;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace model_test {
namespace {

std::shared_ptr<ModelOptions> read_ok(const std::string& yaml) {
  Config cfg = Config::parse(yaml, "exp.yaml");
  auto opts = read_model_options(cfg.section("model"));
  cfg.raise_errors();
  return opts;
}

std::shared_ptr<HybridModel> build(const std::string& yaml, PluginHost& host,
                                   ModelBuildContext ctx = {64, 128}) {
  auto opts = read_ok(yaml);
  return std::dynamic_pointer_cast<HybridModel>(build_model(*opts, host, ctx));
}

}  // namespace

TEST_CASE("layer graph: pattern GGGA x 2 builds exactly the layers asked for", "[model]") {
  auto host = hybridlab::test::test_host();
  auto model = build(R"(model:
  d_model: 32
  vocab_size: 50
  layers: {pattern: "GGGA", repeat: 2}
  attention: {n_heads: 4, n_kv_heads: 2}
  gated_deltanet: {n_heads: 2, head_dim: 8}
)",
                     *host);
  REQUIRE(model->blocks().size() == 8);
  REQUIRE(model->options().layers_text == "GGGAGGGA");
  for (size_t i = 0; i < 8; ++i) {
    const bool is_attention = i % 4 == 3;
    CAPTURE(i);
    REQUIRE((dynamic_cast<Attention*>(model->blocks()[i]->mixer.get()) != nullptr) == is_attention);
    REQUIRE((dynamic_cast<GatedDeltaNet*>(model->blocks()[i]->mixer.get()) != nullptr) ==
            !is_attention);
  }
  const torch::Tensor logits = model->forward(torch::randint(0, 50, {2, 9}));
  REQUIRE(logits.sizes() == torch::IntArrayRef({2, 9, 50}));
}

TEST_CASE("layer graph: explicit list, string pattern and per-layer overrides by index",
          "[model]") {
  auto opts = read_ok(R"(model:
  d_model: 32
  layers: [A, gated_deltanet, G, attention, A]
  attention: {n_heads: 4, window: 64}
  gated_deltanet: {n_heads: 2, chunk_size: 32}
  overrides:
    0: {window: 8, position: {scheme: nope}}
    2: {chunk_size: 16}
    -1: {n_heads: 2, causal: false}
)");
  REQUIRE(opts->layers_text == "AGGAA");
  auto att = [&](size_t i) { return attention_options(opts->layers[i], *opts).layer; };
  auto gdn = [&](size_t i) { return gated_deltanet_options(opts->layers[i], *opts); };
  REQUIRE(att(0).window == 8);
  REQUIRE(att(0).n_heads == 4);
  REQUIRE(att(3).window == 64);
  REQUIRE(att(4).n_heads == 2);
  REQUIRE(att(4).window == 64);
  REQUIRE_FALSE(att(4).causal);
  REQUIRE(att(3).causal);
  REQUIRE(gdn(1).chunk_size == 32);
  REQUIRE(gdn(2).chunk_size == 16);
  REQUIRE(opts->layers[0].overridden);
  REQUIRE_FALSE(opts->layers[1].overridden);
  REQUIRE(read_ok("model: {layers: GAG}")->layers_text == "GAG");
}

TEST_CASE("layer graph: config errors name file:line:col and the key", "[model]") {
  std::string e = model_options_error("model:\n  layers: {pattern: \"GGXA\"}\n");
  CHECK_THAT(e, Catch::Contains("exp.yaml:2:") && Catch::Contains("model.layers.pattern") &&
                    Catch::Contains("'X'") && Catch::Contains("A (attention)"));
  e = model_options_error("model:\n  d_model: 30\n  layers: A\n  attention: {n_heads: 4}\n");
  CHECK_THAT(e, Catch::Contains("exp.yaml:4:") && Catch::Contains("model.attention.n_heads") &&
                    Catch::Contains("must divide d_model"));
  e = model_options_error("model:\n  layers: A\n  attention: {n_heads: 4, n_kv_heads: 3}\n");
  CHECK_THAT(
      e, Catch::Contains("model.attention.n_kv_heads") && Catch::Contains("must divide n_heads"));
  e = model_options_error("model:\n  layers: G\n  gated_deltanet: {chunk_size: 0}\n");
  CHECK_THAT(e, Catch::Contains("model.gated_deltanet.chunk_size") && Catch::Contains("> 0"));
  e = model_options_error("model:\n  layers: A\n  attention: {window: -2}\n");
  CHECK_THAT(e, Catch::Contains("exp.yaml:3:") && Catch::Contains("model.attention.window"));
  e = model_options_error(
      "model:\n  layers: {pattern: GA, repeat: 2}\n  overrides:\n    4: {window: 3}\n");
  CHECK_THAT(e, Catch::Contains("exp.yaml:4:") && Catch::Contains("override index 4") &&
                    Catch::Contains("4 layers"));
  e = model_options_error("model:\n  layers: A\n  attention: {n_head: 4}\n");
  CHECK_THAT(e, Catch::Contains("n_head") && Catch::Contains("n_heads"));
  e = model_options_error("model:\n  layers: [A, Q]\n");
  CHECK_THAT(e, Catch::Contains("'Q' names no mixer"));
  e = model_options_error("model:\n  layers: G\n  gated_deltanet: {n_heads: 4, n_v_heads: 6}\n");
  CHECK_THAT(e, Catch::Contains("n_v_heads") && Catch::Contains("multiple of n_heads"));
}

TEST_CASE("model: prefill + token-by-token decoding == one forward, causal, for every scheme",
          "[model][plugins]") {
  auto host = hybridlab::test::test_host();
  for (const auto& record : hybridlab::test::discovered_schemes(*host)) {
    const std::string& name = record.name;
    const uint32_t hooks = record.hooks;
    CAPTURE(name, hook_names(hooks));
    const std::string where = (hooks & kHookEmbed) ? "  position: {scheme: " + name + "}\n" : "";
    const std::string att_pos = (hooks & kHookEmbed) ? "nope" : name;
    torch::manual_seed(20);
    auto model = build("model:\n  d_model: 32\n  vocab_size: 40\n  layers: GAGA\n" + where +
                           "  attention: {n_heads: 4, n_kv_heads: 2, block_size: 8, position: "
                           "{scheme: " +
                           att_pos +
                           "}}\n  gated_deltanet: {n_heads: 2, head_dim: 8, "
                           "chunk_size: 8}\n",
                       *host);
    const torch::Tensor tokens = torch::randint(0, 40, {2, 26});
    const torch::Tensor whole = model->forward(tokens);
    auto cache = model->new_cache();
    std::vector<torch::Tensor> outs = {model->forward(tokens.narrow(1, 0, 11), *cache)};
    for (int64_t t = 11; t < 26; ++t)
      outs.push_back(model->forward(tokens.narrow(1, t, 1), *cache));
    REQUIRE(cache->length == 26);
    REQUIRE_TENSORS_CLOSE(torch::cat(outs, 1), whole, 1e-4);
    torch::Tensor changed_tokens = tokens.clone();
    changed_tokens.select(1, 17).add_(1).remainder_(40);
    const torch::Tensor changed = model->forward(changed_tokens);
    REQUIRE_TENSORS_CLOSE(changed.narrow(1, 0, 17), whole.narrow(1, 0, 17), 1e-5);
    REQUIRE(max_abs_diff(changed.select(1, 17), whole.select(1, 17)) > 1e-5);
  }
}

TEST_CASE("model: schemes shared across layers are built once and registered once",
          "[model][plugins]") {
  auto host = hybridlab::test::test_host();
  bool tested = false;
  for (const auto& record : hybridlab::test::discovered_schemes(*host)) {
    const std::string& name = record.name;
    if (record.hooks & kHookEmbed) continue;  // input schemes are not attention schemes
    auto model = build(
        "model:\n  d_model: 32\n  layers: AGA\n  attention: {position: {scheme: " + name + "}}\n",
        *host);
    auto* a0 = dynamic_cast<Attention*>(model->blocks()[0]->mixer.get());
    auto* a2 = dynamic_cast<Attention*>(model->blocks()[2]->mixer.get());
    std::set<const void*> unique;
    for (const auto& p : model->parameters()) unique.insert(p.unsafeGetTensorImpl());
    CAPTURE(name);
    REQUIRE(unique.size() == model->parameters().size());
    if (a0->scheme()->shared_across_layers()) {
      REQUIRE(a0->scheme() == a2->scheme());
      tested = true;
    } else {
      REQUIRE(a0->scheme() != a2->scheme());
    }
  }
  if (!tested)
    WARN("no discovered scheme is shared across layers (e.g. t5); sharing not exercised");
}

TEST_CASE("model summary: parameters, shares, state and FLOPs match hand-computed values",
          "[model]") {
  auto host = hybridlab::test::test_host();
  // d_model 16, vocab 10, MLP hidden 32; attention H=2 Dh=8 (no GQA); GDN Hk=2 dk=8 Hv=2 dv=16.
  auto model = build(R"(model:
  d_model: 16
  vocab_size: 10
  layers: GA
  mlp: {intermediate_size: 32}
  attention: {n_heads: 2}
  gated_deltanet: {n_heads: 2, expand_v: 2}
)",
                     *host);
  const ModelSummary s = model->summary(100);
  const int64_t D = 16, V = 10, F = 32;
  const int64_t mlp = 3 * D * F, norms = 2 * D;
  const int64_t attn = 4 * D * D;
  const int64_t kw = 16, vw = 32, Hv = 2;
  const int64_t gdn = 2 * D * kw + 2 * D * vw + 2 * D * Hv + vw * D + 4 * (2 * kw + vw) + 2 * Hv +
                      16;  // projections, convs, A_log/dt_bias, norm
  REQUIRE(s.layers.size() == 2);
  REQUIRE(s.layers[0].mixer_parameters == gdn);
  REQUIRE(s.layers[1].mixer_parameters == attn);
  REQUIRE(s.layers[0].parameters == gdn + mlp + norms);
  REQUIRE(s.total_parameters == V * D + gdn + attn + 2 * (mlp + norms) + D);
  REQUIRE(s.attention_share == Approx(0.5));
  REQUIRE(s.layers[1].position == "nope");
  REQUIRE(s.position_share == Approx(0.0));
  // GDN state: Hv·dk·dv + (conv 4 − 1)·(q, k, v channels).
  REQUIRE(s.recurrent_state_floats == 2 * 8 * 16 + 3 * (2 * kw + vw));
  REQUIRE(s.kv_floats_per_token == 2 * 2 * 8);
  // Attention FLOPs at L = 100: projections 2·4·D² + scores/values 4·H·Dh·(L+1)/2; MLP 6·D·F.
  const double attn_flops = 2.0 * 4 * D * D + 4.0 * 2 * 8 * 50.5 + 6.0 * D * F;
  REQUIRE(s.layers[1].flops_per_token == Approx(attn_flops));
  const double C = 64, dk = 8, dv = 16;
  const double gdn_flops = 2.0 * D * (2 * kw + 2 * vw + 2 * Hv) + 2.0 * vw * D +
                           2.0 * 4 * (2 * kw + vw) +
                           Hv * (6 * C * dk + 4 * C * dv + 6 * dk * dv + C * C / 3) + 6.0 * D * F;
  REQUIRE(s.layers[0].flops_per_token == Approx(gdn_flops));
  REQUIRE(s.flops_per_token == Approx(attn_flops + gdn_flops + 2.0 * D * V));
}

TEST_CASE("model summary: FoX's gate and the rotary schemes' work count in parameters and FLOPs",
          "[model][plugins]") {
  auto host = hybridlab::test::test_host();
  const int64_t D = 16, H = 2, Dh = 8;
  const double L = 100, keys = (L + 1) / 2;
  const double base = 2.0 * 4 * D * D + 4.0 * H * Dh * keys + 6.0 * D * 32;  // as above
  auto summary = [&](const std::string& position) {
    return build(
               "model:\n  d_model: 16\n  vocab_size: 10\n  layers: GA\n  mlp: "
               "{intermediate_size: 32}\n  attention: {n_heads: 2, position: " +
                   position + "}\n  gated_deltanet: {n_heads: 2, expand_v: 2}\n",
               *host)
        ->summary(int64_t(L))
        .layers[1];
  };
  // FoX: the gate's projection (H×D weights, H biases) is the layer's; per token 2·D·H for it,
  // 5·H for ln σ and the running sum, 2·H per key for the two terms (plugins/position/fox).
  const auto fox = summary("{scheme: fox}");
  REQUIRE(fox.mixer_parameters == 4 * D * D + H * D + H);
  // ... and its cache keeps one key term per key and head beside k and v.
  REQUIRE(fox.kv_floats_per_token == 2 * H * Dh + H);
  REQUIRE(fox.flops_per_token == Approx(base + 2.0 * D * H + 5.0 * H + 2.0 * H * keys));
  // The fixed gate: no parameters, no projection.
  const auto fixed = summary("{scheme: fox, gate: fixed}");
  REQUIRE(fixed.mixer_parameters == 4 * D * D);
  REQUIRE(fixed.flops_per_token == Approx(base + 5.0 * H + 2.0 * H * keys));
  // RoPE on half of each head: 3 FLOPs per rotated channel of q and k (2 + 2 heads × 4).
  REQUIRE(summary("{scheme: rope, partial_rotary_factor: 0.5}").flops_per_token ==
          Approx(base + 3.0 * (2 + 2) * 4));
  // ... on one of the two query heads (and its key head): 3 × (1 + 1) × 8.
  REQUIRE(summary("{scheme: rope, rotate_num_heads: 1}").flops_per_token ==
          Approx(base + 3.0 * (1 + 1) * 8));
  // NoPE adds nothing.
  REQUIRE(summary("{scheme: nope}").flops_per_token == Approx(base));
}

TEST_CASE("model summary: learned positional schemes count as the layer's parameters",
          "[model][plugins]") {
  auto host = hybridlab::test::test_host();
  // d_model 16, H = 2: attention projections 4·D², plus per layer KERPLE's r1, r2 (2·H) or
  // FIRE's c, L_mult (2), MLP 1 → 8 (8 + 8) and 8 → H without bias (8·H).
  const int64_t D = 16, H = 2, attn = 4 * D * D;
  const std::vector<std::pair<std::string, int64_t>> cases = {
      {"{scheme: kerple}", 2 * H}, {"{scheme: fire, mlp_width: 8}", 2 + 16 + 8 * H}};
  for (const auto& [position, extra] : cases) {
    CAPTURE(position);
    auto model = build(
        "model:\n  d_model: 16\n  vocab_size: 10\n  layers: AA\n  attention: "
        "{n_heads: 2, position: " +
            position + "}\n",
        *host);
    auto plain =
        build("model:\n  d_model: 16\n  vocab_size: 10\n  layers: AA\n  attention: {n_heads: 2}\n",
              *host);
    const ModelSummary s = model->summary(64), p = plain->summary(64);
    REQUIRE(s.layers[0].mixer_parameters == attn + extra);
    REQUIRE(s.layers[1].mixer_parameters == attn + extra);
    REQUIRE(s.total_parameters == p.total_parameters + 2 * extra);
    REQUIRE(s.shared_position_parameters == 0);
    REQUIRE(s.position_share == Approx(1.0));
  }
  // One FIRE shared by both layers: counted once, as the model's shared position parameters.
  auto shared = build(
      "model:\n  d_model: 16\n  vocab_size: 10\n  layers: AA\n  attention: {n_heads: 2, "
      "position: {scheme: fire, mlp_width: 8, shared_across_layers: true}}\n",
      *host);
  const ModelSummary s = shared->summary(64);
  REQUIRE(s.shared_position_parameters == 2 + 16 + 8 * H);
  REQUIRE(s.layers[0].mixer_parameters == attn);
  auto* a0 = dynamic_cast<Attention*>(shared->blocks()[0]->mixer.get());
  auto* a1 = dynamic_cast<Attention*>(shared->blocks()[1]->mixer.get());
  REQUIRE(a0->scheme() == a1->scheme());
}

TEST_CASE("model: iRoPE / no_rope_layers written as per-layer overrides", "[model][plugins]") {
  // HF Llama 4 / SmolLM3 no_rope_layers with interval 4: 0-based layers 3 and 7 are NoPE, the
  // others RoPE (mixers_and_schemes_v2.md §9). A YAML anchor keeps the list short.
  auto host = hybridlab::test::test_host();
  auto model = build(R"(model:
  d_model: 16
  vocab_size: 10
  layers: {pattern: A, repeat: 8}
  attention: {n_heads: 2, position: {scheme: rope, rope_theta: 500000}}
  overrides: {3: &nope {position: {scheme: nope}}, 7: *nope}
)",
                     *host);
  const ModelSummary s = model->summary(64);
  REQUIRE(s.layers.size() == 8);
  for (int64_t i = 0; i < 8; ++i) {
    CAPTURE(i);
    REQUIRE(s.layers[size_t(i)].position == ((i + 1) % 4 == 0 ? "nope" : "rope"));
  }
  REQUIRE(s.position_share == Approx(0.75));
  // The RoPE layers keep the base settings: θ_1 = 500000^(−2/8) = 0.0376 (head_dim 8), not the
  // default 10000^(−2/8) = 0.1 (an override once overwrote the base position map).
  for (int64_t i : {0, 6}) {
    CAPTURE(i);
    auto* a = dynamic_cast<Attention*>(model->blocks()[size_t(i)]->mixer.get());
    const auto tables = a->scheme()->inspect(4);
    REQUIRE(tables[0].name == "inv_freq");
    REQUIRE(tables[0].values[1][0].item<double>() == Approx(std::pow(500000.0, -0.25)));
  }
  // An override to a scheme with keys of its own.
  auto mixed = build(R"(model:
  d_model: 16
  vocab_size: 10
  layers: AA
  attention: {n_heads: 2, position: {scheme: rope, rope_theta: 500000}}
  overrides: {1: {position: {scheme: alibi, mode: symmetric}}}
)",
                     *host);
  REQUIRE(mixed->summary(64).layers[0].position == "rope");
  REQUIRE(mixed->summary(64).layers[1].position == "alibi");
  // Llama 4's NoPE layers also scale the queries with position (nope_temperature).
  auto llama4 = build(R"(model:
  d_model: 16
  vocab_size: 10
  layers: {pattern: A, repeat: 8}
  attention: {n_heads: 2, position: {scheme: rope, rope_theta: 500000}}
  overrides: {3: &nope {position: {scheme: nope_temperature}}, 7: *nope}
)",
                      *host);
  const ModelSummary l = llama4->summary(64);
  for (int64_t i = 0; i < 8; ++i) {
    CAPTURE(i);
    REQUIRE(l.layers[size_t(i)].position == ((i + 1) % 4 == 0 ? "nope_temperature" : "rope"));
  }
}

TEST_CASE("model summary CLI prints the layer table and totals", "[model][cli]") {
  const std::string dir = HYBRIDLAB_BINARY_DIR;
  const std::string yaml = dir + "/test_layers_summary.yaml";
  {
    std::ofstream f(yaml);
    f << "model:\n  d_model: 32\n  layers: {pattern: GGA, repeat: 2}\n"
         "  overrides:\n    5: {window: 16}\n"
         "task: {name: mqar, seq_len: 128, vocab_size: 64, num_kv_pairs: 4}\n";
  }
  const std::string cmd = std::string("HYBRIDLAB_PLUGIN_PATH=") + HYBRIDLAB_TEST_PLUGIN_DIR + " " +
                          HYBRIDLAB_CLI + " model summary " + yaml + " model.vocab_size=64 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p);
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int rc = pclose(p);
  INFO(out);
  REQUIRE(rc == 0);
  CHECK_THAT(out, Catch::Contains("gated_deltanet") && Catch::Contains("attention") &&
                      Catch::Contains("window=16") && Catch::Contains("33.3%") &&
                      Catch::Contains("128"));
  std::remove(yaml.c_str());
}

TEST_CASE("model: schemes in the wrong place and past their length are build-time errors",
          "[model][plugins]") {
  auto host = hybridlab::test::test_host();
  bool have_learned = false;
  for (const auto& r : hybridlab::test::discovered_schemes(*host)) {
    have_learned = have_learned || r.name == "learned";
  }
  if (have_learned) {
    // An input (embed) scheme on an attention layer.
    try {
      build("model:\n  layers: A\n  attention: {position: {scheme: learned}}\n", *host);
      FAIL("expected a ConfigError");
    } catch (const ConfigError& e) {
      CHECK_THAT(std::string(e.what()),
                 Catch::Contains("exp.yaml:3:") && Catch::Contains("model.position"));
    }
    // A learned table shorter than the eval length.
    try {
      build("model:\n  layers: A\n  position: {scheme: learned, max_position_embeddings: 64}\n",
            *host, {64, 256});
      FAIL("expected an error");
    } catch (const UserError& e) {
      CHECK_THAT(std::string(e.what()), Catch::Contains("64") && Catch::Contains("256"));
    }
    // Within its length it builds and embeds.
    auto ok = build("model:\n  d_model: 16\n  layers: A\n  position: {scheme: learned}\n", *host);
    REQUIRE(ok->summary(64).input_position == "learned");
  }
  {
    // An attention scheme as the model-level input scheme: refused at its key (RoPE finds no
    // head_dim there before the hook check is reached).
    try {
      build("model:\n  layers: A\n  position: {scheme: rope}\n", *host);
      FAIL("expected a ConfigError");
    } catch (const ConfigError& e) {
      CHECK_THAT(std::string(e.what()),
                 Catch::Contains("exp.yaml:3:") && Catch::Contains("model.position.scheme"));
    }
    // FoX needs an attention layer's input and heads: as the input scheme, refused at its key.
    try {
      build("model:\n  layers: A\n  position: {scheme: fox}\n", *host);
      FAIL("expected a ConfigError");
    } catch (const ConfigError& e) {
      CHECK_THAT(std::string(e.what()), Catch::Contains("exp.yaml:3:") &&
                                            Catch::Contains("model.position.scheme") &&
                                            Catch::Contains("model-level input scheme"));
    }
    // NoPE as the input scheme is no input scheme: the same parameters and outputs.
    torch::manual_seed(7);
    auto none = build("model:\n  d_model: 16\n  vocab_size: 32\n  layers: GA\n", *host);
    torch::manual_seed(7);
    auto nope =
        build("model:\n  d_model: 16\n  vocab_size: 32\n  layers: GA\n  position: {scheme: nope}\n",
              *host);
    REQUIRE(nope->summary(64).input_position.empty());
    REQUIRE(nope->parameters().size() == none->parameters().size());
    const torch::Tensor tokens = torch::randint(0, 32, {2, 24}, torch::kLong);
    REQUIRE(torch::equal(nope->forward(tokens), none->forward(tokens)));
  }
  if (!have_learned) WARN("learned plugin missing: embed placement and length checks skipped");
}

TEST_CASE("model: PaTH refuses a rotating scheme at its key and builds PaTH-FoX",
          "[model][plugins][path]") {
  auto host = hybridlab::test::test_host();
  try {
    build(
        "model:\n  d_model: 16\n  layers: A\n  attention:\n    path: true\n"
        "    position: {scheme: rope}\n",
        *host);
    FAIL("expected a ConfigError");
  } catch (const ConfigError& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("exp.yaml:6:") &&
                                          Catch::Contains("model.attention.position.scheme") &&
                                          Catch::Contains("PaTH"));
  }
  // FoX's forget gate adds to PaTH's scores: PaTH-FoX (Yang et al. 2025, §3.4).
  auto fox = build(
      "model:\n  d_model: 16\n  vocab_size: 32\n  layers: GA\n  attention:\n    path: true\n"
      "    position: {scheme: fox}\n",
      *host);
  const torch::Tensor tokens = torch::randint(0, 32, {2, 24}, torch::kLong);
  const torch::Tensor logits = fox->forward(tokens);
  CHECK(logits.sizes() == torch::IntArrayRef({2, 24, 32}));
  CHECK(torch::isfinite(logits).all().item<bool>());
  CHECK(fox->summary(64).layers.back().details.find("path") != std::string::npos);
}

TEST_CASE(
    "model ablation: none changes nothing bit for bit, a zeroed mixer == its block without "
    "the mixer branch, bad requests are refused",
    "[model][ablation]") {
  auto host = hybridlab::test::test_host();
  torch::manual_seed(21);
  auto model = build(R"(model:
  d_model: 16
  vocab_size: 32
  layers: GA
  attention: {n_heads: 2, position: {scheme: rope}}
  gated_deltanet: {n_heads: 2, expand_v: 1, chunk_size: 8}
)",
                     *host);
  torch::NoGradGuard no_grad;
  const torch::Tensor tokens = torch::randint(0, 32, {2, 20}, torch::kLong);
  const torch::Tensor trained = model->forward(tokens);
  ModelAblation none;
  none.layers.assign(2, LayerAblation{});
  model->set_ablation(none);
  REQUIRE(torch::equal(model->forward(tokens), trained));

  // Layer 0's mixer zeroed, computed by hand from the model's own modules.
  ModelAblation off = none;
  off.layers[0].mixer_off = true;
  model->set_ablation(off);
  const torch::Tensor knocked = model->forward(tokens);
  const auto params = model->named_parameters(true);
  const torch::Tensor emb = params["embedding.weight"];
  const auto& b0 = *model->blocks()[0];
  const auto& b1 = *model->blocks()[1];
  torch::Tensor x = emb.index_select(0, tokens.flatten()).view({2, 20, 16});
  x = x + b0.mlp->forward(b0.mlp_norm->forward(x));
  const torch::Tensor pos = torch::arange(20);
  x = x + b1.mixer->forward(b1.mixer_norm->forward(x), pos, nullptr);
  x = x + b1.mlp->forward(b1.mlp_norm->forward(x));
  const auto final_norm = std::dynamic_pointer_cast<RMSNorm>(model->named_children()["final_norm"]);
  const torch::Tensor expect = torch::linear(final_norm->forward(x), emb);
  REQUIRE(torch::equal(knocked, expect));
  REQUIRE(max_abs_diff(knocked, trained) > 1e-4);
  model->set_ablation({});
  REQUIRE(torch::equal(model->forward(tokens), trained));

  ModelAblation bad = none;
  bad.layers[1].state_window = 4;  // layer 1 is attention
  CHECK_THROWS_WITH(model->set_ablation(bad), Catch::Contains("layer 1 has pairwise attention"));
  bad = none;
  bad.layers[0].attention.no_position = true;  // layer 0 is Gated DeltaNet
  CHECK_THROWS_WITH(model->set_ablation(bad), Catch::Contains("layer 0 is not an attention layer"));
  bad = none;
  bad.layers.pop_back();
  CHECK_THROWS_AS(model->set_ablation(bad), std::invalid_argument);
  bad = ModelAblation{};
  bad.no_input_position = true;
  CHECK_THROWS_WITH(model->set_ablation(bad), Catch::Contains("no input positional scheme"));
  REQUIRE(torch::equal(model->forward(tokens), trained));  // refused requests changed nothing
}

TEST_CASE("model ablation: a state window == the mixer run on each segment from an empty state",
          "[model][ablation]") {
  auto host = hybridlab::test::test_host();
  torch::manual_seed(22);
  auto model = build(R"(model:
  d_model: 16
  vocab_size: 32
  layers: G
  gated_deltanet: {n_heads: 2, expand_v: 1, chunk_size: 4}
)",
                     *host);
  torch::NoGradGuard no_grad;
  Block& block = *model->blocks()[0];
  const int64_t T = GENERATE(20, 24);  // 24 = three whole segments, 20 = a short last one
  CAPTURE(T);
  const torch::Tensor x = torch::randn({2, T, 16});
  const torch::Tensor pos = torch::arange(T);
  const torch::Tensor whole = block.forward(x, pos, nullptr);
  block.ablation.state_window = T;  // one segment: nothing removed
  REQUIRE(torch::equal(block.forward(x, pos, nullptr), whole));
  block.ablation.state_window = 8;
  const torch::Tensor reset = block.forward(x, pos, nullptr);
  std::vector<torch::Tensor> pieces;
  for (int64_t t0 = 0; t0 < T; t0 += 8) {
    const int64_t len = std::min<int64_t>(8, T - t0);
    const torch::Tensor xs = x.narrow(1, t0, len);
    pieces.push_back(
        block.mixer->forward(block.mixer_norm->forward(xs), pos.narrow(0, 0, len), nullptr));
  }
  torch::Tensor h = x + torch::cat(pieces, 1);
  h = h + block.mlp->forward(block.mlp_norm->forward(h));
  REQUIRE_TENSORS_CLOSE(reset, h, 1e-6);
  // The first segment is untouched; later ones lost what came before them.
  REQUIRE_TENSORS_CLOSE(reset.narrow(1, 0, 8), whole.narrow(1, 0, 8), 1e-6);
  REQUIRE(max_abs_diff(reset.narrow(1, 8, T - 8), whole.narrow(1, 8, T - 8)) > 1e-4);
  block.ablation = LayerAblation{};
}

TEST_CASE("model ablation: no input position == the same weights without an input scheme",
          "[model][ablation][plugins]") {
  auto host = hybridlab::test::test_host();
  bool have_sinusoidal = false;
  for (const auto& r : hybridlab::test::discovered_schemes(*host))
    have_sinusoidal = have_sinusoidal || r.name == "sinusoidal";
  REQUIRE(have_sinusoidal);
  torch::manual_seed(23);
  auto with = build(
      "model:\n  d_model: 16\n  vocab_size: 32\n  layers: GA\n  position: {scheme: "
      "sinusoidal}\n",
      *host);
  torch::manual_seed(23);
  auto without = build("model:\n  d_model: 16\n  vocab_size: 32\n  layers: GA\n", *host);
  torch::NoGradGuard no_grad;
  const torch::Tensor tokens = torch::randint(0, 32, {2, 12}, torch::kLong);
  const torch::Tensor trained = with->forward(tokens);
  REQUIRE(max_abs_diff(trained, without->forward(tokens)) > 1e-4);
  ModelAblation a;
  a.no_input_position = true;
  with->set_ablation(a);
  REQUIRE(torch::equal(with->forward(tokens), without->forward(tokens)));
}

TEST_CASE("model in training: fused_kernels true == false, logits and every parameter gradient",
          "[model]") {
  auto host = hybridlab::test::test_host();
  const std::string layers =
      "  d_model: 24\n  vocab_size: 32\n  layers: GA\n  mlp: {intermediate_size: 40}\n"
      "  attention: {n_heads: 2}\n";
  torch::manual_seed(31);
  auto fused = build("model:\n" + layers, *host);
  torch::manual_seed(31);
  auto reference = build("model:\n  fused_kernels: false\n" + layers, *host);  // one key for all
  const torch::Tensor tokens = torch::randint(0, 32, {2, 70}, torch::kLong);   // a short chunk
  const torch::Tensor lf = fused->forward(tokens), lr = reference->forward(tokens);
  CHECK(max_abs_diff(lf, lr) < 1e-5);
  lf.pow(2).mean().backward();
  lr.pow(2).mean().backward();
  const auto pf = fused->named_parameters(), pr = reference->named_parameters();
  REQUIRE(pf.size() == pr.size());
  for (const auto& item : pf) {
    CAPTURE(item.key());
    const torch::Tensor& gf = item.value().grad();
    const torch::Tensor& gr = pr[item.key()].grad();
    REQUIRE(gf.defined() == gr.defined());
    if (gf.defined()) CHECK(max_abs_diff(gf, gr) < 1e-5 * (1 + gr.abs().max().item<double>()));
  }
}

TEST_CASE("model: the layers as the analysis asks for them, through LanguageModel", "[model]") {
  auto host = hybridlab::test::test_host();
  torch::manual_seed(3);
  auto hybrid = build(
      "model:\n  d_model: 16\n  vocab_size: 32\n  layers: GA\n  mlp: {intermediate_size: 24}\n"
      "  position: {scheme: sinusoidal}\n  attention: {n_heads: 2}\n",
      *host);
  LanguageModel& model = *hybrid;
  REQUIRE(model.num_layers() == 2);
  CHECK(model.layer_mixer_name(0) == "gated_deltanet");
  CHECK(model.layer_mixer_name(1) == "attention");
  CHECK(&model.layer_mixer(1) == hybrid->blocks()[1]->mixer.get());
  CHECK(model.input_scheme() == "sinusoidal");
  CHECK_THROWS_AS(model.layer_mixer(2), std::out_of_range);
  CHECK_THROWS_WITH(model.layer_mixer_name(-1), Catch::Contains("no layer -1 (the model has 2"));
  // A decoding cache's layer entries, and the recurrent state the Gated DeltaNet layer holds.
  auto cache = model.new_cache();
  model.advance(torch::randint(0, 32, {1, 5}), *cache);
  CHECK(cache->length == 5);
  const MixerCache* gdn = model.layer_cache(*cache, 0);
  REQUIRE(gdn != nullptr);
  CHECK(model.layer_mixer(0).recurrent_state(*gdn).defined());
  CHECK(model.layer_cache(*cache, 2) == nullptr);
  // A model with no layers to name refuses every knock-out and names nothing.
  struct Plain : LanguageModel {
    torch::Tensor forward(const torch::Tensor& t) override { return t; }
    torch::Tensor forward(const torch::Tensor& t, DecodeCache&) override { return t; }
    torch::Tensor forward_packed(const torch::Tensor& t, const torch::Tensor&) override {
      return t;
    }
    std::unique_ptr<DecodeCache> new_cache() const override { return nullptr; }
    ModelSummary summary(int64_t) const override { return {}; }
    int64_t vocab_size() const override { return 1; }
    int64_t d_model() const override { return 1; }
  } plain;
  CHECK(plain.num_layers() == 0);
  CHECK(plain.input_scheme().empty());
  CHECK_NOTHROW(plain.set_ablation({}));
  ModelAblation off;
  off.no_input_position = true;
  CHECK_THROWS_AS(plain.set_ablation(off), std::invalid_argument);
  CHECK_THROWS_AS(plain.layer_mixer(0), std::out_of_range);
}

}  // namespace model_test
