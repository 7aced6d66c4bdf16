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

// One variant's knock-outs of one kind: (length, layer) -> damage per analysed seed, and each
// layer's mixer type name (KnockoutResult::mixer), the prefix of each cell.
struct VariantDamage {
  const VariantCells* variant = nullptr;
  std::map<std::pair<int64_t, int64_t>, std::vector<double>> damage;
  std::map<int64_t, std::string> label;
  std::string metric;
};

// Column header of a layer index: -2 every positional hook at once, -1 the input scheme.
std::string column_name(int64_t layer) {
  if (layer == -2) return "all positions";
  if (layer == -1) return "input scheme";
  return fmt::format("layer {}", layer);
}

std::vector<VariantDamage> collect(const std::string& dir, const std::vector<VariantCells>& vs,
                                   const std::string& task, const std::string& kind) {
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
        if (k.kind != kind) continue;
        d.damage[{k.length, k.layer}].push_back(k.damage);
        d.label[k.layer] = k.mixer;
      }
    }
    if (!d.damage.empty()) out.push_back(d);
  }
  return out;
}

// The title of one kind's table.
std::string what_of(const std::string& kind) {
  if (kind == "mixer") return "zeroing each layer's mixer";
  if (kind == "position") return "removing each attention layer's position information";
  return kind + " knock-outs";
}

std::string table_at(const std::vector<VariantDamage>& rows, const std::string& kind,
                     int64_t length, bool train) {
  std::set<int64_t> layers;
  for (const auto& d : rows) {
    for (const auto& [key, v] : d.damage) {
      if (key.first == length) layers.insert(key.second);
    }
  }
  if (layers.empty()) return "";
  // Layers in depth order, then the input scheme and all positions.
  std::vector<int64_t> order;
  for (int64_t l : layers) {
    if (l >= 0) order.push_back(l);
  }
  for (int64_t l : {int64_t{-1}, int64_t{-2}}) {
    if (layers.count(l)) order.push_back(l);
  }
  // A share of the total only where the columns are parts of one whole (the mixers).
  const bool shares = kind == "mixer";
  std::string md = fmt::format(
      "\n### Damage of {} at {}{} ({} lost, mean ± 95% half-width over the analysed "
      "seeds{})\n\n| variant | n |",
      what_of(kind), length, train ? " (the training length)" : "", rows.front().metric,
      shares ? "; share of the row's total" : "");
  for (int64_t l : order) md += " " + column_name(l) + " |";
  md += "\n|---|---:|";
  for (size_t i = 0; i < order.size(); ++i) md += "---|";
  md += "\n";
  for (const auto& d : rows) {
    std::map<int64_t, Interval> cells;
    double total = 0;
    size_t n = 0;
    for (int64_t l : order) {
      const auto it = d.damage.find({length, l});
      if (it == d.damage.end()) continue;
      cells[l] = mean_interval(it->second);
      total += std::max(0.0, cells[l].mean);
      n = std::max(n, it->second.size());
    }
    md += fmt::format("| {} | {} |", row_name(*d.variant), n);
    for (int64_t l : order) {
      const auto it = cells.find(l);
      if (it == cells.end()) {
        md += " - |";
        continue;
      }
      const Interval& iv = it->second;
      const std::string& label = d.label.at(l);
      std::string cell = fmt::format("{}{:.3f}", label.empty() ? "" : label + " ", iv.mean);
      if (iv.has_interval()) cell += fmt::format(" ± {:.3f}", iv.half_width);
      if (shares && total > 0)
        cell += fmt::format(" ({:.0f}%)", 100 * std::max(0.0, iv.mean) / total);
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
    std::string tables;
    for (const char* kind : {"mixer", "position"}) {
      const std::vector<VariantDamage> rows = collect(experiment_dir, variants, task, kind);
      if (rows.empty()) continue;
      int64_t longest = 0;
      for (const auto& d : rows) {
        for (const auto& [key, v] : d.damage) longest = std::max(longest, key.first);
      }
      const int64_t train = rows.front().variant->train_length;
      tables += table_at(rows, kind, train, true);
      if (longest != train) tables += table_at(rows, kind, longest, false);
    }
    if (!tables.empty())
      md += fmt::format("\n## {}: where the damage is (knock-outs of every run)\n", task) + tables;
  }
  return md;
}

}  // namespace hybridlab::report
