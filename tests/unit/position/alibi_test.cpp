// ALiBi (Press, Smith & Lewis, ICLR 2022) through the `alibi` plugin.

#include <cmath>

#include "scheme_loader.h"

using namespace hybridlab;
using namespace hybridlab::test;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace alibi_test {
namespace {
// -m_h for every head: the bias at distance i - j = 1.
std::vector<double> negated_slopes(PositionScheme& s) {
  const torch::Tensor b = s.logit_bias(positions({1}), positions({0}));  // [H,1,1]
  std::vector<double> out;
  for (int64_t h = 0; h < b.size(0); ++h) out.push_back(-b[h][0][0].item<double>());
  return out;
}
}  // namespace

TEST_CASE("alibi: the seed lesson's worked example", "[position][alibi]") {
  // Seed lesson (positional_schemes.md §5 "Seed worked example"): content score 2.0 everywhere;
  // slope 0.5 at distances 1, 4, 8 gives logits 1.5, 0.0, -2.0; slope 0.0625 gives offsets
  // -0.0625, -0.25, -0.5. With 8 heads slope 0.5 is head 1 and 0.0625 head 4 (2^-8h/8).
  auto alibi = make_scheme("alibi", "", test_context(8));
  const torch::Tensor bias = alibi->logit_bias(positions({8}), positions({7, 4, 0}));  // i=8
  REQUIRE(bias.sizes() == torch::IntArrayRef({8, 1, 3}));
  const torch::Tensor logits = 2.0 + bias;
  REQUIRE_TENSORS_CLOSE(logits[0][0], torch::tensor({1.5f, 0.0f, -2.0f}), 1e-7);
  REQUIRE_TENSORS_CLOSE(bias[3][0], torch::tensor({-0.0625f, -0.25f, -0.5f}), 1e-7);
  // 0.0625 is also head 1 of 2 (2^-8/2 = 1/16).
  auto two = make_scheme("alibi", "", test_context(2));
  REQUIRE_TENSORS_CLOSE(two->logit_bias(positions({8}), positions({7, 4, 0}))[0][0],
                        torch::tensor({-0.0625f, -0.25f, -0.5f}), 1e-7);
}

TEST_CASE("alibi: slopes for power-of-two and other head counts", "[position][alibi]") {
  // ofirpress get_slopes: n = 8 gives 2^-1 ... 2^-8.
  std::vector<double> eight;
  for (int h = 1; h <= 8; ++h) eight.push_back(std::pow(2.0, -h));
  auto s8 = make_scheme("alibi", "", test_context(8));
  REQUIRE_TENSORS_CLOSE(torch::tensor(negated_slopes(*s8)), torch::tensor(eight), 1e-9);

  // n = 3: get_slopes(2) = [1/16, 1/256], then get_slopes(4)[0::2][:1] = [1/4]
  // (positional_schemes.md §5: "n = 3 gives [1/16, 1/256, 1/4]").
  auto s3 = make_scheme("alibi", "", test_context(3));
  REQUIRE_TENSORS_CLOSE(torch::tensor(negated_slopes(*s3)),
                        torch::tensor({1.0 / 16, 1.0 / 256, 1.0 / 4}), 1e-9);

  // n = 6: [1/4, 1/16, 1/64, 1/256, 1/2, 1/8] (same section).
  auto s6 = make_scheme("alibi", "", test_context(6));
  REQUIRE_TENSORS_CLOSE(torch::tensor(negated_slopes(*s6)),
                        torch::tensor({1.0 / 4, 1.0 / 16, 1.0 / 64, 1.0 / 256, 1.0 / 2, 1.0 / 8}),
                        1e-9);

  // n = 12: P = 8 gives -log2 = 1..8, then every other slope of 16 heads (2^-0.5, 2^-1, ...):
  // 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5 (the table in §5: 1 … 8, 0.5, 1.5, 2.5, 3.5).
  const std::vector<double> exps12 = {1, 2, 3, 4, 5, 6, 7, 8, 0.5, 1.5, 2.5, 3.5};
  std::vector<double> twelve;
  for (double e : exps12) twelve.push_back(std::pow(2.0, -e));
  auto s12 = make_scheme("alibi", "", test_context(12));
  // float32 slopes: relative precision 6e-8.
  REQUIRE_TENSORS_CLOSE(torch::tensor(negated_slopes(*s12)), torch::tensor(twelve), 1e-7);
}

TEST_CASE("alibi: causal and symmetric forms, explicit slopes", "[position][alibi]") {
  const torch::Tensor q = positions({3}), k = positions({0, 1, 2, 3, 4, 5});
  // causal: -m·(i - j) with i = 3: distances 3,2,1,0,-1,-2 (future keys are masked later).
  auto causal = make_scheme("alibi", "{slopes: [0.5, 0.25]}", test_context(2));
  REQUIRE_TENSORS_CLOSE(causal->logit_bias(q, k)[1][0],
                        torch::tensor({-0.75f, -0.5f, -0.25f, 0.0f, 0.25f, 0.5f}), 1e-7);
  // symmetric: -m·|i - j| (x-transformers AlibiPositionalBias).
  auto sym = make_scheme("alibi", "{mode: symmetric, slopes: [0.5, 0.25]}", test_context(2));
  REQUIRE_TENSORS_CLOSE(sym->logit_bias(q, k)[0][0],
                        torch::tensor({-1.5f, -1.0f, -0.5f, 0.0f, -0.5f, -1.0f}), 1e-7);
  // A bidirectional model gets the symmetric form by default.
  auto enc = make_scheme("alibi", "{slopes: [0.5, 0.25]}", test_context(2, 16, false));
  REQUIRE_TENSORS_CLOSE(enc->logit_bias(q, k), sym->logit_bias(q, k), 0.0);
}

TEST_CASE("alibi: a query tile with an offset and one decoding step match the full bias",
          "[position][alibi]") {
  auto alibi = make_scheme("alibi", "", test_context(4));
  const torch::Tensor pos = torch::arange(64, torch::kLong);
  const torch::Tensor full = alibi->logit_bias(pos, pos);
  // Query block 16..31 against every key.
  REQUIRE_TENSORS_CLOSE(alibi->logit_bias(pos.slice(0, 16, 32), pos), full.slice(1, 16, 32), 0.0);
  // One decoding step: the last query against the cache.
  REQUIRE_TENSORS_CLOSE(alibi->logit_bias(positions({63}), pos), full.slice(1, 63, 64), 0.0);
  // Shifting every position by 1000 changes nothing (relative scheme).
  REQUIRE_TENSORS_CLOSE(alibi->logit_bias(pos + 1000, pos + 1000), full, 0.0);
}

}  // namespace alibi_test
