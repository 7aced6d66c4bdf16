// T5 relative attention bias (Raffel et al. 2020) through the `t5` plugin.

#include <cmath>

#include "scheme_loader.h"

using namespace hybridlab;
using namespace hybridlab::test;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace t5_test {
namespace {

// Makes bucket b contribute exactly b on every head, so logit_bias returns the bucket ids.
void set_bias_to_bucket_id(PositionScheme& s) {
  torch::NoGradGuard no_grad;
  torch::Tensor w = s.named_parameters()["relative_attention_bias"];
  w.copy_(torch::arange(w.size(0), torch::kFloat).unsqueeze(1).expand_as(w));
}

// Buckets for relative positions rel = j - i, computed through the hook with the query at
// position q0 (so that all keys are >= 0).
std::vector<int64_t> buckets(PositionScheme& s, const std::vector<int64_t>& rel, int64_t q0) {
  std::vector<int64_t> k;
  for (int64_t r : rel) k.push_back(q0 + r);
  const torch::Tensor b =
      s.logit_bias(positions({q0}), torch::tensor(k, torch::kLong))[0][0].round().to(torch::kLong);
  return std::vector<int64_t>(b.data_ptr<int64_t>(), b.data_ptr<int64_t>() + b.numel());
}

// An independent scalar transcription of HF T5Attention._relative_position_bucket (float32 log,
// truncating cast), used as the oracle over a whole range of distances.
int64_t reference_bucket(int64_t rel, bool bidirectional, int64_t num_buckets,
                         int64_t max_distance) {
  int64_t ret = 0, n;
  if (bidirectional) {
    num_buckets /= 2;
    if (rel > 0) ret += num_buckets;
    n = std::abs(rel);
  } else {
    n = std::max<int64_t>(-rel, 0);
  }
  const int64_t max_exact = num_buckets / 2;
  if (n < max_exact) return ret + n;
  const float lg = std::log(static_cast<float>(n) / static_cast<float>(max_exact));
  const float denom = static_cast<float>(std::log(double(max_distance) / double(max_exact)));
  const int64_t large =
      max_exact + static_cast<int64_t>(lg / denom * float(num_buckets - max_exact));
  return ret + std::min<int64_t>(large, num_buckets - 1);
}

}  // namespace

TEST_CASE("t5: buckets of the reference table, both modes", "[position][t5]") {
  // positional_schemes.md §9 (HF modeling_t5.py @6b8b757, 32 buckets, max_distance 128).
  const std::vector<int64_t> rel = {-200, -129, -128, -64, -20, -9, -8,  -1,  0,
                                    1,    7,    8,    9,   20,  64, 127, 128, 200};
  auto bi = make_scheme("t5", "{bidirectional: true}", test_context(2));
  set_bias_to_bucket_id(*bi);
  REQUIRE(buckets(*bi, rel, 200) ==
          std::vector<int64_t>{15, 15, 15, 14, 10, 8, 8, 1, 0, 17, 23, 24, 24, 26, 30, 31, 31, 31});
  auto causal = make_scheme("t5", "{bidirectional: false}", test_context(2));
  set_bias_to_bucket_id(*causal);
  REQUIRE(buckets(*causal, rel, 200) ==
          std::vector<int64_t>{31, 31, 31, 26, 17, 9, 8, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0});
  // The same with the query far away (a tile of a long sequence): only j - i matters.
  REQUIRE(buckets(*bi, rel, 5000) ==
          std::vector<int64_t>{15, 15, 15, 14, 10, 8, 8, 1, 0, 17, 23, 24, 24, 26, 30, 31, 31, 31});
}

TEST_CASE("t5: edges of the exact and log ranges", "[position][t5]") {
  auto bi = make_scheme("t5", "{bidirectional: true}", test_context(1));
  set_bias_to_bucket_id(*bi);
  // Bidirectional, rel <= 0 (§4 "Bucket starts"): 8→8, 12→9, 16→10, 23→11, 32→12, 46→13,
  // 64→14, 91→15; one less stays in the previous bucket. 7 is the last exact distance.
  const std::vector<int64_t> starts = {8, 12, 16, 23, 32, 46, 64, 91};
  std::vector<int64_t> rel, want;
  for (size_t b = 0; b < starts.size(); ++b) {
    rel.push_back(-starts[b]);
    want.push_back(8 + int64_t(b));
    rel.push_back(-(starts[b] - 1));
    want.push_back(7 + int64_t(b));
  }
  REQUIRE(buckets(*bi, rel, 300) == want);
  // Positive side: the same boundaries, offset by 16; bucket 16 is never produced.
  std::vector<int64_t> pos_rel, pos_want;
  for (size_t i = 0; i < rel.size(); ++i) {
    pos_rel.push_back(-rel[i]);
    pos_want.push_back(16 + want[i]);
  }
  REQUIRE(buckets(*bi, pos_rel, 300) == pos_want);
  const std::vector<int64_t> all = buckets(*bi, {1, 2, 3, 200, 1000}, 300);
  REQUIRE(std::find(all.begin(), all.end(), 16) == all.end());

  // Causal: 16, 19, 21, 24, 27, 31, 35, 40, 46, 52, 59, 67, 77, 87, 99, 113 start buckets
  // 16 … 31; every future key falls in bucket 0.
  auto causal = make_scheme("t5", "{bidirectional: false}", test_context(1));
  set_bias_to_bucket_id(*causal);
  const std::vector<int64_t> cstarts = {16, 19, 21, 24, 27, 31, 35, 40,
                                        46, 52, 59, 67, 77, 87, 99, 113};
  std::vector<int64_t> crel, cwant;
  for (size_t b = 0; b < cstarts.size(); ++b) {
    crel.push_back(-cstarts[b]);
    cwant.push_back(16 + int64_t(b));
    crel.push_back(-(cstarts[b] - 1));
    cwant.push_back(15 + int64_t(b));
  }
  REQUIRE(buckets(*causal, crel, 300) == cwant);
  REQUIRE(buckets(*causal, {1, 5, 100, 1000}, 300) == std::vector<int64_t>{0, 0, 0, 0});
  // Past max_distance every distance shares the last bucket.
  REQUIRE(buckets(*causal, {-128, -129, -1000, -100000}, 200000) ==
          std::vector<int64_t>{31, 31, 31, 31});
}

TEST_CASE("t5: every distance in [-300, 300] matches a scalar transcription of HF",
          "[position][t5]") {
  for (const auto& [bidir, nb, md] : std::vector<std::tuple<bool, int64_t, int64_t>>{
           {true, 32, 128}, {false, 32, 128}, {true, 64, 256}, {false, 16, 40}}) {
    auto s = make_scheme("t5",
                         "{bidirectional: " + std::string(bidir ? "true" : "false") +
                             ", num_buckets: " + std::to_string(nb) +
                             ", max_distance: " + std::to_string(md) + "}",
                         test_context(1));
    set_bias_to_bucket_id(*s);
    std::vector<int64_t> rel, want;
    for (int64_t r = -300; r <= 300; ++r) {
      rel.push_back(r);
      want.push_back(reference_bucket(r, bidir, nb, md));
    }
    INFO("bidirectional " << bidir << ", num_buckets " << nb << ", max_distance " << md);
    REQUIRE(buckets(*s, rel, 300) == want);
  }
}

TEST_CASE("t5: bias shape, per-head values and sharing across layers", "[position][t5]") {
  auto s = make_scheme("t5", "", test_context(3));
  REQUIRE(s->shared_across_layers());  // T5 default: one table for every layer
  REQUIRE_FALSE(
      make_scheme("t5", "{shared_across_layers: false}", test_context(3))->shared_across_layers());
  const torch::Tensor w = s->named_parameters()["relative_attention_bias"];
  REQUIRE(w.sizes() == torch::IntArrayRef({32, 3}));
  // Causal default: query 10, key 10 - 9 = 1 → distance 9 → bucket 9 (§9 causal: -9 → 9).
  const torch::Tensor b = s->logit_bias(positions({10}), positions({1}));
  REQUIRE(b.sizes() == torch::IntArrayRef({3, 1, 1}));
  for (int64_t h = 0; h < 3; ++h) REQUIRE(b[h][0][0].item<float>() == w[9][h].item<float>());
}

}  // namespace t5_test
