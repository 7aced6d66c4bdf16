// summary.md's tables and sections (report/report_parts.h): the header, one table per task,
// tuning, and the closing sections (seeds that split, runs without results, layer damage,
// knock-out analyses).

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "hybridlab/analysis.h"
#include "report/layer_damage.h"
#include "report/report_parts.h"

namespace hybridlab::report {
namespace fs = std::filesystem;

std::string markdown_header(const fs::path& dir, const std::vector<ReportRow>& runs) {
  // Titled by the folder's own name, also for `report .` or a trailing slash.
  std::string md = fmt::format("# {}\n\n", fs::weakly_canonical(dir).filename().string());
  std::map<std::string, int64_t> states;
  for (const auto& r : runs) ++states[r.state];
  std::string counts;
  for (const auto& [s, c] : states)
    counts += (counts.empty() ? "" : ", ") + fmt::format("{} {}", c, s);
  md += fmt::format("{} runs: {}.\n", runs.size(), counts);
  md +=
      "\nCells: mean ± half-width of the 95% confidence interval over the n seeds of a variant "
      "(Student t, n−1 degrees of freedom; n = 1: the single value, no interval). **Bold**: the "
      "best mean of its column; ≈: its interval overlaps the best one's (indistinguishable from "
      "it); (n=k): the cell holds fewer seeds than its row. Health: "
      "docs/experiments.md#run-health.\n";
  return md;
}

std::vector<TaskView> task_views(const std::vector<VariantCells>& variants) {
  std::vector<TaskView> views;
  for (const auto& v : variants) {
    auto it = std::find_if(views.begin(), views.end(),
                           [&](const TaskView& t) { return t.task == v.task; });
    if (it == views.end()) {
      views.push_back(TaskView{v.task, {}, {}, {}, v.primary, v.higher_is_better});
      it = views.end() - 1;
    }
    it->variants.push_back(&v);
    for (const auto& [key, iv] : v.cells) it->lengths.insert(key.second);
    it->train_lengths.insert(v.train_length);
  }
  return views;
}

std::string task_table(const TaskView& view) {
  const std::string& task = view.task;
  const std::vector<const VariantCells*>& tv = view.variants;
  const std::set<int64_t>& lens = view.lengths;
  const std::set<int64_t>& train_lens = view.train_lengths;
  const std::string& metric = view.metric;
  const bool higher = view.higher_is_better;
  std::string tl;
  for (int64_t L : train_lens) tl += (tl.empty() ? "" : ", ") + std::to_string(L);
  bool any_tuned = false;
  for (const auto* v : tv) any_tuned |= !v->chosen.empty();
  std::string md;
  md += fmt::format("\n## {}: {} ({} is better; trained at length {})\n\n", task, metric,
                    higher ? "higher" : "lower", tl);
  md += "| variant | n |";
  for (int64_t L : lens) md += fmt::format(" {}{} |", L, train_lens.count(L) ? " (train)" : "");
  if (any_tuned) md += " tuned |";
  md += " health |\n|---|---:|";
  for (size_t i = 0; i < lens.size(); ++i) md += "---:|";
  if (any_tuned) md += "---|";
  md += "---|\n";
  std::map<int64_t, std::vector<CellRank>> ranks;
  for (int64_t L : lens) {
    std::vector<Interval> column;
    for (const auto* v : tv) column.push_back(v->cell(metric, L));
    ranks[L] = rank_cells(column, higher);
  }
  for (size_t i = 0; i < tv.size(); ++i) {
    const auto* v = tv[i];
    md += fmt::format("| {} | {} |", row_label(v->labels, v->variant), v->runs.size());
    for (int64_t L : lens) {
      const Interval iv = v->cell(metric, L);
      std::string cell = interval_text(iv);
      // A length evaluated on fewer seeds than the row has (e.g. `eval --lengths` on one run).
      if (!iv.empty() && iv.n != static_cast<int64_t>(v->runs.size()))
        cell += fmt::format(" (n={})", iv.n);
      switch (ranks[L][i]) {
        case CellRank::kBest:
          md += " **" + cell + "** |";
          break;
        case CellRank::kIndistinguishable:
          md += " ≈ " + cell + " |";
          break;
        case CellRank::kNone:
          md += " " + cell + " |";
          break;
      }
    }
    if (any_tuned) {
      std::string t;
      for (const auto& [k, val] : v->chosen) {
        t += (t.empty() ? "" : ", ") + k + "=" + val +
             (v->chosen_at_edge.count(k) ? " (edge of grid)" : "");
      }
      md += " " + (t.empty() ? "-" : t) + " |";
    }
    md += " " + v->health_text() + " |\n";
  }
  return md;
}

std::string best_seed_table(const TaskView& view) {
  bool several = false;
  for (const auto* v : view.variants) several |= v->runs.size() >= 2;
  if (!several) return "";
  std::string md = fmt::format(
      "\n### {}: best seed of n ({})\n\nThe best single run of each variant, for comparison "
      "with sources that report the best of n runs; the table above gives the mean and the "
      "claims judge it.\n\n| variant | n |",
      view.task, view.metric);
  for (int64_t L : view.lengths) md += fmt::format(" {} |", L);
  md += "\n|---|---:|";
  for (size_t i = 0; i < view.lengths.size(); ++i) md += "---:|";
  md += "\n";
  for (const auto* v : view.variants) {
    md += fmt::format("| {} | {} |", row_label(v->labels, v->variant), v->runs.size());
    for (int64_t L : view.lengths) {
      const RunData* best = nullptr;
      for (const RunData* r : v->runs) {
        const double x = r->value(view.metric, L);
        if (!std::isfinite(x)) continue;
        const double b = best ? best->value(view.metric, L) : 0;
        if (!best || (view.higher_is_better ? x > b : x < b)) best = r;
      }
      const std::string seed = best ? best->label("seed") : "";
      md += best ? fmt::format(" {}{} |", fmt_value(best->value(view.metric, L)),
                               seed.empty() ? "" : " (seed " + seed + ")")
                 : " - |";
    }
    md += "\n";
  }
  return md;
}

std::string tuning_section(const std::vector<VariantCells>& variants) {
  std::string tuning;
  for (const auto& v : variants) {
    if (v.tuning_scores.empty()) continue;
    std::string cells;
    for (const auto& [text, score] : v.tuning_scores) {
      std::string chosen;
      for (const auto& [k, val] : v.chosen) chosen += (chosen.empty() ? "" : ", ") + k + "=" + val;
      cells += (cells.empty() ? "" : "; ") + text + ": " +
               (std::isfinite(score) ? fmt_value(score) : "-") +
               (text == chosen ? " (chosen)" : "");
    }
    std::string edge;
    for (const auto& k : v.chosen_at_edge) edge += (edge.empty() ? "" : ", ") + k;
    tuning +=
        fmt::format("| {} | {} | {} |\n", row_label(v.labels, v.variant), cells,
                    edge.empty() ? "-" : "best at the edge of the " + edge + " grid: widen it");
  }
  if (tuning.empty()) return "";
  return "\n## Tuning\n\nEach variant keeps the value with the best mean " +
         std::string(
             "validation score (primary metric at the training length on the validation "
             "split, disjoint from the scored eval sets).\n\n| variant | validation score "
             "per value | edge |\n|---|---|---|\n") +
         tuning;
}

std::string closing_sections(const fs::path& dir, const std::vector<ReportRow>& runs,
                             const std::vector<VariantCells>& variants) {
  std::string md;
  std::string splits;
  for (const auto& v : variants) {
    if (v.split.split())
      splits += fmt::format("- {}: {}\n", row_label(v.labels, v.variant), v.split_note());
  }
  if (!splits.empty()) {
    md +=
        "\n## Seeds that split\n\nOne seed of each variant below left the learning plateau "
        "and another did not; the mean describes neither. Run more seeds, a longer schedule "
        "or a recipe that leaves the plateau on every seed (docs/experiments.md#run-health).\n\n" +
        splits;
  }
  std::string failed;
  for (const auto& r : runs) {
    if (r.state != "finished" && r.state != "new") {
      failed +=
          fmt::format("- {} ({}): {}\n", r.name, r.state, r.error.substr(0, r.error.find('\n')));
    }
  }
  if (!failed.empty()) md += "\n## Runs without results\n\n" + failed;
  // Knock-out analyses of single runs (`hybridlab analyze`), each in its own words.
  std::string analyses;
  for (const auto& r : runs) {
    const std::string text = analysis_summary((dir / r.name).string());
    if (!text.empty())
      analyses +=
          fmt::format("- {} ([details]({}/analysis/summary.md)): {}\n", r.name, r.name, text);
  }
  md += layer_damage_tables(dir.string(), variants);
  if (!analyses.empty()) md += "\n## Analysis (knock-outs of trained runs)\n\n" + analyses;
  return md;
}

}  // namespace hybridlab::report
