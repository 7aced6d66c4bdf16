// Run health flags from a loss curve and a metric against its chance level.

#include "report/health.h"

#include <algorithm>
#include <cmath>

namespace hybridlab::report {
namespace {

// The finite points whose step lies in the last `fraction` of the curve's step range.
std::vector<LossPoint> tail(const std::vector<LossPoint>& curve, double fraction) {
  std::vector<LossPoint> out;
  if (curve.empty()) return out;
  const double first = static_cast<double>(curve.front().step);
  const double last = static_cast<double>(curve.back().step);
  const double from = last - fraction * (last - first);
  for (const auto& p : curve) {
    if (static_cast<double>(p.step) >= from && std::isfinite(p.loss)) out.push_back(p);
  }
  return out;
}

double mean_loss(const std::vector<LossPoint>& pts) {
  double s = 0;
  for (const auto& p : pts) s += p.loss;
  return pts.empty() ? NAN : s / static_cast<double>(pts.size());
}

}  // namespace

std::string Health::text() const {
  std::string s;
  if (diverged) s += "diverged";
  if (still_learning) s += std::string(s.empty() ? "" : ", ") + "still learning";
  if (at_chance) s += std::string(s.empty() ? "" : ", ") + "at chance";
  return s.empty() ? "ok" : s;
}

double tail_relative_drop(const std::vector<LossPoint>& curve, double tail_fraction) {
  const std::vector<LossPoint> w = tail(curve, tail_fraction);
  if (w.size() < 3) return NAN;
  double sx = 0, sy = 0;
  for (const auto& p : w) {
    sx += static_cast<double>(p.step);
    sy += p.loss;
  }
  const double n = static_cast<double>(w.size());
  const double mx = sx / n, my = sy / n;
  double sxx = 0, sxy = 0;
  for (const auto& p : w) {
    const double dx = static_cast<double>(p.step) - mx;
    sxx += dx * dx;
    sxy += dx * (p.loss - my);
  }
  if (sxx <= 0 || my == 0) return NAN;
  const double slope = sxy / sxx;
  const double span = static_cast<double>(w.back().step - w.front().step);
  return -slope * span / std::fabs(my);
}

bool still_learning(const std::vector<LossPoint>& curve, const HealthThresholds& t) {
  const double drop = tail_relative_drop(curve, t.tail_fraction);
  return std::isfinite(drop) && drop > t.still_learning_drop;
}

bool diverged(const std::vector<LossPoint>& curve, const HealthThresholds& t) {
  if (curve.empty()) return false;
  for (const auto& p : curve) {
    if (!std::isfinite(p.loss)) return true;
  }
  // Window means over consecutive blocks of tail_fraction of the points.
  const size_t w = std::max<size_t>(
      1, static_cast<size_t>(std::ceil(t.tail_fraction * static_cast<double>(curve.size()))));
  std::vector<double> means;
  for (size_t i = 0; i < curve.size(); i += w) {
    const size_t end = std::min(curve.size(), i + w);
    means.push_back(mean_loss({curve.begin() + static_cast<std::ptrdiff_t>(i),
                               curve.begin() + static_cast<std::ptrdiff_t>(end)}));
  }
  if (means.size() < 2) return false;
  const double last = mean_loss(tail(curve, t.tail_fraction));
  const double best = *std::min_element(means.begin(), means.end());
  // A rise counts only when it is a visible share of where the run started: a solved run whose
  // loss wanders between 1e-8 and 5e-8 nats is five times its best, yet nothing diverged.
  const bool rose = last - best > t.still_learning_drop * means.front();
  return last > means.front() * (1 + t.still_learning_drop) ||
         (best > 0 && last > t.divergence_factor * best && rose);
}

namespace {

// The share of the gap between `chance` and a perfect score (1 when `higher_is_better`, else 0)
// that `value` closes; NaN when either is not finite or the gap is zero (no comparison holds).
double gap_closed(double value, double chance, bool higher_is_better) {
  if (!std::isfinite(value) || !std::isfinite(chance)) return NAN;
  const double gap = (higher_is_better ? 1.0 : 0.0) - chance;  // > 0 accuracies, < 0 losses
  return gap == 0 ? NAN : (value - chance) / gap;
}

}  // namespace

bool at_chance(double value, double chance, bool higher_is_better, const HealthThresholds& t) {
  return gap_closed(value, chance, higher_is_better) < t.chance_margin;
}

bool solved(double value, double chance, bool higher_is_better, const HealthThresholds& t) {
  return gap_closed(value, chance, higher_is_better) > 1 - t.solved_margin;
}

std::string SeedSplit::text() const {
  if (!split()) return "";
  return "seeds split (" + std::to_string(reached) + "/" + std::to_string(n) + " reached)";
}

SeedSplit seed_split(const std::vector<double>& values, double chance, bool higher_is_better,
                     const HealthThresholds& t) {
  SeedSplit s;
  std::vector<double> closed(values.size(), NAN);
  double best = -INFINITY;
  for (size_t i = 0; i < values.size(); ++i) {
    closed[i] = gap_closed(values[i], chance, higher_is_better);
    if (!std::isfinite(closed[i])) continue;
    ++s.n;
    best = std::max(best, closed[i]);
  }
  if (s.n < 2 || best < t.split_reached) {
    s.reached = best >= t.split_reached ? s.n : 0;
    return s;
  }
  for (size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(closed[i])) continue;
    if (closed[i] <= best - t.split_gap) {
      s.behind.push_back(i);
    } else {
      ++s.reached;
    }
  }
  return s;
}

Health assess(const std::vector<LossPoint>& curve, double primary_value, double chance,
              bool higher_is_better, const HealthThresholds& t) {
  Health h;
  h.tail_drop = tail_relative_drop(curve, t.tail_fraction);
  h.still_learning = std::isfinite(h.tail_drop) && h.tail_drop > t.still_learning_drop &&
                     !solved(primary_value, chance, higher_is_better, t);
  h.diverged = diverged(curve, t);
  h.at_chance = at_chance(primary_value, chance, higher_is_better, t);
  return h;
}

}  // namespace hybridlab::report
