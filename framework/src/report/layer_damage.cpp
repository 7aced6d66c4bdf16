// Per variant, the damage of zeroing each layer's mixer, over the seeds' analyses.

#include "report/layer_damage.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "hybridlab/analysis.h"

namespace hybridlab::report {
namespace {

// "layer 3 (attention, rope)" -> "attention".
std::string mixer_of(const std::string& target) {
  const size_t open = target.find('(');
  if (open == std::string::npos) return target;
  const size_t end = target.find_first_of(",)", open);
  return target.substr(open + 1, end == std::string::npos ? std::string::npos : end - open - 1);
}

bool trained_row(const VariantCells& v) {
  for (const auto& [k, val] : v.labels) {
    if (k == "eval" && val != "trained") return false;
  }
  return true;
}

std::string row_name(const VariantCells& v) {
  std::string s;
  for (const auto& [k, val] : v.labels) {
    if (k == "task" || k == "eval") continue;
    s += (s.empty() ? "" : " ") + k + "=" + val;
  }
  return s.empty() ? v.variant : s;
}

// One variant's mixer knock-outs: (length, layer) -> damage per analysed seed, and each layer's
// mixer name.
struct VariantDamage {
  const VariantCells* variant = nullptr;
  std::map<std::pair<int64_t, int64_t>, std::vector<double>> damage;
  std::map<int64_t, std::string> mixer;
  std::string metric;
};

std::vector<VariantDamage> collect(const std::string& dir, const std::vector<VariantCells>& vs,
                                   const std::string& task) {
  std::vector<VariantDamage> out;
  for (const VariantCells& v : vs) {
    if (v.task != task || !trained_row(v)) continue;
    VariantDamage d;
    d.variant = &v;
    for (const RunData* r : v.runs) {
      const std::optional<AnalysisResult> a =
          read_analysis((std::filesystem::path(dir) / r->folder).string());
      if (!a) continue;
      d.metric = a->metric;
      for (const KnockoutResult& k : a->knockouts) {
        if (k.kind != "mixer") continue;
        d.damage[{k.length, k.layer}].push_back(k.damage);
        d.mixer[k.layer] = mixer_of(k.target);
      }
    }
    if (!d.damage.empty()) out.push_back(d);
  }
  return out;
}

std::string table_at(const std::vector<VariantDamage>& rows, int64_t length, bool train) {
  std::set<int64_t> layers;
  for (const auto& d : rows) {
    for (const auto& [key, v] : d.damage) {
      if (key.first == length) layers.insert(key.second);
    }
  }
  if (layers.empty()) return "";
  std::string md = fmt::format(
      "\n### Damage of zeroing each layer's mixer at {}{} ({} lost, mean ± 95% half-width over "
      "the analysed seeds; share of the row's total)\n\n| variant | n |",
      length, train ? " (the training length)" : "", rows.front().metric);
  for (int64_t l : layers) md += fmt::format(" layer {} |", l);
  md += "\n|---|---:|";
  for (size_t i = 0; i < layers.size(); ++i) md += "---|";
  md += "\n";
  for (const auto& d : rows) {
    std::map<int64_t, Interval> cells;
    double total = 0;
    size_t n = 0;
    for (int64_t l : layers) {
      const auto it = d.damage.find({length, l});
      if (it == d.damage.end()) continue;
      cells[l] = mean_interval(it->second);
      total += std::max(0.0, cells[l].mean);
      n = std::max(n, it->second.size());
    }
    md += fmt::format("| {} | {} |", row_name(*d.variant), n);
    for (int64_t l : layers) {
      const auto it = cells.find(l);
      if (it == cells.end()) {
        md += " - |";
        continue;
      }
      const Interval& iv = it->second;
      std::string cell = fmt::format("{} {:.3f}", d.mixer.at(l), iv.mean);
      if (iv.has_interval()) cell += fmt::format(" ± {:.3f}", iv.half_width);
      if (total > 0) cell += fmt::format(" ({:.0f}%)", 100 * std::max(0.0, iv.mean) / total);
      md += " " + cell + " |";
    }
    md += "\n";
  }
  return md;
}

}  // namespace

std::string layer_damage_tables(const std::string& experiment_dir,
                                const std::vector<VariantCells>& variants) {
  std::vector<std::string> tasks;
  for (const auto& v : variants) {
    if (std::find(tasks.begin(), tasks.end(), v.task) == tasks.end()) tasks.push_back(v.task);
  }
  std::string md;
  for (const std::string& task : tasks) {
    const std::vector<VariantDamage> rows = collect(experiment_dir, variants, task);
    if (rows.empty()) continue;
    int64_t longest = 0;
    for (const auto& d : rows) {
      for (const auto& [key, v] : d.damage) longest = std::max(longest, key.first);
    }
    const int64_t train = rows.front().variant->train_length;
    md += fmt::format("\n## {}: where the damage is (knock-outs of every run)\n", task);
    md += table_at(rows, train, true);
    if (longest != train) md += table_at(rows, longest, false);
  }
  return md;
}

}  // namespace hybridlab::report
