#pragma once
// Run health: is a run past its plateau, better than chance, and numerically sound?
//
// Three flags, computed from a run's training-loss curve (metrics.jsonl) and its primary metric at
// the training length; the rules and thresholds are documented in docs/experiments.md:
//  - still learning: the least-squares line through the last `tail_fraction` of the logged
//    steps falls, over that window, by more than `still_learning_drop` of the window's mean loss,
//    unless the primary metric already closes all but `solved_margin` of the gap between chance
//    and a perfect score (more training cannot move it by more than that, while a loss near zero
//    still falls by large relative amounts);
//  - at chance: the primary metric closes less than `chance_margin` of the gap between the task's
//    chance level and a perfect score (1 for accuracies, 0 for losses and bits);
//  - diverged: a non-finite loss was logged, or the mean loss of the last window is above the
//    mean of the first one (by more than `still_learning_drop`), or above `divergence_factor` times
//    the lowest window mean by more than `still_learning_drop` of the first window's mean (a
//    solved run's loss near zero doubles by noise alone).

#include <cstdint>
#include <string>
#include <vector>

namespace hybridlab::report {

/// One logged training step.
struct LossPoint {
  int64_t step = 0;
  double loss = 0;  ///< training loss at that step (nats/token)
};

/// Thresholds of the health rules (defaults are the documented ones).
struct HealthThresholds {
  double tail_fraction = 0.2;         ///< the "last part" of the schedule: last 20% of the steps
  double still_learning_drop = 0.02;  ///< relative drop over that window that counts as learning
  double chance_margin = 0.1;      ///< share of the chance-to-perfect gap that counts as at chance
  double solved_margin = 0.05;     ///< share of that gap left that counts as solved
  double divergence_factor = 2.0;  ///< last-window mean above this × best window mean: diverged
  /// Seeds split (seed_split()): the best seed closes at least this share of the gap ...
  double split_reached = 0.8;
  /// ... and another closes at least this share of the gap less than the best one.
  double split_gap = 0.25;
};

/// Health of one run (or of the seeds of one variant: each flag is set when any seed has it).
struct Health {
  bool still_learning = false;
  bool at_chance = false;
  bool diverged = false;
  double tail_drop = 0;  ///< relative loss drop fitted over the last window (0.05 = 5%); NaN if
                         ///< the curve is too short
  /// "ok", or the set flags joined by ", " (e.g. "still learning, at chance").
  std::string text() const;
};

/// Relative drop of the loss over the last `tail_fraction` of the curve's steps: −slope · span /
/// mean, where slope is the least-squares slope of loss on step over the points whose step is in
/// the last window, span the window's step range and mean its mean loss. Positive = still falling.
/// NaN when the window holds fewer than 3 finite points.
double tail_relative_drop(const std::vector<LossPoint>& curve, double tail_fraction);

/// The still-learning rule: tail_relative_drop > still_learning_drop.
bool still_learning(const std::vector<LossPoint>& curve, const HealthThresholds& t = {});

/// The divergence rule (see the file comment). False for an empty curve.
bool diverged(const std::vector<LossPoint>& curve, const HealthThresholds& t = {});

/// The at-chance rule for a metric `value` with chance level `chance`: perfect is 1 when
/// `higher_is_better`, else 0. False when `chance` or `value` is not finite (chance unknown).
bool at_chance(double value, double chance, bool higher_is_better, const HealthThresholds& t = {});

/// Whether `value` closes all but `solved_margin` of the gap between `chance` and a perfect score
/// (1 when `higher_is_better`, else 0). False when either is not finite.
bool solved(double value, double chance, bool higher_is_better, const HealthThresholds& t = {});

/// How the seeds of one variant fall on either side of the learning plateau, from their primary
/// metric at the training length. The seeds split when the best one closes at least
/// `split_reached` of the gap between chance and a perfect score and another closes at least
/// `split_gap` of it less: one seed left the plateau and another did not, so the mean describes
/// neither, and a claim on it rests on which seeds were drawn (docs/experiments.md, run health).
struct SeedSplit {
  size_t n = 0;        ///< seeds with a finite value
  size_t reached = 0;  ///< seeds within `split_gap` of the best one's gap closed
  /// Indices (into the values given to seed_split) of the seeds short of the best by `split_gap`
  /// or more; empty unless split().
  std::vector<size_t> behind;
  bool split() const { return !behind.empty(); }
  /// "" when not split, else e.g. "seeds split (2/3 reached)".
  std::string text() const;
};

/// The seed split of `values` (one per seed; NaN entries are ignored) with chance level `chance`;
/// perfect is 1 when `higher_is_better`, else 0. Never split when chance is unknown (NaN) or fewer
/// than two values are finite.
SeedSplit seed_split(const std::vector<double>& values, double chance, bool higher_is_better,
                     const HealthThresholds& t = {});

/// All three flags of one run; a solved primary metric is never still learning.
Health assess(const std::vector<LossPoint>& curve, double primary_value, double chance,
              bool higher_is_better, const HealthThresholds& t = {});

}  // namespace hybridlab::report
