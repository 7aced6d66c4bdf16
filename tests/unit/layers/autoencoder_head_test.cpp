// model.head autoencoder (MAD's AutoEncoder with global_pool "last", mad/model/auto_encoder.py):
// the decoder positions against hand values of fairseq's formula, the whole model against an
// oracle written from the equations with plain tensor ops, every position reading the last token,
// and the refusals (token-by-token decoding, a bad head name).

#include <torch/torch.h>

#include <catch2/catch.hpp>

#include <cmath>

#include "hybridlab/error.h"
#include "layers_test_util.h"
#include "model/autoencoder_head.h"
#include "model/hybrid_model.h"
#include "model/model_options.h"

using namespace hybridlab;
using hybridlab::test::max_abs_diff;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace autoencoder_head_test {
namespace {

std::shared_ptr<HybridModel> build(const std::string& yaml, PluginHost& host) {
  Config cfg = Config::parse(yaml, "exp.yaml");
  auto opts = read_model_options(cfg.section("model"));
  cfg.raise_errors();
  return std::dynamic_pointer_cast<HybridModel>(build_model(*opts, host, {16, 32}));
}

// RMSNorm, Linear and exact GELU written out (x / sqrt(mean x² + eps) · w; x Wᵀ + b;
// x Φ(x) = x (1 + erf(x/√2)) / 2).
torch::Tensor rms(const torch::Tensor& x, const torch::Tensor& w, double eps) {
  return x / torch::sqrt(x.pow(2).mean(-1, true) + eps) * w;
}
torch::Tensor affine(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
  return torch::matmul(x, w.t()) + b;
}
torch::Tensor gelu_erf(const torch::Tensor& x) {
  return 0.5 * x * (1 + torch::erf(x / std::sqrt(2.0)));
}

const char* const kModel = R"(model:
  d_model: 8
  vocab_size: 11
  head: autoencoder
  layers: GA
  attention: {n_heads: 2}
  gated_deltanet: {n_heads: 2, head_dim: 4, chunk_size: 4}
)";

}  // namespace

TEST_CASE("sincos_positions: fairseq's table, sines then cosines, odd widths zero-padded",
          "[model][autoencoder]") {
  // dim 8: half 4, w_i = 10000^(-i/3) = 1, 0.04641589, 0.00215443, 0.0001.
  const torch::Tensor t = sincos_positions(torch::tensor({0, 2, 7}), 8);
  REQUIRE(t.sizes() == torch::IntArrayRef({3, 8}));
  const double w[] = {1.0, 0.046415888336127795, 0.0021544346900318843, 1e-4};
  for (int64_t r = 0; r < 3; ++r) {
    const double p = std::vector<double>{0, 2, 7}[r];
    for (int64_t i = 0; i < 4; ++i) {
      CAPTURE(r, i);
      CHECK(t[r][i].item<double>() == Approx(std::sin(p * w[i])).margin(1e-6));
      CHECK(t[r][4 + i].item<double>() == Approx(std::cos(p * w[i])).margin(1e-6));
    }
  }
  CHECK(t[1][0].item<double>() == Approx(0.9092974).margin(1e-6));   // sin 2
  CHECK(t[1][4].item<double>() == Approx(-0.4161468).margin(1e-6));  // cos 2
  const torch::Tensor odd = sincos_positions(torch::tensor({3}), 9);
  REQUIRE(odd.sizes() == torch::IntArrayRef({1, 9}));
  CHECK(odd[0][8].item<double>() == 0.0);
  CHECK(odd[0][0].item<double>() == Approx(std::sin(3.0)).margin(1e-6));
  CHECK_THROWS_AS(sincos_positions(torch::tensor({0}), 3), std::invalid_argument);
}

TEST_CASE("model.head autoencoder == the decoder written out, every position reads the last token",
          "[model][autoencoder]") {
  auto host = hybridlab::test::test_host();
  torch::manual_seed(5);
  auto model = build(kModel, *host);
  torch::NoGradGuard no_grad;
  // Random head parameters, so that the zero biases and unit norm weights of the init do not
  // hide a term the forward drops.
  for (auto& p : model->named_parameters()) p.value().normal_(0.0, 0.5);
  const torch::Tensor tokens = torch::randint(0, 11, {3, 6});
  const torch::Tensor logits = model->forward(tokens);
  REQUIRE(logits.sizes() == torch::IntArrayRef({3, 6, 11}));

  // Oracle: embedding, the two blocks, the last position, then MAD's decoder.
  const auto p = model->named_parameters();
  const torch::Tensor positions = torch::arange(6);
  torch::Tensor x = torch::embedding(p["embedding.weight"], tokens);
  for (const auto& block : model->blocks()) x = block->forward(x, positions, nullptr);
  const torch::Tensor e = x.select(1, 5).unsqueeze(1);
  torch::Tensor z = e + sincos_positions(positions, 8);
  const std::string h = "autoencoder_head.";
  z = gelu_erf(affine(rms(z, p[h + "norm1.weight"], 1e-5), p[h + "fc1.weight"], p[h + "fc1.bias"]));
  z = gelu_erf(affine(rms(z, p[h + "norm2.weight"], 1e-5), p[h + "fc2.weight"], p[h + "fc2.bias"]));
  const torch::Tensor want = affine(rms(z, p[h + "unembed_norm.weight"], 1e-5),
                                    p[h + "unembed.weight"], p[h + "unembed.bias"]);
  REQUIRE(max_abs_diff(logits, want) < 1e-4);
  REQUIRE(p.find("final_norm.weight") == nullptr);  // no final norm: MAD pools the raw stream

  // Not causal: the first position's logits change with the last token only.
  torch::Tensor other = tokens.clone();
  other.select(1, 5).fill_(0);
  other[0][5] = 1;
  other[1][5] = 2;
  other[2][5] = 3;
  const torch::Tensor moved = model->forward(other);
  for (int64_t b = 0; b < 3; ++b) {
    if (tokens[b][5].item<int64_t>() == other[b][5].item<int64_t>()) continue;
    CHECK(max_abs_diff(moved[b].select(0, 0), logits[b].select(0, 0)) > 1e-4);
  }
  // Decoding token by token is refused, naming the head.
  auto cache = model->new_cache();
  REQUIRE_THROWS_WITH(model->forward(tokens, *cache), Catch::Contains("model.head is autoencoder"));
  // The summary counts the decoder's work per position, 2 (2 D² + D V), where a causal LM's head
  // costs 2 D V: 4 D² = 256 more.
  std::string causal = kModel;
  causal.replace(causal.find("autoencoder"), 11, "causal_lm");
  const auto lm = build(causal, *host);
  CHECK(model->summary(6).flops_per_token - lm->summary(6).flops_per_token == Approx(256.0));
  // The decoder is the head: untied, its parameters beside the embedding's 11 × 8:
  // norms 3 × 8, fc1 and fc2 8 × 8 + 8 each, unembed 8 × 11 + 11.
  CHECK_FALSE(model->summary(6).tied_embeddings);
  CHECK(model->summary(6).embedding_parameters == 88 + 24 + 72 + 72 + 99);
  CHECK(lm->summary(6).embedding_parameters == 88);
}

TEST_CASE("advance fills the layers' caches as decoding does, without the head",
          "[model][autoencoder]") {
  auto host = hybridlab::test::test_host();
  torch::manual_seed(6);
  std::string causal = kModel;
  causal.replace(causal.find("autoencoder"), 11, "causal_lm");
  torch::NoGradGuard no_grad;
  const torch::Tensor tokens = torch::randint(0, 11, {2, 7});
  // A causal model: the prefix through advance, then one decoded token, gives the full
  // forward's last logits.
  auto lm = build(causal, *host);
  auto cache = lm->new_cache();
  lm->advance(tokens.narrow(1, 0, 4), *cache);
  lm->advance(tokens.narrow(1, 4, 2), *cache);
  REQUIRE(cache->length == 6);
  const torch::Tensor last = lm->forward(tokens.narrow(1, 6, 1), *cache).select(1, 0);
  REQUIRE(max_abs_diff(last, lm->forward(tokens).select(1, 6)) < 1e-5);
  // The autoencoder's recurrent state after the pieces equals the state after one call.
  auto ae = build(kModel, *host);
  auto pieces = ae->new_cache(), whole = ae->new_cache();
  ae->advance(tokens.narrow(1, 0, 3), *pieces);
  ae->advance(tokens.narrow(1, 3, 4), *pieces);
  ae->advance(tokens, *whole);
  const auto& mixer = *ae->blocks()[0]->mixer;
  const torch::Tensor a = mixer.recurrent_state(*HybridModel::layer_cache(*pieces, 0));
  const torch::Tensor b = mixer.recurrent_state(*HybridModel::layer_cache(*whole, 0));
  REQUIRE(a.defined());
  REQUIRE(max_abs_diff(a, b) < 1e-5);
  REQUIRE(a.abs().max().item<double>() > 1e-3);
}

TEST_CASE("model.head: a name it does not know and a width too small are errors at the key",
          "[model][autoencoder]") {
  const std::string bad =
      hybridlab::test::model_options_error("model: {d_model: 8, layers: A, head: autoencode}\n");
  CHECK_THAT(bad, Catch::Contains("exp.yaml:1:") && Catch::Contains("model.head") &&
                      Catch::Contains("causal_lm") && Catch::Contains("'autoencode'"));
  CHECK_THAT(hybridlab::test::model_options_error(
                 "model: {d_model: 2, layers: A, attention: {n_heads: 1}, head: "
                 "autoencoder}\n"),
             Catch::Contains("model.head") && Catch::Contains("d_model >= 4"));
  CHECK(hybridlab::test::model_options_error("model: {d_model: 8, layers: A, head: causal_lm}\n")
            .empty());
}

}  // namespace autoencoder_head_test
