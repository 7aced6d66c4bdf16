// Student-t intervals of seed means (Boost.Math quantiles).

#include "report/stats.h"

#include <boost/math/distributions/students_t.hpp>

#include <cmath>
#include <stdexcept>

namespace hybridlab::report {

double student_t_quantile(double p, double dof) {
  if (!(p > 0 && p < 1)) throw std::domain_error("student_t_quantile: p must be in (0, 1)");
  if (!(dof > 0)) throw std::domain_error("student_t_quantile: dof must be > 0");
  return boost::math::quantile(boost::math::students_t_distribution<double>(dof), p);
}

Interval mean_interval(const std::vector<double>& values, double confidence) {
  if (!(confidence > 0 && confidence < 1)) {
    throw std::invalid_argument("mean_interval: confidence must be in (0, 1)");
  }
  Interval iv;
  iv.confidence = confidence;
  double sum = 0;
  for (double v : values) {
    if (!std::isfinite(v)) continue;
    sum += v;
    ++iv.n;
  }
  if (iv.n == 0) {
    iv.mean = NAN;
    iv.sd = NAN;
    return iv;
  }
  iv.mean = sum / static_cast<double>(iv.n);
  if (iv.n < 2) {
    iv.sd = NAN;
    return iv;
  }
  double ss = 0;
  for (double v : values) {
    if (std::isfinite(v)) ss += (v - iv.mean) * (v - iv.mean);
  }
  const double n = static_cast<double>(iv.n);
  iv.sd = std::sqrt(ss / (n - 1));
  iv.half_width = student_t_quantile(0.5 + confidence / 2, n - 1) * iv.sd / std::sqrt(n);
  return iv;
}

bool overlaps(const Interval& a, const Interval& b) {
  if (a.empty() || b.empty()) return false;
  return a.lo() <= b.hi() && b.lo() <= a.hi();
}

}  // namespace hybridlab::report
