// The plain-language summary of an analysis and the reach of each attention layer.

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "analysis/write.h"

namespace hybridlab::analysis {

namespace {

std::string num(double v) { return fmt::format("{:.3g}", v); }

// "256 tokens (4× the training length)".
std::string length_text(const AnalysisResult& res, int64_t L) {
  if (L == res.train_length) return fmt::format("{} tokens (the training length)", L);
  return fmt::format("{} tokens ({}× the training length)", L,
                     num(static_cast<double>(L) / static_cast<double>(res.train_length)));
}

std::vector<const KnockoutResult*> of_kind(const AnalysisResult& res, const std::string& kind) {
  std::vector<const KnockoutResult*> out;
  for (const auto& k : res.knockouts)
    if (k.kind == kind) out.push_back(&k);
  return out;
}

// The result of `rows` with the largest damage.
const KnockoutResult* worst(const std::vector<const KnockoutResult*>& rows) {
  const KnockoutResult* w = nullptr;
  for (const auto* k : rows)
    if (!w || k->damage > w->damage) w = k;
  return w;
}

std::string effect(const AnalysisResult& res, const KnockoutResult& k) {
  return fmt::format("{} {} → {} at {}", res.metric, num(k.baseline), num(k.value),
                     length_text(res, k.length));
}

std::string mixer_sentence(const AnalysisResult& res, double tol) {
  const auto rows = of_kind(res, "mixer");
  if (rows.empty()) return "";
  std::map<int64_t, std::vector<const KnockoutResult*>> by_layer;
  for (const auto* k : rows) by_layer[k->layer].push_back(k);
  std::vector<std::pair<double, int64_t>> mean_damage;  // (mean over lengths, layer)
  double total = 0;
  for (const auto& [layer, ks] : by_layer) {
    double s = 0;
    for (const auto* k : ks) s += k->damage;
    const double m = std::max(0.0, s / static_cast<double>(ks.size()));
    mean_damage.push_back({m, layer});
    total += m;
  }
  std::sort(mean_damage.rbegin(), mean_damage.rend());
  if (mean_damage.front().first <= tol) {
    return fmt::format(
        "Zeroing any one mixer costs at most {} {} on average over the lengths: no single "
        "layer's mixer is needed for this task.",
        num(mean_damage.front().first), res.metric);
  }
  const int64_t top = mean_damage.front().second;
  std::string out =
      fmt::format("Zeroing one mixer at a time, {} carries {:.0f}% of the damage ({})",
                  by_layer[top].front()->target, 100.0 * mean_damage.front().first / total,
                  effect(res, *worst(by_layer[top])));
  for (size_t i = 1; i < mean_damage.size(); ++i) {
    out += fmt::format("{} {} {:.0f}%", i + 1 == mean_damage.size() ? " and" : ",",
                       by_layer[mean_damage[i].second].front()->target,
                       100.0 * mean_damage[i].first / total);
  }
  return out + ".";
}

std::string state_sentence(const AnalysisResult& res, double tol) {
  std::map<int64_t, std::vector<const KnockoutResult*>> by_layer;
  for (const auto* k : of_kind(res, "state_reset")) by_layer[k->layer].push_back(k);
  std::string out;
  for (const auto& [layer, ks] : by_layer) {
    const KnockoutResult* w = worst(ks);
    if (w->damage <= 0) {
      out += fmt::format(" Emptying the state of {} every {} tokens costs nothing at any length.",
                         w->target, w->setting);
    } else if (w->damage <= tol) {
      out += fmt::format(" Emptying the state of {} every {} tokens costs at most {} {}.",
                         w->target, w->setting, num(w->damage), res.metric);
    } else {
      out += fmt::format(" Emptying the state of {} every {} tokens: {}.", w->target, w->setting,
                         effect(res, *w));
    }
  }
  return out;
}

std::string position_sentence(const AnalysisResult& res, double tol) {
  const auto rows = of_kind(res, "position");
  if (rows.empty()) return "";
  // "All positions" when there are several sources, else the single one.
  std::vector<const KnockoutResult*> all;
  for (const auto* k : rows)
    if (k->layer == -2) all.push_back(k);
  const bool several = !all.empty();
  if (!several) all = rows;
  const auto at = [&](int64_t L) -> const KnockoutResult* {
    for (const auto* k : all)
      if (k->length == L) return k;
    return nullptr;
  };
  const auto phrase = [&](const KnockoutResult* k) {
    if (!k) return std::string("-");
    if (std::abs(k->damage) <= tol)
      return fmt::format("costs nothing measurable at {}", length_text(res, k->length));
    return fmt::format("{} {} {} at {}", k->damage > 0 ? "costs" : "gains",
                       num(std::abs(k->damage)), res.metric, length_text(res, k->length));
  };
  const int64_t first = res.lengths.front(), last = res.lengths.back();
  std::string out = fmt::format(
      " Removing {} {}",
      several ? "all position information" : "the position information of " + all.front()->target,
      phrase(at(first)));
  if (last != first) out += " and " + phrase(at(last));
  out += ".";
  if (several) {
    std::vector<const KnockoutResult*> single;
    for (const auto* k : rows)
      if (k->layer != -2 && k->length == last) single.push_back(k);
    if (const KnockoutResult* w = worst(single); w && w->damage > tol) {
      out += fmt::format(" Alone, removing it from {} costs most: {}.", w->target, effect(res, *w));
    }
  }
  return out;
}

std::string reach_sentence(const AnalysisResult& res, double tol) {
  const std::vector<Reach> all = reaches(res, tol);
  std::string out;
  for (const Reach& r : all) {
    if (r.length != res.lengths.back()) continue;
    out += fmt::format(
        " At {}, {} needs {}.", length_text(res, r.length), r.target,
        r.whole_context
            ? "the whole context (no tried window was within " + num(tol) + ")"
            : fmt::format("a window of {} tokens (within {} {})", r.window, num(tol), res.metric));
  }
  return out;
}

}  // namespace

std::vector<Reach> reaches(const AnalysisResult& res, double tolerance) {
  std::map<std::pair<int64_t, int64_t>, Reach> by;  // (layer, length)
  for (const auto* k : of_kind(res, "reach")) {
    auto [it, fresh] = by.try_emplace({k->layer, k->length});
    Reach& r = it->second;
    if (fresh) {
      r.layer = k->layer;
      r.target = k->target;
      r.length = k->length;
      r.window = k->length;
      r.whole_context = true;
    }
    if (k->damage <= tolerance && (r.whole_context || k->setting < r.window)) {
      r.window = k->setting;
      r.whole_context = false;
    }
  }
  std::vector<Reach> out;
  for (auto& [key, r] : by) out.push_back(r);
  return out;
}

std::string summarize(const AnalysisResult& res, double tolerance) {
  std::string out = mixer_sentence(res, tolerance);
  out += state_sentence(res, tolerance);
  out += position_sentence(res, tolerance);
  out += reach_sentence(res, tolerance);
  if (!out.empty() && out.front() == ' ') out.erase(0, 1);
  return out.empty() ? "No knock-out was run." : out;
}

}  // namespace hybridlab::analysis
