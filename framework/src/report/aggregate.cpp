// Grouping the seeds of a variant into interval cells; best and indistinguishable cells.

#include "report/aggregate.h"

#include <fmt/format.h>

#include <cmath>

#include "hybridlab/sweep.h"

namespace hybridlab::report {

double RunData::value(const std::string& metric, int64_t length) const {
  const auto at = eval.find(length);
  if (at == eval.end()) return NAN;
  const auto m = at->second.find(metric);
  return m == at->second.end() ? NAN : m->second;
}

std::string RunData::label(const std::string& key) const {
  for (const auto& [k, v] : labels) {
    if (k == key) return v;
  }
  return "";
}

bool metric_higher_is_better(const std::string& metric, const std::string& primary,
                             bool primary_higher_is_better) {
  if (metric == primary) return primary_higher_is_better;
  for (const char* lower : {"loss", "bits", "perplexity"}) {
    if (metric.find(lower) != std::string::npos) return false;
  }
  return true;
}

namespace {

// Health is judged where the model was trained: at the training length (else the shortest).
int64_t health_length(const RunData& r) {
  if (!r.eval.count(r.train_length) && !r.eval.empty()) return r.eval.begin()->first;
  return r.train_length;
}

// The interval of `metric` at `length` over `runs`. A value a run recorded as NaN or ±Inf (a
// diverged evaluation) is counted apart from a missing one, so that the report can show it.
Interval seed_cell(const std::vector<const RunData*>& runs, const std::string& metric,
                   int64_t length, double confidence) {
  std::vector<double> values;
  int64_t non_finite = 0;
  double recorded = NAN;
  for (const RunData* r : runs) {
    const double v = r->value(metric, length);
    values.push_back(v);
    const auto at = r->eval.find(length);
    if (!std::isfinite(v) && at != r->eval.end() && at->second.count(metric)) {
      ++non_finite;
      recorded = v;
    }
  }
  Interval iv = mean_interval(values, confidence);
  iv.non_finite = non_finite;
  if (iv.empty()) iv.mean = recorded;
  return iv;
}

}  // namespace

Interval VariantCells::cell(const std::string& metric, int64_t length) const {
  const auto it = cells.find({metric, length});
  if (it != cells.end()) return it->second;
  Interval empty;
  empty.mean = NAN;
  return empty;
}

std::string VariantCells::health_text() const {
  const size_t n = health.size();
  std::string s;
  auto add = [&](const char* name, size_t count) {
    if (count == 0) return;
    s += (s.empty() ? "" : ", ") + std::string(name);
    if (count < n) s += fmt::format(" ({}/{})", count, n);
  };
  size_t d = 0, l = 0, c = 0;
  for (const auto& h : health) {
    d += h.diverged;
    l += h.still_learning;
    c += h.at_chance;
  }
  add("diverged", d);
  add("still learning", l);
  add("at chance", c);
  if (split.split()) s += (s.empty() ? "" : ", ") + split.text();
  return s.empty() ? "ok" : s;
}

std::string VariantCells::split_note() const {
  if (!split.split()) return "";
  std::string who;
  for (size_t i : split.behind) {
    const RunData& r = *runs[i];
    const std::string seed = r.label("seed");
    who += fmt::format(", {} at {:.3g}", seed.empty() ? r.name : "seed-" + seed,
                       r.value(r.primary, health_length(r)));
  }
  return fmt::format("seeds split: {}/{} reached{} ({} at {})", split.reached, split.n, who,
                     primary, train_length);
}

std::vector<VariantCells> aggregate_runs(const std::vector<RunData>& runs,
                                         const HealthThresholds& thresholds, double confidence) {
  std::vector<VariantCells> out;
  for (const auto& r : runs) {
    if (!r.has_results()) continue;
    // Tuned keys stay in the name here (one group per tuned value); the seed never does.
    const std::string name = variant_name(r.name, r.labels, {"seed"});
    VariantCells* g = nullptr;
    for (auto& v : out) {
      if (v.task == r.task && v.variant == name) g = &v;
    }
    if (!g) {
      out.emplace_back();
      g = &out.back();
      g->task = r.task;
      g->variant = name;
      g->primary = r.primary;
      g->higher_is_better = r.higher_is_better;
      g->train_length = r.train_length;
      for (const auto& [k, v] : r.labels) {
        if (k != "seed") g->labels.emplace_back(k, v);
      }
      g->axis = r.axis;
    }
    g->runs.push_back(&r);
  }
  for (auto& g : out) {
    std::set<std::pair<std::string, int64_t>> keys;
    for (const RunData* r : g.runs) {
      for (const auto& [L, metrics] : r->eval) {
        for (const auto& [m, v] : metrics) {
          if (m != "examples") keys.insert({m, L});
        }
      }
    }
    for (const auto& [m, L] : keys) g.cells[{m, L}] = seed_cell(g.runs, m, L, confidence);
    std::vector<double> primaries;
    double chance = NAN;
    for (const RunData* r : g.runs) {
      const double value = r->value(r->primary, health_length(*r));
      const auto ch = r->chance.find(r->primary);
      chance = ch == r->chance.end() ? NAN : ch->second;
      g.health.push_back(assess(r->loss, value, chance, r->higher_is_better, thresholds));
      primaries.push_back(value);
    }
    g.split = seed_split(primaries, chance, g.higher_is_better, thresholds);
  }
  return out;
}

Interval paired_difference(const VariantCells& a, const std::string& ma, int64_t la,
                           const VariantCells& b, const std::string& mb, int64_t lb,
                           double confidence) {
  const auto by_seed = [](const VariantCells& v, const std::string& m, int64_t L) {
    std::map<std::string, double> out;
    for (const RunData* r : v.runs) {
      const std::string seed = r->label("seed");
      const double x = r->value(m, L);
      if (seed.empty() || !std::isfinite(x) || out.count(seed))
        return std::map<std::string, double>{};
      out[seed] = x;
    }
    return out;
  };
  const std::map<std::string, double> xa = by_seed(a, ma, la), xb = by_seed(b, mb, lb);
  if (xa.size() < 2 || xa.size() != xb.size()) return Interval{};
  std::vector<double> d;
  for (const auto& [seed, x] : xa) {
    const auto it = xb.find(seed);
    if (it == xb.end()) return Interval{};
    d.push_back(x - it->second);
  }
  return mean_interval(d, confidence);
}

std::vector<CellRank> rank_cells(const std::vector<Interval>& cells, bool higher_is_better) {
  std::vector<CellRank> out(cells.size(), CellRank::kNone);
  int best = -1;
  for (size_t i = 0; i < cells.size(); ++i) {
    if (cells[i].empty() || !std::isfinite(cells[i].mean)) continue;
    if (best < 0 ||
        (higher_is_better ? cells[i].mean > cells[best].mean : cells[i].mean < cells[best].mean)) {
      best = static_cast<int>(i);
    }
  }
  if (best < 0) return out;
  for (size_t i = 0; i < cells.size(); ++i) {
    if (cells[i].empty() || !std::isfinite(cells[i].mean)) continue;
    if (cells[i].mean == cells[best].mean) {
      out[i] = CellRank::kBest;
    } else if (overlaps(cells[i], cells[best])) {
      out[i] = CellRank::kIndistinguishable;
    }
  }
  return out;
}

}  // namespace hybridlab::report
