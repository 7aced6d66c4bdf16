// Claims: parsing (good and bad syntax with columns), resolution against an experiment's
// variants, metrics and lengths, and judgement on intervals (holds / fails / inconclusive).

#include <catch2/catch.hpp>

#include <map>
#include <tuple>

#include "report/claims.h"

using namespace hybridlab::report;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace claims_test {
namespace {

ClaimCatalog catalog() {
  ClaimCatalog c;
  c.variants = {{"pattern-GGGA_scheme-rope", {{"pattern", "GGGA"}, {"scheme", "rope"}}},
                {"pattern-GGGA_scheme-nope", {{"pattern", "GGGA"}, {"scheme", "nope"}}},
                {"pattern-AAAA_scheme-rope", {{"pattern", "AAAA"}, {"scheme", "rope"}}}};
  c.metrics = {"accuracy", "bits_per_byte", "loss"};
  c.lengths = {64, 128, 512};
  return c;
}

// The column and message of the error parse + resolve raise.
std::pair<size_t, std::string> error_of(const std::string& text) {
  try {
    Claim c = parse_claim(text);
    resolve_claim(c, catalog());
  } catch (const ClaimError& e) {
    return {e.column, e.what()};
  }
  FAIL("no error for: " << text);
  return {0, ""};
}

Interval iv(double mean, double half, int64_t n = 3) {
  Interval i;
  i.mean = mean;
  i.half_width = half;
  i.n = n;
  return i;
}

using Cells = std::map<std::tuple<std::string, std::string, int64_t>, Interval>;

ClaimOutcome judge(const std::string& text, const Cells& cells) {
  Claim c = parse_claim(text);
  resolve_claim(c, catalog());
  return evaluate_claim(
      c,
      [&](const std::string& v, const std::string& m, int64_t L) {
        const auto it = cells.find({v, m, L});
        return it == cells.end() ? Interval{} : it->second;
      },
      [](const std::string& m) { return m == "accuracy"; });
}

}  // namespace

TEST_CASE("claims: sentences parse into cells and relations", "[report][claims]") {
  Claim a = parse_claim("pattern-GGGA_scheme-rope accuracy at 64 >= 0.95");
  REQUIRE(a.lhs.variant == "pattern-GGGA_scheme-rope");
  REQUIRE(a.lhs.metric == "accuracy");
  REQUIRE(a.lhs.length == 64);
  REQUIRE(a.relation == Relation::kAtLeast);
  REQUIRE(a.rhs_is_number);
  REQUIRE(a.number == 0.95);

  Claim b = parse_claim("{pattern: AAAA, scheme: rope} bits_per_byte at 512 is worse than at 128");
  REQUIRE(b.lhs.selector == std::vector<std::pair<std::string, std::string>>{{"pattern", "AAAA"},
                                                                             {"scheme", "rope"}});
  REQUIRE(b.lhs.metric == "bits_per_byte");
  REQUIRE(b.relation == Relation::kWorse);
  REQUIRE_FALSE(b.rhs_is_number);
  REQUIRE(b.rhs.length == 128);
  REQUIRE(b.rhs.metric.empty());
  resolve_claim(b, catalog());
  REQUIRE(b.lhs.variant == "pattern-AAAA_scheme-rope");
  REQUIRE(b.rhs.variant == "pattern-AAAA_scheme-rope");
  REQUIRE(b.rhs.metric == "bits_per_byte");

  Claim c = parse_claim("pattern-GGGA_scheme-nope loss at 128 is within 0.05 of at 64");
  REQUIRE(c.relation == Relation::kWithin);
  REQUIRE(c.tolerance == 0.05);

  // A right side naming only another variant keeps the metric and the length.
  Claim d = parse_claim("AAAA accuracy at 64 is better than pattern-GGGA_scheme-nope");
  resolve_claim(d, catalog());
  REQUIRE(d.lhs.variant == "pattern-AAAA_scheme-rope");  // one label value picks one variant
  REQUIRE(d.rhs.variant == "pattern-GGGA_scheme-nope");
  REQUIRE(d.rhs.metric == "accuracy");
  REQUIRE(d.rhs.length == 64);

  REQUIRE(parse_claim("AAAA accuracy at 64 \xe2\x89\xa5 0.5").relation == Relation::kAtLeast);
  REQUIRE(parse_claim("AAAA accuracy at 64 is at most 0.5").relation == Relation::kAtMost);
  REQUIRE(parse_claim("AAAA accuracy at 64 is above 0.5").relation == Relation::kAbove);
  REQUIRE(parse_claim("AAAA accuracy at 64 < 0.5").relation == Relation::kBelow);
  REQUIRE(parse_claim("AAAA accuracy at 64 is better than 1e-2").number == 0.01);
}

TEST_CASE("claims: bad syntax names the column and what was expected", "[report][claims]") {
  auto e = error_of("AAAA accuracy 64 >= 0.95");
  CHECK(e.first == 14);
  CHECK(e.second.find("unexpected '64'") != std::string::npos);
  e = error_of("AAAA accuracy at sixty >= 0.95");
  CHECK(e.first == 17);
  CHECK(e.second.find("expected a length in tokens after 'at', got 'sixty'") != std::string::npos);
  e = error_of("AAAA accuracy at 64 is greater than 0.95");
  CHECK(e.first == 23);
  CHECK(e.second.find("expected a relation") != std::string::npos);
  e = error_of("AAAA accuracy at 64 is at best 0.95");
  CHECK(e.first == 26);
  CHECK(e.second.find("expected 'least' or 'most'") != std::string::npos);
  e = error_of("{pattern GGGA} accuracy at 64 >= 1");
  CHECK(e.first == 1);
  CHECK(e.second.find("expected 'label: value'") != std::string::npos);
  e = error_of("AAAA accuracy at 64 >=");
  CHECK(e.first == 22);
  CHECK(e.second.find("expected a number or a cell") != std::string::npos);
  e = error_of("AAAA accuracy at 64 is within of 0.2");
  CHECK(e.first == 30);
  CHECK(e.second.find("tolerance") != std::string::npos);
  e = error_of("AAAA accuracy at 64 >= 0.9 at 64 extra");
  CHECK(e.first == 33);
  CHECK(e.second.find("unexpected 'extra'") != std::string::npos);
  e = error_of("");
  CHECK(e.second == "empty claim");
  e = error_of("AAAA accuracy at 64 ! 3");
  CHECK(e.first == 20);
  // A number past a double's range is refused, not read as 0 or infinity.
  for (const char* n : {"1e-400", "1e400", "0x10"}) {
    e = error_of(std::string("AAAA accuracy at 64 >= ") + n);
    CHECK(e.first == 23);
    CHECK(e.second.find(std::string("'") + n + "' is not a number") != std::string::npos);
  }
  e = error_of("AAAA accuracy at 64 is within 1e-999 of 0.5");
  CHECK(e.first == 30);
}

TEST_CASE("claims: unknown variants, metrics and lengths are named", "[report][claims]") {
  auto e = error_of("GGGX accuracy at 64 >= 0.95");
  CHECK(e.first == 0);
  CHECK(e.second ==
        "unknown variant 'GGGX'; the variants are: pattern-GGGA_scheme-rope, "
        "pattern-GGGA_scheme-nope, pattern-AAAA_scheme-rope");
  e = error_of("GGGA accuracy at 64 >= 0.95");
  CHECK(e.first == 0);
  CHECK(e.second.find("'GGGA' names 2 variants (pattern-GGGA_scheme-rope, "
                      "pattern-GGGA_scheme-nope)") != std::string::npos);
  e = error_of("AAAA acuracy at 64 >= 0.95");
  CHECK(e.first == 5);
  CHECK(e.second ==
        "unknown metric 'acuracy'; the task's metrics are: accuracy, bits_per_byte, loss");
  e = error_of("AAAA accuracy at 256 >= 0.95");
  CHECK(e.first == 17);
  CHECK(e.second == "length 256 is not evaluated; eval.lengths are: 64, 128, 512");
  e = error_of("AAAA accuracy at 64 is better than at 1024");
  CHECK(e.first == 38);
  e = error_of("{pattern: GGGA, scheme: alibi} accuracy at 64 >= 0.95");
  CHECK(e.second.find("no variant has {pattern: GGGA, scheme: alibi}") != std::string::npos);
  e = error_of("{layers: GGGA} accuracy at 64 >= 0.95");
  CHECK(e.second.find("unknown label 'layers' (the variants' labels: pattern, scheme)") !=
        std::string::npos);
  e = error_of("accuracy at 64 >= 0.95");
  CHECK(e.second.find("name the variant: this experiment has 3") != std::string::npos);
  e = error_of("AAAA accuracy at 64 is better than at 64");
  CHECK(e.second == "both sides name the same cell");
}

TEST_CASE("claims: with eval variants, a run's folder name names its own evaluation",
          "[report][claims]") {
  ClaimCatalog c;
  c.variants = {{"layers-GA_eval-trained", {{"layers", "GA"}, {"eval", "trained"}}, "layers-GA"},
                {"layers-GA_eval-short", {{"layers", "GA"}, {"eval", "short"}}},
                {"layers-AA_eval-trained", {{"layers", "AA"}, {"eval", "trained"}}, "layers-AA"},
                {"layers-AA_eval-short", {{"layers", "AA"}, {"eval", "short"}}}};
  c.metrics = {"accuracy"};
  c.lengths = {32};
  Claim claim = parse_claim("layers-GA accuracy at 32 is better than layers-AA");
  resolve_claim(claim, c);
  CHECK(claim.lhs.variant == "layers-GA_eval-trained");
  CHECK(claim.rhs.variant == "layers-AA_eval-trained");
  // A label value still names every row it is in: two here.
  Claim ambiguous = parse_claim("GA accuracy at 32 >= 0.5");
  CHECK_THROWS_WITH(resolve_claim(ambiguous, c), Catch::Contains("'GA' names 2 variants"));
}

TEST_CASE("claims: a single-variant experiment needs no variant", "[report][claims]") {
  ClaimCatalog one;
  one.variants = {{"main", {}}};
  one.metrics = {"accuracy"};
  one.lengths = {64};
  Claim c = parse_claim("accuracy at 64 >= 0.5");
  resolve_claim(c, one);
  REQUIRE(c.lhs.variant == "main");
}

TEST_CASE("claims: holds, fails or inconclusive on the intervals", "[report][claims]") {
  const std::string rope = "pattern-AAAA_scheme-rope", gr = "pattern-GGGA_scheme-rope",
                    gn = "pattern-GGGA_scheme-nope";
  Cells cells;
  cells[{gr, "accuracy", 64}] = iv(0.97, 0.01);    // [0.96, 0.98]
  cells[{gn, "accuracy", 64}] = iv(0.90, 0.02);    // [0.88, 0.92]
  cells[{rope, "accuracy", 64}] = iv(0.94, 0.02);  // [0.92, 0.96]
  cells[{rope, "bits_per_byte", 512}] = iv(3.48, 0.10);
  cells[{rope, "bits_per_byte", 128}] = iv(2.66, 0.05);
  cells[{gn, "bits_per_byte", 512}] = iv(2.50, 0.05);  // [2.45, 2.55]
  cells[{gn, "bits_per_byte", 128}] = iv(2.48, 0.04);  // [2.44, 2.52]

  auto status = [&](const std::string& t) { return judge(t, cells).status; };
  CHECK(status(gr + " accuracy at 64 >= 0.95") == ClaimStatus::kHolds);
  CHECK(status(gn + " accuracy at 64 >= 0.95") == ClaimStatus::kFails);
  CHECK(status(rope + " accuracy at 64 >= 0.95") == ClaimStatus::kInconclusive);
  CHECK(judge(rope + " accuracy at 64 >= 0.95", cells).note == "intervals overlap");
  // Bits per byte: lower is better, so "worse" means a larger value.
  CHECK(status(rope + " bits_per_byte at 512 is worse than at 128") == ClaimStatus::kHolds);
  CHECK(status(rope + " bits_per_byte at 512 is better than at 128") == ClaimStatus::kFails);
  CHECK(status(gn + " bits_per_byte at 512 is worse than at 128") == ClaimStatus::kInconclusive);
  CHECK(status(gn + " bits_per_byte at 512 is within 0.2 of at 128") == ClaimStatus::kHolds);
  // difference interval [2.45 - 2.52, 2.55 - 2.44] = [-0.07, 0.11]: straddles 0.1
  CHECK(status(gn + " bits_per_byte at 512 is within 0.1 of at 128") == ClaimStatus::kInconclusive);
  CHECK(status(rope + " bits_per_byte at 512 is within 0.5 of at 128") == ClaimStatus::kFails);
  // Accuracy: higher is better. [0.96,0.98] vs [0.88,0.92].
  CHECK(status(gr + " accuracy at 64 is better than " + gn) == ClaimStatus::kHolds);
  CHECK(status(gn + " accuracy at 64 is better than " + gr) == ClaimStatus::kFails);
  CHECK(status(gr + " accuracy at 64 is better than AAAA") == ClaimStatus::kInconclusive);
  CHECK(status(gn + " accuracy at 64 < 0.9") == ClaimStatus::kInconclusive);
  CHECK(status(gn + " accuracy at 64 is below 0.93") == ClaimStatus::kHolds);
  CHECK(status(gn + " accuracy at 64 is at most 0.85") == ClaimStatus::kFails);
  // A cell without runs is inconclusive and says so.
  const ClaimOutcome none = judge(gr + " accuracy at 128 >= 0.5", cells);
  CHECK(none.status == ClaimStatus::kInconclusive);
  CHECK(none.note == "no result for " + gr + " accuracy at 128");
  // One seed: decided on the point values, and the note says there is no interval.
  Cells single;
  single[{gr, "accuracy", 64}] = iv(0.97, 0, 1);
  const ClaimOutcome p = judge(gr + " accuracy at 64 >= 0.95", single);
  CHECK(p.status == ClaimStatus::kHolds);
  CHECK(p.note == "n=1: no interval");
  CHECK(judge(gr + " accuracy at 64 >= 0.98", single).status == ClaimStatus::kFails);
}

TEST_CASE("claims: on runs of the same seeds, judged on the per-seed differences",
          "[report][claims][paired]") {
  const std::string gr = "pattern-GGGA_scheme-rope", gn = "pattern-GGGA_scheme-nope";
  Cells cells;
  // Seeds spread both cells widely ([2.40, 2.72] and [2.43, 2.73]) ...
  cells[{gr, "bits_per_byte", 64}] = iv(2.56, 0.16);
  cells[{gn, "bits_per_byte", 64}] = iv(2.58, 0.15);
  cells[{gn, "bits_per_byte", 512}] = iv(2.52, 0.14);
  // ... but seed by seed they differ by little: a paired lookup for these pairs.
  std::map<std::pair<std::string, std::string>, Interval> diffs;
  diffs[{gr + "@64", gn + "@64"}] = iv(-0.02, 0.01);   // [-0.03, -0.01]
  diffs[{gn + "@512", gn + "@64"}] = iv(-0.06, 0.02);  // [-0.08, -0.04]
  const auto judge_paired = [&](const std::string& text) {
    Claim c = parse_claim(text);
    resolve_claim(c, catalog());
    return evaluate_claim(
        c,
        [&](const std::string& v, const std::string& m, int64_t L) {
          const auto it = cells.find({v, m, L});
          return it == cells.end() ? Interval{} : it->second;
        },
        [](const std::string& m) { return m == "accuracy"; }, nullptr,
        [&](const CellRef& a, const CellRef& b) {
          const auto it = diffs.find({a.variant + "@" + std::to_string(a.length),
                                      b.variant + "@" + std::to_string(b.length)});
          return it == diffs.end() ? Interval{} : it->second;
        });
  };
  // Unpaired, [2.40 - 2.73, 2.72 - 2.43] = [-0.33, 0.29] straddles 0.1; paired it lies inside.
  CHECK(judge(gr + " bits_per_byte at 64 is within 0.1 of " + gn, cells).status ==
        ClaimStatus::kInconclusive);
  const ClaimOutcome w = judge_paired(gr + " bits_per_byte at 64 is within 0.1 of " + gn);
  CHECK(w.status == ClaimStatus::kHolds);
  CHECK(w.difference.mean == -0.02);
  CHECK(w.note == "paired over 3 seeds: difference -0.02 ± 0.01");
  // Lower is better: -0.02 ± 0.01 is better on every seed; not within 0.005; not worse.
  CHECK(judge_paired(gr + " bits_per_byte at 64 is better than " + gn).status ==
        ClaimStatus::kHolds);
  CHECK(judge_paired(gr + " bits_per_byte at 64 is worse than " + gn).status ==
        ClaimStatus::kFails);
  CHECK(judge_paired(gr + " bits_per_byte at 64 is within 0.005 of " + gn).status ==
        ClaimStatus::kFails);
  CHECK(judge_paired(gr + " bits_per_byte at 64 is within 0.02 of " + gn).note ==
        "paired over 3 seeds: difference -0.02 ± 0.01, straddling the tolerance");
  // The same variant at two lengths: at 512 at most (<=) at 64 holds on the differences.
  CHECK(judge_paired(gn + " bits_per_byte at 512 is at most at 64").status == ClaimStatus::kHolds);
  // Against a number, or without a paired interval, the intervals decide as before.
  CHECK(judge_paired(gn + " bits_per_byte at 512 is at most 3").status == ClaimStatus::kHolds);
  CHECK(judge_paired(gn + " bits_per_byte at 64 is worse than " + gr).note == "intervals overlap");
}

}  // namespace claims_test
