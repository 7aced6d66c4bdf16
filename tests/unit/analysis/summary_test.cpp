// The analysis summary and the reach table on hand-made results.

#include <catch2/catch.hpp>

#include "analysis/write.h"

using namespace hybridlab;
using namespace hybridlab::analysis;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace summary_test {
namespace {

KnockoutResult ko(const std::string& kind, int64_t layer, const std::string& target,
                  int64_t setting, int64_t length, double baseline, double value) {
  // sample()'s layer 0 is Gated DeltaNet, its layer 1 attention.
  return {kind,
          layer,
          target,
          setting,
          length,
          baseline,
          value,
          baseline - value,
          layer == 0 ? "gated_deltanet" : "attention"};
}

AnalysisResult sample() {
  AnalysisResult r;
  r.task = "mqar";
  r.metric = "accuracy";
  r.train_length = 64;
  r.lengths = {64, 256};
  const std::string g = "layer 0 (gated_deltanet)", a = "layer 1 (attention, rope)";
  // Mixer damage: layer 0 0.1 and 0.1 (mean 0.1), layer 1 0.9 and 0.9 (mean 0.9): 10% / 90%.
  r.knockouts = {
      ko("mixer", 0, g, 0, 64, 1.0, 0.9),      ko("mixer", 0, g, 0, 256, 0.95, 0.85),
      ko("mixer", 1, a, 0, 64, 1.0, 0.1),      ko("mixer", 1, a, 0, 256, 0.95, 0.05),
      ko("position", 1, a, 0, 64, 1.0, 0.5),   ko("position", 1, a, 0, 256, 0.95, 0.95),
      ko("reach", 1, a, 16, 64, 1.0, 0.6),     ko("reach", 1, a, 16, 256, 0.95, 0.2),
      ko("reach", 1, a, 64, 256, 0.95, 0.945), ko("state_reset", 0, g, 16, 256, 0.95, 0.5)};
  return r;
}

}  // namespace

TEST_CASE("reach: the smallest window within the tolerance, else the whole context",
          "[analysis][summary]") {
  const std::vector<Reach> rs = reaches(sample(), 0.01);
  REQUIRE(rs.size() == 2);
  CHECK(rs[0].length == 64);
  CHECK(rs[0].whole_context);  // 16 costs 0.4 at 64
  CHECK(rs[0].window == 64);
  CHECK(rs[1].length == 256);
  CHECK_FALSE(rs[1].whole_context);  // 64 costs 0.005 at 256
  CHECK(rs[1].window == 64);
  // With a looser tolerance 16 already suffices at 64.
  CHECK(reaches(sample(), 0.5)[0].window == 16);
}

TEST_CASE("summary: shares of the mixer damage, position, state reset and reach in words",
          "[analysis][summary]") {
  const std::string s = summarize(sample(), 0.01);
  CHECK_THAT(s, Catch::Contains("layer 1 (attention, rope) carries 90% of the damage (accuracy "
                                "1 → 0.1 at 64 tokens (the training length))"));
  CHECK_THAT(s, Catch::Contains("and layer 0 (gated_deltanet) 10%"));
  CHECK_THAT(s, Catch::Contains("Emptying the state of layer 0 (gated_deltanet) every 16 tokens: "
                                "accuracy 0.95 → 0.5 at 256 tokens (4× the training length)."));
  CHECK_THAT(s, Catch::Contains("costs 0.5 accuracy at 64 tokens (the training length) and "
                                "costs nothing measurable at 256 tokens"));
  CHECK_THAT(s, Catch::Contains("needs a window of 64 tokens (within 0.01 accuracy)"));
  CHECK(summarize(AnalysisResult{}, 0.01) == "No knock-out was run.");
  // A reset that costs nothing, or less than the tolerance.
  AnalysisResult harmless = sample();
  harmless.knockouts.back() = ko("state_reset", 0, "layer 0 (gated_deltanet)", 16, 256, 0.95, 0.96);
  CHECK_THAT(summarize(harmless, 0.01),
             Catch::Contains("every 16 tokens costs nothing at any length."));
  harmless.knockouts.back().value = 0.945;
  harmless.knockouts.back().damage = 0.005;
  CHECK_THAT(summarize(harmless, 0.01),
             Catch::Contains("every 16 tokens costs at most 0.005 accuracy."));
}

}  // namespace summary_test
