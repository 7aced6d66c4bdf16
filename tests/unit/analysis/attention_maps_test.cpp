// The attention maps of `inspect attention`: each pairwise layer's weights on one sequence, and
// with its position knocked out the weights of the same layer without PaTH's transforms.

#include <torch/torch.h>

#include <catch2/catch.hpp>

#include "hybridlab/attention_maps.h"
#include "hybridlab/config.h"
#include "hybridlab/error.h"
#include "model/hybrid_model.h"
#include "model/model_options.h"
#include "support/tensor_match.h"

using namespace hybridlab;

namespace attention_maps_test {
namespace {

std::shared_ptr<HybridModel> build(const std::string& attention, PluginHost& host) {
  Config cfg = Config::parse(
      "model:\n  d_model: 16\n  vocab_size: 32\n  layers: AGA\n"
      "  attention: " +
          attention + "\n  gated_deltanet: {n_heads: 2, expand_v: 1, chunk_size: 8}\n",
      "exp.yaml");
  auto opts = read_model_options(cfg.section("model"));
  cfg.raise_errors();
  return std::dynamic_pointer_cast<HybridModel>(build_model(*opts, host, {32, 32}));
}

}  // namespace

TEST_CASE("mean key distance of hand-made weights", "[analysis]") {
  // Head 0: query 0 reads itself, query 1 halves between 0 and 1, query 2 reads key 0;
  // distances 0, 0.5, 2: mean 5/6. Head 1: every query reads itself: 0.
  torch::Tensor w = torch::zeros({2, 3, 3}, torch::kDouble);
  w[0][0][0] = 1;
  w[0][1][0] = 0.5;
  w[0][1][1] = 0.5;
  w[0][2][0] = 1;
  w[1] = torch::eye(3, torch::kDouble);
  const torch::Tensor d = mean_key_distance(w);
  CHECK(d[0].item<double>() == Approx(5.0 / 6.0));
  CHECK(d[1].item<double>() == 0.0);
  CHECK_THROWS(mean_key_distance(torch::zeros({3, 3})));
}

TEST_CASE("attention maps of a PaTH model: its weights, and plain softmax without its position",
          "[analysis]") {
  PluginHost host(hybridlab::test::test_plugin_dirs());
  host.discover();
  auto path = build("{n_heads: 2, path: true, path_chunk_size: 4}", host);
  auto plain = build("{n_heads: 2}", host);
  torch::NoGradGuard no_grad;
  for (auto& p : plain->named_parameters()) p.value().copy_(path->named_parameters()[p.key()]);
  const torch::Tensor tokens = torch::randint(0, 32, {1, 12}, torch::kLong);
  const torch::Tensor before = path->forward(tokens);

  const auto maps = attention_maps(*path, tokens);
  REQUIRE(maps.size() == 2);  // layers 0 and 2; the Gated DeltaNet layer has no weights
  CHECK(maps[0].layer == 0);
  CHECK(maps[1].layer == 2);
  CHECK(maps[1].target == "layer 2 (attention, path)");
  const torch::Tensor w = maps[0].weights;
  REQUIRE(w.sizes() == torch::IntArrayRef({2, 12, 12}));
  CHECK(test::max_abs_diff(w.sum(-1), torch::ones({2, 12})) < 1e-5);
  CHECK(w.triu(1).abs().max().item<double>() == 0.0);  // causal: no weight on later keys

  // Knocked out, PaTH's layer 0 is softmax attention of the same q and k: the plain model's
  // weights at layer 0 (the layers before it are the same).
  const auto reference = attention_maps(*plain, tokens, 0);
  REQUIRE(reference.size() == 1);
  CHECK_FALSE(reference[0].without_position.defined());  // NoPE softmax carries no position
  REQUIRE(maps[0].without_position.defined());
  CHECK(test::max_abs_diff(maps[0].without_position, reference[0].weights) < 1e-6);
  CHECK(test::max_abs_diff(maps[0].weights, reference[0].weights) > 1e-3);
  // The model is left as it was.
  CHECK(test::max_abs_diff(path->forward(tokens), before) == 0.0);

  CHECK_THROWS_AS(attention_maps(*path, tokens, 1), UserError);  // Gated DeltaNet
  CHECK_THROWS_AS(attention_maps(*path, tokens, 3), UserError);
  CHECK_THROWS_AS(attention_maps(*path, torch::zeros({2, 4}, torch::kLong)), std::invalid_argument);
}

}  // namespace attention_maps_test
