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
