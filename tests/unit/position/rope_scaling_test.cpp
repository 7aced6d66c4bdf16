// RoPE scalings (transformers modeling_rope_utils.py; positional_schemes.md §6.1, §9) at
// head_dim 64: inverse frequencies θ_k and the attention factor, against values derived by hand
// from the formulas (written out below, independent of the plugin) and the reference numbers.

#include <algorithm>
#include <cmath>

#include "scheme_loader.h"

using namespace hybridlab;
using namespace hybridlab::test;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace rope_scaling_test {
namespace {

constexpr int64_t kHeadDim = 64, kPairs = 32;

std::vector<double> default_theta(double base) {
  std::vector<double> t;
  for (int k = 0; k < kPairs; ++k) t.push_back(std::pow(base, -2.0 * k / kHeadDim));
  return t;
}

struct Measured {
  std::vector<double> theta;   // angle per unit position, per pair
  std::vector<double> factor;  // |rotated e_k| per pair: the attention factor
};

// Measures what the rotate hook does: query vector k is the unit vector of channel k (half layout,
// pair (k, k+32)) at position 1; the keys span positions 0 … length−1, which sets the current
// length for dynamic and longrope. The rotated vector is a·(cos θ_k, sin θ_k).
Measured measure(PositionScheme& rope, int64_t length) {
  const torch::Tensor q =
      torch::eye(kPairs, kHeadDim, torch::kDouble).view({1, 1, kPairs, kHeadDim});
  const torch::Tensor k = torch::zeros({1, 1, length, kHeadDim}, torch::kDouble);
  const torch::Tensor q_pos = torch::ones({kPairs}, torch::kLong);
  const torch::Tensor rq =
      rope.rotate(q, k, q_pos, torch::arange(length, torch::kLong)).first[0][0];
  Measured m;
  for (int64_t i = 0; i < kPairs; ++i) {
    const double c = rq[i][i].item<double>(), s = rq[i][i + kPairs].item<double>();
    m.theta.push_back(std::atan2(s, c));
    m.factor.push_back(std::hypot(c, s));
  }
  return m;
}

void require_close_rel(const std::vector<double>& got, const std::vector<double>& want,
                       double rel) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("pair " << i << ": got " << got[i] << ", expected " << want[i]);
    REQUIRE(std::abs(got[i] - want[i]) <= rel * std::abs(want[i]));
  }
}

// Checks the hook (measured rotation) and the inspect tables against the expected θ and factor.
void check(const std::string& params, int64_t length, const std::vector<double>& theta,
           double factor, const PositionContext& ctx = test_context(1, kHeadDim)) {
  INFO("params " << params << ", length " << length);
  auto rope = make_scheme("rope", params, ctx);
  const Measured m = measure(*rope, length);
  require_close_rel(m.theta, theta, 1e-9);
  require_close_rel(m.factor, std::vector<double>(kPairs, factor), 1e-9);
  const torch::Tensor inv = inspect_table(*rope, length, "inv_freq");  // [32, 2]: default, scaled
  std::vector<double> col;
  for (int64_t i = 0; i < kPairs; ++i) col.push_back(inv[i][1].item<double>());
  require_close_rel(col, theta, 1e-9);
  REQUIRE(std::abs(inspect_table(*rope, length, "attention_factor")[0].item<double>() - factor) <
          1e-12);
}

std::string list(const std::vector<double>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}

}  // namespace

TEST_CASE("rope scaling: default frequencies (§9 reference numbers)", "[position][rope]") {
  const std::vector<double> t = default_theta(10000);
  // θ_k = 10000^(−k/32): θ_0 = 1, θ_1 = 0.749894209, θ_16 = 0.01, θ_31 = 1.33352143e−4.
  REQUIRE(std::abs(t[1] - 0.749894209) < 1e-9);
  REQUIRE(std::abs(t[16] - 0.01) < 1e-15);
  REQUIRE(std::abs(t[31] - 1.33352143e-4) < 1e-12);
  check("", 16, t, 1.0);
  check("{rope_scaling: {type: default}}", 16, t, 1.0);
  // Llama-3 base.
  check("{rope_theta: 500000}", 16, default_theta(500000), 1.0);
}

TEST_CASE("rope scaling: linear (position interpolation) and ntk", "[position][rope]") {
  std::vector<double> lin = default_theta(10000);
  for (double& v : lin) v /= 4;  // θ_k / factor
  check("{rope_scaling: {type: linear, factor: 4}}", 16, lin, 1.0);

  // NTK-aware: base' = base·s^(d/(d−2)) = 10000·4^(64/62). The highest frequency stays 1 and the
  // lowest is exactly the linear one: 1.33352143e−4 / 4 = 3.3338e−5 (§6.1).
  const std::vector<double> ntk = default_theta(10000 * std::pow(4.0, 64.0 / 62.0));
  REQUIRE(ntk[0] == 1.0);
  REQUIRE(std::abs(ntk[31] - 3.3338e-5) < 1e-9);
  REQUIRE(std::abs(ntk[31] - lin[31]) < 1e-15);
  check("{rope_scaling: {type: ntk, factor: 4}}", 16, ntk, 1.0);
}

TEST_CASE("rope scaling: dynamic NTK follows the current length", "[position][rope]") {
  // base' = base·(f·L/M − (f − 1))^(d/(d−2)) with L = max(length, M) (HF dynamic). f = 2,
  // M = 128: up to length 128 nothing changes; at 512, f·L/M − (f−1) = 7, so the lowest
  // frequency is θ_31/7 and the highest stays 1.
  const std::string p =
      "{rope_scaling: {type: dynamic, factor: 2, original_max_position_embeddings: 128}}";
  check(p, 100, default_theta(10000), 1.0);
  check(p, 128, default_theta(10000), 1.0);
  const std::vector<double> t512 = default_theta(10000 * std::pow(7.0, 64.0 / 62.0));
  REQUIRE(std::abs(t512[31] - default_theta(10000)[31] / 7) < 1e-15);
  check(p, 512, t512, 1.0);
  // M defaults to the training length (128 in the test context).
  check("{rope_scaling: {type: dynamic, factor: 2}}", 512, t512, 1.0);
}

TEST_CASE("rope scaling: yarn", "[position][rope]") {
  // factor 4, original 2048, beta_fast 32, beta_slow 1, base 10000, d 64:
  // corr(r) = 64·ln(2048/(2π r))/(2 ln 10000): corr(32) = 8.064 → floor 8, corr(1) = 20.105
  // → ceil 21. ramp_k = clamp((k − 8)/13, 0, 1); θ'_k = θ_k/4·ramp + θ_k·(1 − ramp).
  // Reference (§9): k ≤ 8 unchanged, k ≥ 21 divided by 4, k = 9 → 0.0706631,
  // k = 16 → 0.00538462. Attention factor 0.1·ln 4 + 1 = 1.138629436.
  std::vector<double> t = default_theta(10000);
  for (int k = 0; k < kPairs; ++k) {
    const double ramp = std::clamp((k - 8.0) / 13.0, 0.0, 1.0);
    t[size_t(k)] = t[size_t(k)] / 4 * ramp + t[size_t(k)] * (1 - ramp);
  }
  REQUIRE(std::abs(t[9] - 0.0706631) < 1e-7);
  REQUIRE(std::abs(t[16] - 0.00538462) < 1e-8);
  const double a = 0.1 * std::log(4.0) + 1;
  REQUIRE(std::abs(a - 1.138629436) < 1e-9);
  check("{rope_scaling: {type: yarn, factor: 4, original_max_position_embeddings: 2048}}", 16, t,
        a);
  // An explicit attention_factor wins; mscale/mscale_all_dim give
  // (0.1·mscale·ln f + 1)/(0.1·mscale_all_dim·ln f + 1) (DeepSeek-V3 style).
  check(
      "{rope_scaling: {type: yarn, factor: 4, original_max_position_embeddings: 2048, "
      "attention_factor: 1.5}}",
      16, t, 1.5);
  check(
      "{rope_scaling: {type: yarn, factor: 4, original_max_position_embeddings: 2048, "
      "mscale: 1.0, mscale_all_dim: 0.5}}",
      16, t, (0.1 * std::log(4.0) + 1) / (0.05 * std::log(4.0) + 1));
}

TEST_CASE("rope scaling: longrope switches factors past the original length", "[position][rope]") {
  // θ'_k = 1/(ext_k·base^(2k/d)); ext = long_factor when the length exceeds
  // original_max_position_embeddings, else short_factor (HF longrope_frequency_update: at
  // exactly the original length the short factors are used).
  std::vector<double> short_f, long_f;
  for (int k = 0; k < kPairs; ++k) {
    short_f.push_back(1.0 + k / 100.0);
    long_f.push_back(1.0 + k);
  }
  const std::string p =
      "{rope_scaling: {type: longrope, factor: 32, "
      "original_max_position_embeddings: 64, short_factor: " +
      list(short_f) + ", long_factor: " + list(long_f) + "}}";
  std::vector<double> ts = default_theta(10000), tl = default_theta(10000);
  for (int k = 0; k < kPairs; ++k) {
    ts[size_t(k)] /= short_f[size_t(k)];
    tl[size_t(k)] /= long_f[size_t(k)];
  }
  // √(1 + ln 32 / ln 64) = √(1 + 5/6) = 1.354006401.
  const double a = std::sqrt(1 + 5.0 / 6.0);
  check(p, 64, ts, a);
  check(p, 65, tl, a);
  // Phi-3-128k: original 4096, factor 32 → attention factor ≈ 1.1902 (§6.1).
  auto phi3 = make_scheme("rope",
                          "{rope_scaling: {type: longrope, factor: 32, "
                          "original_max_position_embeddings: 4096, short_factor: " +
                              list(short_f) + ", long_factor: " + list(long_f) + "}}",
                          test_context(1, kHeadDim));
  REQUIRE(std::abs(inspect_table(*phi3, 8, "attention_factor")[0].item<double>() - 1.1902) < 1e-4);
  // Without factor: f = max_length / original (HF: max_position_embeddings / original).
  PositionContext ctx = test_context(1, kHeadDim);
  ctx.max_length = 256;
  auto nofactor = make_scheme("rope",
                              "{rope_scaling: {type: longrope, original_max_position_embeddings: "
                              "64, short_factor: " +
                                  list(short_f) + ", long_factor: " + list(long_f) + "}}",
                              ctx);
  REQUIRE(std::abs(inspect_table(*nofactor, 8, "attention_factor")[0].item<double>() -
                   std::sqrt(1 + std::log(4.0) / std::log(64.0))) < 1e-12);
}

TEST_CASE("rope scaling: llama3 wavelength bands", "[position][rope]") {
  // Llama 3.1: base 500000, factor 8, low 1, high 4, original 8192 (§6.1, §9): pairs 0-14
  // unchanged, 15-17 smoothed with s = 0.5928, 0.2813, 0.0745, 18-31 divided by 8;
  // θ' = (1 − s)·θ/8 + s·θ.
  const std::vector<double> base = default_theta(500000);
  std::vector<double> t = base;
  const double s[3] = {0.5928492950, 0.2812826052, 0.0745265642};
  for (int k = 15; k < kPairs; ++k)
    t[size_t(k)] =
        k <= 17 ? ((1 - s[k - 15]) / 8 + s[k - 15]) * base[size_t(k)] : base[size_t(k)] / 8;
  // The band edges by hand: wavelength 2π/θ_k against 8192/4 = 2048 and 8192/1 = 8192.
  REQUIRE(2 * M_PI / base[14] < 2048);
  REQUIRE(2 * M_PI / base[15] >= 2048);
  REQUIRE(2 * M_PI / base[17] <= 8192);
  REQUIRE(2 * M_PI / base[18] > 8192);
  REQUIRE(std::abs((8192 / (2 * M_PI / base[15]) - 1) / 3 - s[0]) < 1e-8);
  check(
      "{rope_theta: 500000, rope_scaling: {type: llama3, factor: 8, low_freq_factor: 1, "
      "high_freq_factor: 4, original_max_position_embeddings: 8192}}",
      16, t, 1.0);
}

}  // namespace rope_scaling_test
