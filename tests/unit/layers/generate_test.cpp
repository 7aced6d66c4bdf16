// Generation (hybridlab/generate.h): greedy decoding with the DecodeCache against an independent
// oracle (argmax of a full forward over the growing sequence), seeded sampling, top-k, and the
// refusals.

#include <torch/torch.h>

#include <catch2/catch.hpp>

#include <string>

#include "hybridlab/error.h"
#include "hybridlab/generate.h"
#include "hybridlab/model.h"
#include "layers_test_util.h"
#include "model/model_options.h"

using namespace hybridlab;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace generate_test {
namespace {

std::shared_ptr<LanguageModel> build(const std::string& yaml, PluginHost& host,
                                     ModelBuildContext ctx = {64, 128}) {
  Config cfg = Config::parse(yaml, "exp.yaml");
  auto opts = read_model_options(cfg.section("model"));
  cfg.raise_errors();
  return build_model(*opts, host, ctx);
}

// A small model of `layers` (A = attention with RoPE, G = Gated DeltaNet).
std::shared_ptr<LanguageModel> small_model(const std::string& layers, PluginHost& host) {
  torch::manual_seed(7);
  return build("model:\n  d_model: 32\n  vocab_size: 40\n  layers: " + layers +
                   "\n  attention: {n_heads: 4, n_kv_heads: 2, position: {scheme: rope}}\n"
                   "  gated_deltanet: {n_heads: 2, head_dim: 8, chunk_size: 8}\n",
               host);
}

// Greedy continuation by the definition: a full forward over the whole sequence so far, argmax
// of the last position, appended; no cache.
torch::Tensor greedy_by_full_forward(LanguageModel& model, torch::Tensor seq, int64_t n) {
  torch::NoGradGuard no_grad;
  model.eval();
  const int64_t T = seq.size(1);
  for (int64_t i = 0; i < n; ++i) {
    const torch::Tensor next = model.forward(seq).select(1, -1).argmax(-1, true);  // [B,1]
    seq = torch::cat({seq, next}, 1);
  }
  return seq.narrow(1, T, n);
}

}  // namespace

TEST_CASE("generate: greedy decoding with the cache equals argmax of full forwards",
          "[generate][model]") {
  auto host = hybridlab::test::test_host();
  for (const char* layers : {"AA", "GG", "GAGA"}) {
    CAPTURE(layers);
    auto model = small_model(layers, *host);
    const torch::Tensor prompt = torch::randint(0, 40, {3, 13});
    GenerateOptions o;
    o.max_new_tokens = 20;
    const Generation g = generate(*model, prompt, o);
    REQUIRE(g.tokens.size(0) == 3);
    REQUIRE(g.tokens.size(1) == 20);
    REQUIRE(g.prompt_tokens == 13);
    const torch::Tensor expected = greedy_by_full_forward(*model, prompt, 20);
    CHECK(torch::equal(g.tokens, expected));
    // Not a constant sequence: the check compares real decisions.
    CHECK(g.tokens.ne(g.tokens.flatten()[0]).any().item<bool>());
    CHECK(g.prefill_s > 0);
    CHECK(g.tokens_per_s() > 0);
    CHECK(g.decode_tokens_per_s() > 0);
  }
}

TEST_CASE("generate: sampling is fixed by the seed, top_k 1 is greedy", "[generate][model]") {
  auto host = hybridlab::test::test_host();
  auto model = small_model("GA", *host);
  const torch::Tensor prompt = torch::randint(0, 40, {2, 9});
  GenerateOptions o;
  o.max_new_tokens = 24;
  o.temperature = 2.0;  // flat enough that two seeds differ somewhere in 48 draws
  o.seed = 11;
  const torch::Tensor a = generate(*model, prompt, o).tokens;
  const torch::Tensor b = generate(*model, prompt, o).tokens;
  CHECK(torch::equal(a, b));
  o.seed = 12;
  const torch::Tensor c = generate(*model, prompt, o).tokens;
  CHECK_FALSE(torch::equal(a, c));

  GenerateOptions greedy;
  greedy.max_new_tokens = 24;
  const torch::Tensor g = generate(*model, prompt, greedy).tokens;
  CHECK_FALSE(torch::equal(a, g));  // sampling at temperature 2 is not greedy here
  o.top_k = 1;
  for (uint64_t seed : {1u, 2u, 3u}) {
    o.seed = seed;
    CHECK(torch::equal(generate(*model, prompt, o).tokens, g));
  }
  // top_k 3: every sampled token is among the 3 largest logits of its step.
  o.top_k = 3;
  o.seed = 5;
  const torch::Tensor k3 = generate(*model, prompt, o).tokens;
  torch::NoGradGuard no_grad;
  model->eval();
  const torch::Tensor logits =
      model->forward(torch::cat({prompt, k3}, 1)).narrow(1, 8, 24);  // [2,24,V]
  const torch::Tensor top3 = std::get<1>(logits.topk(3, -1));        // [2,24,3]
  CHECK(top3.eq(k3.unsqueeze(-1)).any(-1).all().item<bool>());
}

TEST_CASE("generate: refusals name the problem, the training flag is restored",
          "[generate][model]") {
  auto host = hybridlab::test::test_host();
  auto model = small_model("GA", *host);
  model->train();
  GenerateOptions o;
  o.max_new_tokens = 3;
  generate(*model, torch::randint(0, 40, {1, 4}), o);
  CHECK(model->is_training());
  CHECK_THROWS_WITH(generate(*model, torch::full({1, 2}, 40, torch::kLong), o),
                    Catch::Contains("token id 40") && Catch::Contains("[0, 40)"));
  CHECK_THROWS_WITH(generate(*model, torch::zeros({1, 0}, torch::kLong), o),
                    Catch::Contains("at least one token"));
  o.temperature = -1;
  CHECK_THROWS_WITH(generate(*model, torch::zeros({1, 2}, torch::kLong), o),
                    Catch::Contains("temperature"));
  o.temperature = 0;
  o.max_new_tokens = 0;
  CHECK_THROWS_WITH(generate(*model, torch::zeros({1, 2}, torch::kLong), o),
                    Catch::Contains("max_new_tokens"));
  CHECK(max_positions(*model) == 0);  // RoPE and Gated DeltaNet: no table to run past

  // A learned table of 16 rows: 10 prompt tokens + 6 fit, + 7 do not.
  auto learned = build(
      "model:\n  d_model: 16\n  vocab_size: 40\n  layers: A\n"
      "  position: {scheme: learned, max_position_embeddings: 16}\n",
      *host, {16, 16});
  std::string scheme;
  CHECK(max_positions(*learned, &scheme) == 16);
  CHECK(scheme == "learned");
  o.max_new_tokens = 6;
  CHECK(generate(*learned, torch::zeros({1, 10}, torch::kLong), o).tokens.size(1) == 6);
  o.max_new_tokens = 7;
  CHECK_THROWS_WITH(generate(*learned, torch::zeros({1, 10}, torch::kLong), o),
                    Catch::Contains("17 positions") && Catch::Contains("'learned'") &&
                        Catch::Contains("at most 16"));
}

TEST_CASE("decode cache: attention's K/V bytes grow with the context, Gated DeltaNet's do not",
          "[generate][model]") {
  auto host = hybridlab::test::test_host();
  torch::NoGradGuard no_grad;
  auto attention = small_model("AA", *host);
  auto kv = attention->new_cache();
  CHECK(kv->nbytes() == 0);
  attention->forward(torch::randint(0, 40, {1, 10}), *kv);
  // Per layer: K and V [B=1, 2 KV heads, 10 tokens, head_dim 8] float, positions [10] int64.
  CHECK(kv->nbytes() == 2 * (2 * 1 * 2 * 10 * 8 * 4 + 10 * 8));
  attention->forward(torch::randint(0, 40, {1, 10}), *kv);
  CHECK(kv->nbytes() == 2 * (2 * 1 * 2 * 20 * 8 * 4 + 20 * 8));

  auto recurrent = small_model("GG", *host);
  auto state = recurrent->new_cache();
  recurrent->forward(torch::randint(0, 40, {1, 10}), *state);
  const int64_t after_10 = state->nbytes();
  CHECK(after_10 > 0);
  recurrent->forward(torch::randint(0, 40, {1, 30}), *state);
  CHECK(state->nbytes() == after_10);
}

}  // namespace generate_test
