#pragma once
// Mean and Student-t confidence interval of a handful of seeds, and interval overlap.
//
// The interval is the textbook one for a mean of n independent runs with unknown variance:
// mean ± t(1 − α/2; n − 1) · s / √n, s the sample standard deviation (n − 1 in the denominator)
// (e.g. Wasserman, "All of Statistics", §6.3.2 / §10.4). Quantiles come from Boost.Math.

#include <cstdint>
#include <vector>

namespace hybridlab::report {

/// A mean with its confidence interval. With n = 1 there is no interval: half_width is 0, sd is
/// NaN and has_interval() is false (the mean is a point). With n = 0 the mean is NaN.
struct Interval {
  double mean = 0;        ///< sample mean of the finite values
  double sd = 0;          ///< sample standard deviation (n − 1 denominator); NaN when n < 2
  double half_width = 0;  ///< t(1 − α/2; n − 1) · sd / √n; 0 when n < 2
  int64_t n = 0;          ///< number of finite values averaged
  /// Values that were recorded but not finite (a diverged evaluation's NaN or ±Inf), left out of
  /// n; set by the caller, which alone knows a recorded NaN from a missing value. When n = 0 and
  /// non_finite > 0, `mean` holds one of them, so that the cell reads "nan" or "inf", not "-".
  int64_t non_finite = 0;
  double confidence = 0.95;
  double lo() const { return mean - half_width; }
  double hi() const { return mean + half_width; }
  bool has_interval() const { return n >= 2; }
  bool empty() const { return n == 0; }  ///< no finite value (see non_finite)
};

/// The `p` quantile (0 < p < 1) of Student's t distribution with `dof` > 0 degrees of freedom,
/// e.g. student_t_quantile(0.975, 2) = 4.302653. Throws std::domain_error outside those ranges.
double student_t_quantile(double p, double dof);

/// Mean and two-sided `confidence` interval (Student t, n − 1 degrees of freedom) of `values`.
/// Non-finite values (runs without a result) are left out and do not count in n.
/// Throws std::invalid_argument unless 0 < confidence < 1.
Interval mean_interval(const std::vector<double>& values, double confidence = 0.95);

/// Whether the closed intervals [a.lo, a.hi] and [b.lo, b.hi] share a point (a point interval of
/// n = 1 overlaps another when it lies inside it). False when either is empty.
bool overlaps(const Interval& a, const Interval& b);

}  // namespace hybridlab::report
