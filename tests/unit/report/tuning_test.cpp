// Tuning selection: each variant keeps the tuned value that is best on the validation split, even
// when another value scores better on the reported eval set; a best value at the edge of its grid
// is flagged.

#include <catch2/catch.hpp>

#include <cmath>

#include "report/aggregate.h"
#include "report/tuning.h"

using namespace hybridlab::report;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace tuning_test {
namespace {

const std::vector<std::string> kGrid = {"1e-4", "1e-3", "1e-2"};

RunData run(const std::string& pattern, const std::string& lr, int seed, double validation,
            double test) {
  RunData r;
  r.name = "pattern-" + pattern + "_lr-" + lr + "_seed-" + std::to_string(seed);
  r.state = "finished";
  r.task = "mqar";
  r.primary = "accuracy";
  r.higher_is_better = true;
  r.train_length = 64;
  r.labels = {{"pattern", pattern}, {"lr", lr}, {"seed", std::to_string(seed)}};
  r.eval[64]["accuracy"] = test;
  r.eval[256]["accuracy"] = test / 2;
  if (std::isfinite(validation)) r.validation[64]["accuracy"] = validation;
  r.tuned["lr"] = kGrid;
  return r;
}

const VariantCells& find(const std::vector<VariantCells>& v, const std::string& name) {
  for (const auto& g : v) {
    if (g.variant == name) return g;
  }
  FAIL("no variant " << name);
  return v.front();
}

}  // namespace

TEST_CASE("tuning: the value is chosen on the validation split, not on the scored eval set",
          "[report][tuning]") {
  std::vector<RunData> runs;
  // GA: lr 1e-3 is best on validation (0.90, 0.92) but 1e-2 is best on the eval set (0.99).
  for (int s = 0; s < 2; ++s) {
    runs.push_back(run("GA", "1e-4", s, 0.50, 0.55));
    runs.push_back(run("GA", "1e-3", s, 0.90 + 0.02 * s, 0.70 + 0.02 * s));
    runs.push_back(run("GA", "1e-2", s, 0.60, 0.99));
  }
  // AA: best at 1e-4, the first value of the grid: flagged.
  runs.push_back(run("AA", "1e-4", 0, 0.40, 0.30));
  runs.push_back(run("AA", "1e-3", 0, 0.20, 0.60));
  runs.push_back(run("AA", "1e-2", 0, 0.10, 0.10));
  const auto groups = aggregate_runs(runs);
  REQUIRE(groups.size() == 6);  // one group per (variant, lr) before tuning
  const auto picked = select_tuned(groups);
  REQUIRE(picked.size() == 2);

  const VariantCells& ga = find(picked, "pattern-GA");
  REQUIRE(ga.chosen == Labels{{"lr", "1e-3"}});
  REQUIRE(ga.chosen_at_edge.empty());
  REQUIRE(ga.labels == Labels{{"pattern", "GA"}});
  REQUIRE(ga.runs.size() == 2);
  // The reported cell is the eval score of the chosen value (0.70, 0.72), not the eval-best 0.99.
  REQUIRE(ga.cell("accuracy", 64).mean == Approx(0.71));
  REQUIRE(ga.cell("accuracy", 64).n == 2);
  REQUIRE(ga.cell("accuracy", 256).mean == Approx(0.355));
  REQUIRE(ga.tuning_scores.size() == 3);
  REQUIRE(ga.tuning_scores[0].first == "lr=1e-4");  // grid order, not name order
  REQUIRE(ga.tuning_scores[1].first == "lr=1e-3");
  REQUIRE(ga.tuning_scores[1].second == Approx(0.91));
  REQUIRE(ga.tuning_scores[2].second == Approx(0.60));

  const VariantCells& aa = find(picked, "pattern-AA");
  REQUIRE(aa.chosen == Labels{{"lr", "1e-4"}});
  REQUIRE(aa.chosen_at_edge == std::set<std::string>{"lr"});
  REQUIRE(aa.cell("accuracy", 64).mean == Approx(0.30));
}

TEST_CASE("tuning: lower-is-better metrics pick the smallest validation score",
          "[report][tuning]") {
  std::vector<RunData> runs;
  for (const char* lr : {"1e-4", "1e-3", "1e-2"}) {
    RunData r = run("GA", lr, 0, NAN, 0);
    r.primary = "bits_per_byte";
    r.higher_is_better = false;
    const double v = std::string(lr) == "1e-2" ? 2.1 : 2.5;
    r.validation[64]["bits_per_byte"] = v;
    r.eval[64]["bits_per_byte"] = 5 - v;  // the eval set prefers the others
    runs.push_back(r);
  }
  const auto picked = select_tuned(aggregate_runs(runs));
  REQUIRE(picked.size() == 1);
  REQUIRE(picked[0].chosen == Labels{{"lr", "1e-2"}});
  REQUIRE(picked[0].chosen_at_edge.count("lr"));
  REQUIRE(picked[0].cell("bits_per_byte", 64).mean == Approx(2.9));
}

TEST_CASE("tuning: without validation results the first value is kept and says so",
          "[report][tuning]") {
  std::vector<RunData> runs = {run("GA", "1e-3", 0, NAN, 0.5), run("GA", "1e-2", 0, NAN, 0.9)};
  const auto picked = select_tuned(aggregate_runs(runs));
  REQUIRE(picked.size() == 1);
  REQUIRE(picked[0].chosen == Labels{{"lr", "1e-3 (no validation)"}});
  REQUIRE(picked[0].chosen_at_edge.empty());
  // Untuned groups pass through unchanged.
  RunData plain = run("GG", "x", 0, NAN, 0.4);
  plain.name = "pattern-GG_seed-0";
  plain.labels = {{"pattern", "GG"}, {"seed", "0"}};
  plain.tuned.clear();
  const auto same = select_tuned(aggregate_runs({plain}));
  REQUIRE(same.size() == 1);
  REQUIRE(same[0].variant == "pattern-GG");
  REQUIRE(same[0].chosen.empty());
}

}  // namespace tuning_test
