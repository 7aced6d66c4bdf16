// Choosing each variant's tuned values on the validation split.

#include "report/tuning.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace hybridlab::report {

double validation_score(const RunData& run) {
  const auto at = run.validation.find(run.train_length);
  if (at == run.validation.end()) return NAN;
  const auto m = at->second.find(run.primary);
  return m == at->second.end() ? NAN : m->second;
}

namespace {

// The mean validation score over a variant's seeds (those that have one); NaN when none has.
double mean_validation_score(const VariantCells& vc) {
  double sum = 0;
  int n = 0;
  for (const RunData* r : vc.runs) {
    const double s = validation_score(*r);
    if (std::isfinite(s)) {
      sum += s;
      ++n;
    }
  }
  return n ? sum / n : NAN;
}

}  // namespace

std::vector<VariantCells> select_tuned(const std::vector<VariantCells>& groups) {
  std::vector<VariantCells> out;
  std::vector<bool> done(groups.size(), false);
  for (size_t i = 0; i < groups.size(); ++i) {
    if (done[i]) continue;
    const VariantCells& g = groups[i];
    const RunData* first = g.runs.empty() ? nullptr : g.runs.front();
    if (!first || first->tuned.empty()) {
      out.push_back(g);
      done[i] = true;
      continue;
    }
    std::set<std::string> drop = {"seed"};
    for (const auto& [k, grid] : first->tuned) drop.insert(k);
    const std::string base = variant_name(first->name, first->labels, drop);
    // Candidates: every group of the same task and base variant.
    std::vector<size_t> cand;
    for (size_t j = i; j < groups.size(); ++j) {
      const RunData* r = groups[j].runs.empty() ? nullptr : groups[j].runs.front();
      if (!done[j] && r && groups[j].task == g.task &&
          variant_name(r->name, r->labels, drop) == base) {
        cand.push_back(j);
        done[j] = true;
      }
    }
    // Grid order: by the index of each tuned value in its grid, keys in label order.
    const auto grid_index = [&](size_t j) {
      std::vector<size_t> idx;
      const RunData* r = groups[j].runs.front();
      for (const auto& [k, grid] : first->tuned) {
        const auto it = std::find(grid.begin(), grid.end(), r->label(k));
        idx.push_back(static_cast<size_t>(it - grid.begin()));
      }
      return idx;
    };
    std::sort(cand.begin(), cand.end(),
              [&](size_t a, size_t b) { return grid_index(a) < grid_index(b); });
    std::vector<std::pair<std::string, double>> scores;
    int best = -1;
    double best_score = NAN;
    for (size_t c = 0; c < cand.size(); ++c) {
      const VariantCells& vc = groups[cand[c]];
      const double score = mean_validation_score(vc);
      std::string text;
      for (const auto& [k, grid] : first->tuned) {
        text += (text.empty() ? "" : ", ") + k + "=" + vc.runs.front()->label(k);
      }
      scores.emplace_back(text, score);
      if (std::isfinite(score) &&
          (best < 0 || (g.higher_is_better ? score > best_score : score < best_score))) {
        best = static_cast<int>(c);
        best_score = score;
      }
    }
    VariantCells kept = groups[cand[best < 0 ? 0 : static_cast<size_t>(best)]];
    const RunData* kr = kept.runs.front();
    kept.variant = base;
    kept.labels.clear();
    for (const auto& [k, v] : kr->labels) {
      if (!drop.count(k)) kept.labels.emplace_back(k, v);
    }
    for (const auto& [k, grid] : first->tuned) {
      const std::string v = kr->label(k);
      kept.chosen.emplace_back(k, best < 0 ? v + " (no validation)" : v);
      if (best >= 0 && grid.size() > 1 && (v == grid.front() || v == grid.back())) {
        kept.chosen_at_edge.insert(k);
      }
    }
    kept.tuning_scores = scores;
    out.push_back(kept);
  }
  return out;
}

}  // namespace hybridlab::report
