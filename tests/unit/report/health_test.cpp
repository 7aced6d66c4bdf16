// Each health flag on hand-made loss curves and metric values.

#include <catch2/catch.hpp>

#include <cmath>

#include "report/health.h"

using namespace hybridlab::report;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace health_test {
namespace {
// loss(step) for steps 1..n.
template <class F>
std::vector<LossPoint> curve(int64_t n, F f) {
  std::vector<LossPoint> c;
  for (int64_t s = 1; s <= n; ++s) c.push_back({s, f(s)});
  return c;
}
}  // namespace

TEST_CASE("health: still learning on a line still falling", "[report][health]") {
  // loss = 3 - 0.001 step: the last 20% of steps 1..1000 are 801..1000 (from 1000 - 0.2*999),
  // span 199, mean 3 - 0.001*900.5 = 2.0995; drop = 0.001*199/2.0995 = 0.0947845.
  const auto c = curve(1000, [](int64_t s) { return 3.0 - 0.001 * static_cast<double>(s); });
  REQUIRE(tail_relative_drop(c, 0.2) == Approx(0.0947845).epsilon(1e-5));
  REQUIRE(still_learning(c));
  const Health h = assess(c, NAN, NAN, true);
  REQUIRE(h.still_learning);
  REQUIRE_FALSE(h.diverged);
  REQUIRE_FALSE(h.at_chance);
  REQUIRE(h.text() == "still learning");
}

TEST_CASE("health: a solved task is not still learning, however its loss still falls",
          "[report][health]") {
  // An MQAR run at 0.995 accuracy whose loss falls from 0.02 to 0.01 over the last window: a 40%
  // relative drop (fitted: 0.00005 * 199 / 0.015 ~ 0.66), yet 99.5% of the chance-to-perfect gap
  // (chance 1/128) is closed, more than the 95% that counts as solved.
  const auto c = curve(1000, [](int64_t s) {
    return s < 800 ? 1.0 : 0.02 - 0.00005 * static_cast<double>(s - 800);
  });
  REQUIRE(still_learning(c));
  const double chance = 1.0 / 128;
  REQUIRE(solved(0.995, chance, true));
  REQUIRE(solved(0.96, chance, true));        // (0.96 - 1/128) / (1 - 1/128) = 95.97%
  REQUIRE_FALSE(solved(0.95, chance, true));  // 94.96%
  REQUIRE(assess(c, 0.995, chance, true).text() == "ok");
  REQUIRE(assess(c, 0.95, chance, true).text() == "still learning");
  // Lower is better: a loss of 0.2 against chance 4.85 closes 95.9% of the gap, 0.3 93.8%.
  REQUIRE(solved(0.2, 4.85, false));
  REQUIRE_FALSE(solved(0.3, 4.85, false));
  REQUIRE_FALSE(solved(NAN, chance, true));
}

TEST_CASE("health: a plateau with noise is not still learning", "[report][health]") {
  // Converged early (time constant 30 steps), then ±0.02 alternating noise around 2.0.
  const auto c = curve(1000, [](int64_t s) {
    return 2.0 + 3.0 * std::exp(-static_cast<double>(s) / 30.0) + (s % 2 ? 0.02 : -0.02);
  });
  REQUIRE(std::fabs(tail_relative_drop(c, 0.2)) < 0.001);
  REQUIRE_FALSE(still_learning(c));
  REQUIRE_FALSE(diverged(c));
  REQUIRE(assess(c, 0.9, 0.1, true).text() == "ok");
  // A threshold below the fitted drop flips it: the rule compares against the stated threshold.
  const auto slow = curve(1000, [](int64_t s) { return 2.0 - 0.0001 * static_cast<double>(s); });
  // drop = 0.0001*199/(2 - 0.0001*900.5) = 0.0104194
  REQUIRE(tail_relative_drop(slow, 0.2) == Approx(0.0104194).epsilon(1e-4));
  REQUIRE_FALSE(still_learning(slow));
  HealthThresholds strict;
  strict.still_learning_drop = 0.01;
  REQUIRE(still_learning(slow, strict));
  REQUIRE(std::isnan(tail_relative_drop(curve(2, [](int64_t) { return 1.0; }), 0.2)));
}

TEST_CASE("health: diverged on a NaN or a loss that blows up", "[report][health]") {
  auto nan_curve = curve(100, [](int64_t s) { return 3.0 - 0.01 * static_cast<double>(s); });
  nan_curve[60].loss = NAN;
  REQUIRE(diverged(nan_curve));
  // Learns to 1.0 by step 500, then climbs to 6.0 (above the start 5.0 and above 2 x best).
  const auto blowup = curve(1000, [](int64_t s) {
    return s <= 500 ? 5.0 - 0.008 * static_cast<double>(s) : 1.0 + 0.01 * (s - 500.0);
  });
  REQUIRE(diverged(blowup));
  REQUIRE(assess(blowup, NAN, NAN, true).text() == "diverged");
  // Learns to 1.0, then rises: the last window (mean 3.40) stays under the first (4.20) but is
  // above 2 x the best window mean (steps 401..600: 1.35).
  const auto rise = curve(1000, [](int64_t s) {
    return s <= 500 ? 5.0 - 0.008 * static_cast<double>(s) : 1.0 + 0.006 * (s - 500.0);
  });
  REQUIRE(diverged(rise));
  const auto fine = curve(1000, [](int64_t s) { return 5.0 - 0.004 * static_cast<double>(s); });
  REQUIRE_FALSE(diverged(fine));
  REQUIRE_FALSE(diverged({}));
  // Solved: 0.7 nats down to 1e-8 by step 500, flat there, then noise between 1e-8 and 9e-8 from
  // step 800. The last window (mean 5e-8) is 5 x the best (1e-8), but the rise of 4e-8 is far
  // under 2% of the first window's mean, so nothing diverged (solved flip_flop runs read so).
  const auto solved_noise = curve(1000, [](int64_t s) {
    if (s <= 500) return 0.7 * (1.0 - static_cast<double>(s) / 500.0) + 1e-8;
    if (s < 800) return 1e-8;
    return s % 2 == 0 ? 1e-8 : 9e-8;
  });
  REQUIRE_FALSE(diverged(solved_noise));
  // The same rise from a best of 0.1 to 0.3 nats is divergence.
  const auto real_rise = curve(1000, [](int64_t s) {
    if (s <= 500) return 0.7 - 0.0012 * static_cast<double>(s);
    return s < 800 ? 0.1 : 0.3;
  });
  REQUIRE(diverged(real_rise));
}

TEST_CASE("health: at chance against the task's chance level", "[report][health]") {
  // MQAR, V = 256: chance accuracy 1/(V/2) = 0.0078125. (0.05 - c)/(1 - c) = 0.0425 < 0.1.
  const double mqar = 1.0 / 128;
  REQUIRE(at_chance(0.05, mqar, true));
  REQUIRE(at_chance(0.1, mqar, true));         // (0.1 - c)/(1 - c) = 0.0929
  REQUIRE_FALSE(at_chance(0.11, mqar, true));  // 0.1033
  REQUIRE_FALSE(at_chance(0.99, mqar, true));
  // Text: unigram entropy 4.4 bits per byte, lower is better, perfect 0.
  REQUIRE(at_chance(4.3, 4.4, false));        // closes 2.3% of the gap
  REQUIRE(at_chance(4.6, 4.4, false));        // worse than a unigram model
  REQUIRE_FALSE(at_chance(2.5, 4.4, false));  // closes 43%
  REQUIRE_FALSE(at_chance(0.5, NAN, true));   // unknown chance: no flag
  const Health h = assess({}, 0.02, mqar, true);
  REQUIRE(h.at_chance);
  REQUIRE(h.text() == "at chance");
}

}  // namespace health_test

namespace health_test {

TEST_CASE("health: seeds split when one leaves the plateau and another does not",
          "[report][health][split]") {
  const double chance = 1.0 / 128;  // MQAR, vocabulary 256
  // Gap closed (v - 1/128) / (127/128): 0.98 -> 0.97984, 0.236 -> 0.22992, 0.99 -> 0.98992.
  // Best 0.98992 >= 0.8; 0.22992 is 0.76 below it (>= 0.25): behind; 0.97984 is not.
  const SeedSplit s = seed_split({0.98, 0.236, 0.99}, chance, true);
  REQUIRE(s.split());
  REQUIRE(s.n == 3);
  REQUIRE(s.reached == 2);
  REQUIRE(s.behind == std::vector<size_t>{1});
  REQUIRE(s.text() == "seeds split (2/3 reached)");
  // The slow seed of an earlier build: 0.68 closes 0.67748, 0.31 below the best: still split.
  REQUIRE(seed_split({0.984, 0.68, 0.99}, chance, true).split());
  // Every seed near the best (0.90 closes 0.89921, 0.09 below 0.98992): no split.
  REQUIRE_FALSE(seed_split({0.90, 0.95, 0.99}, chance, true).split());
  // Every seed on the plateau (best 0.25 closes 0.2441 < 0.8): no seed reached, no split.
  const SeedSplit plateau = seed_split({0.25, 0.24, 0.26}, chance, true);
  REQUIRE_FALSE(plateau.split());
  REQUIRE(plateau.reached == 0);
  REQUIRE(plateau.text().empty());
  // Lower is better: losses 0.1 and 2.0 against chance 4.85 close 0.97938 and 0.58763: split.
  REQUIRE(seed_split({0.1, 2.0}, 4.85, false).split());
  REQUIRE_FALSE(seed_split({0.1, 0.5}, 4.85, false).split());  // 0.89691: 0.08 below
  // Unknown chance, one finite seed, NaN seeds: never split; NaNs are not counted.
  REQUIRE_FALSE(seed_split({0.99, 0.2}, NAN, true).split());
  REQUIRE_FALSE(seed_split({0.99, NAN}, chance, true).split());
  const SeedSplit with_nan = seed_split({0.99, NAN, 0.2}, chance, true);
  REQUIRE(with_nan.n == 2);
  REQUIRE(with_nan.behind == std::vector<size_t>{2});
  // The thresholds are the documented ones and can be changed.
  HealthThresholds loose;
  loose.split_gap = 0.8;
  REQUIRE_FALSE(seed_split({0.98, 0.236, 0.99}, chance, true, loose).split());
}

}  // namespace health_test
