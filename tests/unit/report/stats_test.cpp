// Student-t intervals against hand-computed values; overlap and best/indistinguishable marking.

#include <catch2/catch.hpp>

#include <cmath>
#include <ostream>

#include "report/aggregate.h"
#include "report/stats.h"

using namespace hybridlab::report;

namespace hybridlab::report {
// Catch prints the ranks of a failed comparison.
std::ostream& operator<<(std::ostream& os, CellRank r) {
  return os << (r == CellRank::kBest   ? "best"
                : r == CellRank::kNone ? "none"
                                       : "indistinguishable");
}
}  // namespace hybridlab::report

// A named namespace per test file keeps its helpers apart in a unity build.
namespace stats_test {
namespace {
Interval iv(double mean, double half, int64_t n = 3) {
  Interval i;
  i.mean = mean;
  i.half_width = half;
  i.n = n;
  return i;
}
}  // namespace

TEST_CASE("stats: Student t quantiles match tables", "[report][stats]") {
  // Two-sided 95% critical values (any t table, e.g. NIST/SEMATECH e-Handbook 1.3.6.7.2).
  REQUIRE(student_t_quantile(0.975, 1) == Approx(12.706205).epsilon(1e-6));
  REQUIRE(student_t_quantile(0.975, 2) == Approx(4.302653).epsilon(1e-6));
  REQUIRE(student_t_quantile(0.975, 4) == Approx(2.776445).epsilon(1e-6));
  REQUIRE(student_t_quantile(0.975, 30) == Approx(2.042272).epsilon(1e-6));
  REQUIRE_THROWS_AS(student_t_quantile(1.0, 2), std::domain_error);
  REQUIRE_THROWS_AS(student_t_quantile(0.9, 0), std::domain_error);
}

TEST_CASE("stats: mean interval of three seeds by hand", "[report][stats]") {
  // {1,2,3}: mean 2, s = sqrt(((1)^2 + 0 + 1^2) / 2) = 1, half-width 4.302653 / sqrt(3).
  const Interval i = mean_interval({1, 2, 3});
  REQUIRE(i.n == 3);
  REQUIRE(i.mean == Approx(2.0));
  REQUIRE(i.sd == Approx(1.0));
  REQUIRE(i.half_width == Approx(2.484138).epsilon(1e-6));
  REQUIRE(i.lo() == Approx(2.0 - 2.484138).epsilon(1e-6));
  REQUIRE(i.hi() == Approx(2.0 + 2.484138).epsilon(1e-6));
  // {2, 2.5}: mean 2.25, s = 0.5/sqrt(2) = 0.3535534, half-width 12.706205 * s / sqrt(2)
  // = 3.176551.
  const Interval j = mean_interval({2.0, 2.5});
  REQUIRE(j.mean == Approx(2.25));
  REQUIRE(j.sd == Approx(0.3535534).epsilon(1e-6));
  REQUIRE(j.half_width == Approx(3.176551).epsilon(1e-6));
  // 90%: t(0.95, 2) = 2.919986 -> 2.919986 / sqrt(3) = 1.685854.
  REQUIRE(mean_interval({1, 2, 3}, 0.90).half_width == Approx(1.685854).epsilon(1e-6));
}

TEST_CASE("stats: one seed has no interval, missing values do not count", "[report][stats]") {
  const Interval one = mean_interval({0.7});
  REQUIRE(one.n == 1);
  REQUIRE_FALSE(one.has_interval());
  REQUIRE(one.mean == 0.7);
  REQUIRE(one.half_width == 0);
  REQUIRE(std::isnan(one.sd));
  const Interval with_nan = mean_interval({1, NAN, 3, 2});
  REQUIRE(with_nan.n == 3);
  REQUIRE(with_nan.half_width == Approx(2.484138).epsilon(1e-6));
  REQUIRE(mean_interval({NAN}).empty());
  REQUIRE_THROWS_AS(mean_interval({1, 2}, 1.0), std::invalid_argument);
}

TEST_CASE("stats: interval overlap", "[report][stats]") {
  REQUIRE_FALSE(overlaps(iv(2, 0.5), iv(3, 0.4)));  // [1.5,2.5] vs [2.6,3.4]
  REQUIRE(overlaps(iv(2, 0.5), iv(3, 0.6)));        // [1.5,2.5] vs [2.4,3.6]
  REQUIRE(overlaps(iv(3, 0.6), iv(2, 0.5)));
  REQUIRE(overlaps(iv(2, 0, 1), iv(2.2, 0.3)));  // a point inside an interval
  REQUIRE_FALSE(overlaps(iv(2, 0, 1), iv(2.2, 0.1)));
  REQUIRE_FALSE(overlaps(iv(2, 0.5, 0), iv(2, 0.5)));  // empty
}

TEST_CASE("stats: best cell and the cells indistinguishable from it", "[report][stats]") {
  // [0.85,0.95] best; [0.86,0.88] overlaps it; [0.78,0.82] does not; an empty cell is not ranked.
  const std::vector<Interval> acc = {iv(0.9, 0.05), iv(0.8, 0.02), iv(0.87, 0.01), iv(NAN, 0, 0)};
  const auto r = rank_cells(acc, true);
  REQUIRE(r == std::vector<CellRank>{CellRank::kBest, CellRank::kNone, CellRank::kIndistinguishable,
                                     CellRank::kNone});
  // Lower is better: 0.8 is best; 0.87's [0.86,0.88] misses [0.78,0.82]; 0.9's [0.85,0.95] too.
  const auto low = rank_cells(acc, false);
  REQUIRE(low == std::vector<CellRank>{CellRank::kNone, CellRank::kBest, CellRank::kNone,
                                       CellRank::kNone});
  const auto wide = rank_cells({iv(2.5, 0.1), iv(2.7, 0.15)}, false);  // [2.4,2.6] vs [2.55,2.85]
  REQUIRE(wide == std::vector<CellRank>{CellRank::kBest, CellRank::kIndistinguishable});
}

}  // namespace stats_test
