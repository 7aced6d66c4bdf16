// Head statistics on hand-made attention maps and gates whose values are computed by hand.

#include <torch/torch.h>

#include <catch2/catch.hpp>

#include <cmath>

#include "analysis/head_stats.h"

using namespace hybridlab::analysis;
using Catch::Detail::Approx;

TEST_CASE("attention statistics of a hand-made map", "[analysis][heads]") {
  // Keys at positions 0, 1, 2; queries at 1 and 2 (the last two keys). Head 0 spreads its weight,
  // head 1 looks at itself only.
  const torch::Tensor probs = torch::tensor({0.5, 0.5, 0.0, 0.2, 0.3, 0.5,  //
                                             0.0, 1.0, 0.0, 0.0, 0.0, 1.0},
                                            torch::kDouble)
                                  .view({1, 2, 2, 3});
  const torch::Tensor q_pos = torch::tensor({1, 2}, torch::kLong);
  const torch::Tensor k_pos = torch::tensor({0, 1, 2}, torch::kLong);
  AttentionSums s;
  add_attention(s, probs, q_pos, k_pos, /*local_window=*/2);
  REQUIRE(s.rows[0].item<double>() == 2);
  // Head 0: distance 0.5·1 = 0.5 and 0.2·2 + 0.3·1 = 0.7.
  CHECK(s.distance[0].item<double>() == Approx(1.2));
  // Entropy ln 2 and −(0.2 ln 0.2 + 0.3 ln 0.3 + 0.5 ln 0.5).
  CHECK(s.entropy[0].item<double>() ==
        Approx(std::log(2.0) - (0.2 * std::log(0.2) + 0.3 * std::log(0.3) + 0.5 * std::log(0.5))));
  CHECK(s.sink[0].item<double>() == Approx(0.7));   // 0.5 + 0.2 on position 0
  CHECK(s.local[0].item<double>() == Approx(1.8));  // within 2 tokens: 1.0 and 0.8
  // Head 1: all weight on the query itself.
  CHECK(s.distance[1].item<double>() == 0);
  CHECK(s.entropy[1].item<double>() == 0);
  CHECK(s.sink[1].item<double>() == 0);
  CHECK(s.local[1].item<double>() == Approx(2.0));

  // A second batch adds up.
  add_attention(s, probs, q_pos, k_pos, 2);
  CHECK(s.rows[1].item<double>() == 4);
  CHECK(s.distance[0].item<double>() == Approx(2.4));
}

TEST_CASE("gate statistics: α = exp(g) and β summed per head", "[analysis][heads]") {
  // [B=1, H=2, T=2]: head 0 decays by 0.5 then 0.9, head 1 keeps everything.
  const torch::Tensor g = torch::tensor({std::log(0.5), std::log(0.9), 0.0, 0.0}).view({1, 2, 2});
  const torch::Tensor beta = torch::tensor({0.2, 0.4, 1.0, 0.0}).view({1, 2, 2});
  GateSums s;
  add_gates(s, g, beta);
  CHECK(s.tokens[0].item<double>() == 2);
  CHECK(s.alpha[0].item<double>() == Approx(1.4));
  CHECK(s.alpha[1].item<double>() == Approx(2.0));
  CHECK(s.beta[0].item<double>() == Approx(0.6));
  CHECK(s.beta[1].item<double>() == Approx(1.0));
  CHECK_THROWS(add_gates(s, g, beta.view({1, 4, 1})));
}
