#pragma once
// Seeds of one variant gathered into cells (metric × length) with confidence intervals, the best
// cell of a column and the cells indistinguishable from it.

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "hybridlab/sweep.h"
#include "report/health.h"
#include "report/stats.h"

namespace hybridlab::report {

using Labels = std::vector<std::pair<std::string, std::string>>;

/// What a report knows of one run (read from its folder by the report writer).
struct RunData {
  std::string name;    ///< run folder name, e.g. "pattern-GGGA_scheme-rope_seed-1"
  std::string folder;  ///< the run's folder name (rows of eval variants share their run's)
  std::string state;   ///< finished, failed, interrupted, running, new
  std::string error;   ///< first line of the failure, if any
  std::string task;    ///< task name; "" when the run has no results
  std::string primary;
  bool higher_is_better = true;  ///< of the primary metric
  int64_t train_length = 0;
  Labels labels;  ///< varied values (short key -> value text), seed and tuned keys included
  std::map<int64_t, std::map<std::string, double>> eval;        ///< length -> metric -> value
  std::map<int64_t, std::map<std::string, double>> validation;  ///< the same on the tuning split
  std::map<std::string, double> chance;  ///< metric -> chance level (missing: unknown)
  std::vector<LossPoint> loss;           ///< training loss per logged step
  /// Numbers this row can be plotted against besides its labels: model quantities ("params",
  /// "recurrent_state_floats", ...) and the settings of its eval variant by dotted key
  /// ("task.num_kv_pairs"; for the trained row, the run's own value of each such key).
  std::map<std::string, double> axis;
  /// Label keys set by `sweep.tune` (e.g. "lr") -> the value labels of that grid, in file order.
  std::map<std::string, std::vector<std::string>> tuned;
  bool has_results() const { return !task.empty() && !eval.empty(); }
  /// The value of `metric` at `length`, NaN if absent.
  double value(const std::string& metric, int64_t length) const;
  /// The label value of `key`, "" if absent.
  std::string label(const std::string& key) const;
};

// variant_name() and eval_variant_run() name rows as the sweep names runs (hybridlab/sweep.h).
using hybridlab::eval_variant_run;
using hybridlab::variant_name;

/// Whether a larger value of `metric` is better: the task's direction for its primary metric;
/// otherwise false for losses, bits and perplexities (names containing "loss", "bits" or
/// "perplexity"), true for the rest (accuracies).
bool metric_higher_is_better(const std::string& metric, const std::string& primary,
                             bool primary_higher_is_better);

/// The seeds of one variant of one task.
struct VariantCells {
  std::string task;
  std::string variant;                 ///< variant_name() of its runs
  Labels labels;                       ///< labels without the seed and tuned keys
  std::map<std::string, double> axis;  ///< RunData::axis of its first run (equal for its seeds)
  std::string primary;
  bool higher_is_better = true;
  int64_t train_length = 0;
  std::vector<const RunData*> runs;  ///< the runs aggregated (for tuned variants: the chosen value)
  std::map<std::pair<std::string, int64_t>, Interval> cells;  ///< (metric, length) -> interval
  std::vector<Health> health;                                 ///< per run, in `runs` order
  /// The seeds' primary metric at the training length on either side of the plateau
  /// (seed_split(), health.h); indices of `split.behind` are into `runs`.
  SeedSplit split;
  /// Tuned key -> chosen value text (empty when nothing is tuned); see tuning.h.
  Labels chosen;
  std::set<std::string>
      chosen_at_edge;  ///< tuned keys whose chosen value is first/last of its grid
  /// Every tuned candidate ("lr=0.001") -> its validation score (mean over seeds), grid order.
  std::vector<std::pair<std::string, double>> tuning_scores;
  /// The interval of `metric` at `length` (empty when absent).
  Interval cell(const std::string& metric, int64_t length) const;
  /// Flags set on any run, with counts when not all runs have them, e.g. "still learning (1/3)",
  /// then the seed split when the seeds split ("seeds split (2/3 reached)").
  std::string health_text() const;
  /// "" when the seeds do not split, else which seeds are behind and at what value, e.g.
  /// "seeds split: 2/3 reached, seed-1 at 0.236 (accuracy at 64)".
  std::string split_note() const;
};

/// Groups runs with results into variants (the seeds of one configuration; `confidence` for the
/// intervals) in first-appearance order, and assesses each run's health with `thresholds`.
/// Runs of tuned variants are grouped by their tuned values too; tuning.h picks one of those.
std::vector<VariantCells> aggregate_runs(const std::vector<RunData>& runs,
                                         const HealthThresholds& thresholds = {},
                                         double confidence = 0.95);

/// The interval (Student t, `confidence`) of the per-seed differences `a`'s `ma` at `la` minus
/// `b`'s `mb` at `lb`, when both variants have runs of the same two or more seeds (their "seed"
/// labels) with finite values; empty otherwise. The same variant at two lengths pairs with itself.
Interval paired_difference(const VariantCells& a, const std::string& ma, int64_t la,
                           const VariantCells& b, const std::string& mb, int64_t lb,
                           double confidence = 0.95);

/// Rank of one cell within a column of cells.
enum class CellRank { kNone, kBest, kIndistinguishable };

/// Marks the best cell of `cells` (highest mean when `higher_is_better`, else lowest; equal means
/// are all best) and every other cell whose interval overlaps the best one's as indistinguishable.
/// Empty cells are kNone.
std::vector<CellRank> rank_cells(const std::vector<Interval>& cells, bool higher_is_better);

}  // namespace hybridlab::report
