// The knock-out plan of a model: one entry per layer and kind, each ablating what it names.

#include <torch/torch.h>

#include <catch2/catch.hpp>

#include "analysis/knockouts.h"
#include "hybridlab/config.h"
#include "model/hybrid_model.h"
#include "model/model_options.h"
#include "support/tensor_match.h"

using namespace hybridlab;
using namespace hybridlab::analysis;

TEST_CASE("knock-out plan of a GGA model with RoPE and a sinusoidal input", "[analysis]") {
  Config cfg = Config::parse(R"(model:
  d_model: 16
  vocab_size: 32
  layers: GGA
  position: {scheme: sinusoidal}
  attention: {n_heads: 2, position: {scheme: rope}}
  gated_deltanet: {n_heads: 2, expand_v: 1, chunk_size: 8}
)",
                             "exp.yaml");
  auto opts = read_model_options(cfg.section("model"));
  cfg.raise_errors();
  PluginHost host(hybridlab::test::test_plugin_dirs());
  host.discover();
  auto model = std::dynamic_pointer_cast<HybridModel>(build_model(*opts, host, {64, 256}));
  const auto plan = plan_knockouts(*model, {}, 0, {16, 64});
  std::vector<std::string> names;
  for (const auto& k : plan)
    names.push_back(k.kind + ":" + std::to_string(k.layer) + ":" + std::to_string(k.setting));
  CHECK(names == std::vector<std::string>{"mixer:0:0", "mixer:1:0", "mixer:2:0", "state_reset:0:8",
                                          "state_reset:1:8", "position:2:0", "position:-1:0",
                                          "position:-2:0", "reach:2:16", "reach:2:64"});
  CHECK(plan[5].target == "layer 2 (attention, rope)");
  std::vector<std::string> mixers;
  for (const auto& k : plan) mixers.push_back(k.mixer);
  const std::string g = "gated_deltanet", a = "attention";
  CHECK(mixers == std::vector<std::string>{g, g, a, g, g, a, "", "", a, a});
  CHECK(plan[6].target == "input (sinusoidal)");
  // Each ablation touches exactly what it names.
  CHECK(plan[1].ablation.layers[1].mixer_off);
  CHECK_FALSE(plan[1].ablation.layers[0].mixer_off);
  CHECK(plan[4].ablation.layers[1].state_window == 8);
  CHECK(plan[5].ablation.layers[2].attention.no_position);
  CHECK_FALSE(plan[5].ablation.no_input_position);
  CHECK(plan[7].ablation.no_input_position);
  CHECK(plan[7].ablation.layers[2].attention.no_position);
  CHECK(plan[9].ablation.layers[2].attention.window == 64);
  // Each is accepted by the model.
  for (const auto& k : plan) model->set_ablation(k.ablation);
  // A kind subset and a state window.
  const auto only = plan_knockouts(*model, {"state_reset"}, 5, {});
  REQUIRE(only.size() == 2);
  CHECK(only[0].setting == 5);
  CHECK_THROWS_AS(plan_knockouts(*model, {"mixers"}, 0, {}), std::invalid_argument);
}

namespace {

std::shared_ptr<HybridModel> model_from(const std::string& yaml, PluginHost& host) {
  Config cfg = Config::parse(yaml, "exp.yaml");
  auto opts = read_model_options(cfg.section("model"));
  cfg.raise_errors();
  return std::dynamic_pointer_cast<HybridModel>(build_model(*opts, host, {32, 32}));
}

}  // namespace

TEST_CASE("knock-out plan of PaTH layers: their transforms are the position knocked out",
          "[analysis]") {
  PluginHost host(hybridlab::test::test_plugin_dirs());
  host.discover();
  const std::string head = R"(model:
  d_model: 16
  vocab_size: 32
  layers: AAG
  attention: {n_heads: 2, path: true, path_chunk_size: 4}
  gated_deltanet: {n_heads: 2, expand_v: 1, chunk_size: 8}
)";
  // Layer 0: PaTH with NoPE; layer 1: PaTH-FoX.
  auto model = model_from(head + "  overrides:\n    1: {position: {scheme: fox}}\n", host);
  const auto plan = plan_knockouts(*model, {"position"}, 0, {});
  REQUIRE(plan.size() == 3);
  CHECK(plan[0].target == "layer 0 (attention, path)");
  CHECK(plan[1].target == "layer 1 (attention, path+fox)");
  CHECK(plan[2].target == "all positions");
  CHECK(plan[0].ablation.layers[0].attention.no_position);
  CHECK_FALSE(plan[0].ablation.layers[1].attention.no_position);
  const ModelSummary s = model->summary(32);
  CHECK(s.layers[0].carries_position);
  CHECK_FALSE(s.layers[2].carries_position);
  CHECK(s.position_share == Approx(2.0 / 3.0));

  // Knocked out, a PaTH layer is the softmax attention of its own q, k and v: a model built
  // without `path` and given the same weights computes the same logits; untouched, it does not.
  auto plain = model_from(head, host);
  auto plain_nope = model_from(R"(model:
  d_model: 16
  vocab_size: 32
  layers: AAG
  attention: {n_heads: 2}
  gated_deltanet: {n_heads: 2, expand_v: 1, chunk_size: 8}
)",
                               host);
  torch::NoGradGuard no_grad;
  for (auto& p : plain_nope->named_parameters())
    p.value().copy_(plain->named_parameters()[p.key()]);
  const torch::Tensor tokens = torch::randint(0, 32, {2, 12}, torch::kLong);
  const torch::Tensor trained = plain->forward(tokens);
  const torch::Tensor reference = plain_nope->forward(tokens);
  CHECK(test::max_abs_diff(trained, reference) > 1e-3);
  plain->set_ablation(plan_knockouts(*plain, {"position"}, 0, {}).back().ablation);
  CHECK(test::max_abs_diff(plain->forward(tokens), reference) < 1e-5);
}
