// RUN_DIR/analysis/: CSV tables, summary.md and plots.

#include <fmt/format.h>
#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>

#include "analysis/write.h"
#include "plot/csv.h"
#include "plot/gnuplot.h"
#include "util/atomic_file.h"

namespace hybridlab::analysis {

namespace fs = std::filesystem;

namespace {

using plot::format_number;

std::string str(int64_t v) { return std::to_string(v); }

// Rows in first-seen order, one column per length: the value of each (row, length), NaN where
// none was measured.
struct Grid {
  std::vector<std::string> rows;
  std::map<std::pair<std::string, int64_t>, double> cells;
  void add(const std::string& row, int64_t length, double v) {
    if (std::find(rows.begin(), rows.end(), row) == rows.end()) rows.push_back(row);
    cells[{row, length}] = v;
  }
  torch::Tensor matrix(const std::vector<int64_t>& lengths) const {
    torch::Tensor m =
        torch::full({static_cast<int64_t>(rows.size()), static_cast<int64_t>(lengths.size())}, NAN,
                    torch::kDouble);
    for (size_t r = 0; r < rows.size(); ++r) {
      for (size_t c = 0; c < lengths.size(); ++c) {
        auto it = cells.find({rows[r], lengths[c]});
        if (it != cells.end()) m[static_cast<int64_t>(r)][static_cast<int64_t>(c)] = it->second;
      }
    }
    return m;
  }
};

std::string markdown_grid(const Grid& g, const std::vector<int64_t>& lengths) {
  if (g.rows.empty()) return "";
  std::string md = "| |";
  for (int64_t L : lengths) md += fmt::format(" {} |", L);
  md += "\n|---|";
  for (size_t i = 0; i < lengths.size(); ++i) md += "---:|";
  md += "\n";
  for (const auto& row : g.rows) {
    md += "| " + row + " |";
    for (int64_t L : lengths) {
      auto it = g.cells.find({row, L});
      md += it == g.cells.end() ? " - |" : fmt::format(" {:.3g} |", it->second);
    }
    md += "\n";
  }
  return md;
}

}  // namespace

namespace {

// What the tables feed to summary.md and the plots.
struct AnalysisGrids {
  std::map<std::string, Grid> damage;  // knock-out kind -> grid (reach rows are their own)
  Grid reach;
  Grid distance;                                                      // attention heads
  std::map<int64_t, std::vector<const HeadStats*>> norms_at_longest;  // layer -> heads
};

// knockouts.csv and reach.csv.
void write_knockout_tables(const AnalysisResult& res, double tolerance,
                           const std::function<std::string(const std::string&)>& path,
                           AnalysisGrids& g) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& k : res.knockouts) {
    rows.push_back({k.kind, str(k.layer), k.target, str(k.setting), str(k.length),
                    format_number(k.baseline), format_number(k.value), format_number(k.damage),
                    k.mixer});
    if (k.kind != "reach") g.damage[k.kind].add(k.target, k.length, k.damage);
  }
  plot::write_csv(
      path("knockouts.csv"),
      {"kind", "layer", "target", "setting", "length", "baseline", "value", "damage", "mixer"},
      rows);
  rows.clear();
  for (const Reach& r : reaches(res, tolerance)) {
    rows.push_back(
        {str(r.layer), r.target, str(r.length), str(r.window), r.whole_context ? "true" : "false"});
    g.reach.add(r.target, r.length, static_cast<double>(r.window));
  }
  plot::write_csv(path("reach.csv"), {"layer", "target", "length", "reach", "whole_context"}, rows);
}

// heads_attention.csv, one heads_<mixer>.csv per gated recurrent mixer type
// (heads_gated_deltanet.csv, heads_kda.csv, ...) and state_norms.csv.
void write_head_tables(const AnalysisResult& res,
                       const std::function<std::string(const std::string&)>& path,
                       AnalysisGrids& g) {
  std::vector<std::vector<std::string>> att_rows, norm_rows;
  std::map<std::string, std::vector<std::vector<std::string>>> gate_rows;  // by mixer type
  for (const HeadStats& h : res.heads) {
    if (h.kind == HeadStatsKind::kAttentionWeights) {
      att_rows.push_back({str(h.layer), str(h.head), str(h.length), format_number(h.mean_distance),
                          format_number(h.entropy), format_number(h.sink_mass),
                          format_number(h.local_mass)});
      g.distance.add(fmt::format("layer {} head {}", h.layer, h.head), h.length, h.mean_distance);
      continue;
    }
    gate_rows[h.mixer].push_back({str(h.layer), str(h.head), str(h.length),
                                  format_number(h.mean_alpha), format_number(h.memory_length),
                                  format_number(h.mean_beta)});
    for (size_t i = 0; i < h.state_norms.size(); ++i) {
      norm_rows.push_back({str(h.layer), str(h.head), str(h.length), str(h.state_positions[i]),
                           format_number(h.state_norms[i])});
    }
    if (h.length == res.lengths.back()) g.norms_at_longest[h.layer].push_back(&h);
  }
  plot::write_csv(
      path("heads_attention.csv"),
      {"layer", "head", "length", "mean_distance", "entropy_nats", "sink_mass", "local_mass_16"},
      att_rows);
  for (const auto& [mixer, rows] : gate_rows) {
    plot::write_csv(path("heads_" + mixer + ".csv"),
                    {"layer", "head", "length", "mean_alpha", "memory_length", "mean_beta"}, rows);
  }
  plot::write_csv(path("state_norms.csv"), {"layer", "head", "length", "position", "state_norm"},
                  norm_rows);
}

std::string summary_markdown(const AnalysisResult& res, double tolerance, const AnalysisGrids& g) {
  std::string md = fmt::format(
      "# Analysis of {}\n\nTask {}, metric {} ({} is better), trained at {} tokens; {:.0f} s.\n\n"
      "{}\n",
      res.run, res.task, res.metric, res.higher_is_better ? "higher" : "lower", res.train_length,
      res.seconds, res.summary);
  for (const auto& [kind, grid] : g.damage) {
    md += fmt::format("\n## Damage of the {} knock-out ({} lost; columns: length)\n\n", kind,
                      res.metric) +
          markdown_grid(grid, res.lengths);
  }
  if (!g.reach.rows.empty()) {
    md += fmt::format("\n## Reach: smallest window within {} {} (the length itself: none was)\n\n",
                      format_number(tolerance), res.metric) +
          markdown_grid(g.reach, res.lengths);
  }
  return md;
}

// The recurrent layers' state norm along the longest length, averaged over each layer's heads.
void plot_state_norms(const AnalysisResult& res, const AnalysisGrids& g, const std::string& file) {
  plot::LinePlot lp;
  lp.title = fmt::format("recurrent state norm at {} tokens (mean over heads)", res.lengths.back());
  lp.xlabel = "position (tokens seen)";
  lp.ylabel = "Frobenius norm of the state";
  for (const auto& [layer, heads] : g.norms_at_longest) {
    plot::Series s;
    s.title = fmt::format("layer {}", layer);
    for (size_t i = 0; i < heads.front()->state_norms.size(); ++i) {
      double sum = 0;
      for (const auto* h : heads) sum += h->state_norms[i];
      s.x.push_back(static_cast<double>(heads.front()->state_positions[i]));
      s.y.push_back(sum / static_cast<double>(heads.size()));
    }
    lp.series.push_back(s);
  }
  plot::plot_lines(lp, file);
}

void write_analysis_plots(const AnalysisResult& res, const AnalysisGrids& g,
                          const std::function<std::string(const std::string&)>& path) {
  std::vector<std::string> xt;
  for (int64_t L : res.lengths) xt.push_back(str(L));
  for (const auto& [kind, grid] : g.damage) {
    plot::plot_heatmap(grid.matrix(res.lengths),
                       fmt::format("{} knock-out: {} lost", kind, res.metric), "eval length", "",
                       path("knockout_" + kind + ".png"), xt, grid.rows);
  }
  if (!g.reach.rows.empty()) {
    plot::plot_heatmap(g.reach.matrix(res.lengths).log2(),
                       "reach: log2 of the smallest sufficient window (tokens)", "eval length", "",
                       path("reach.png"), xt, g.reach.rows);
  }
  if (!g.distance.rows.empty()) {
    plot::plot_heatmap(g.distance.matrix(res.lengths), "mean attention distance (tokens)",
                       "eval length", "", path("attention_distance.png"), xt, g.distance.rows);
  }
  if (!g.norms_at_longest.empty()) plot_state_norms(res, g, path("state_norms.png"));
}

}  // namespace

std::vector<std::string> write_analysis(const std::string& dir, const AnalysisResult& res,
                                        double tolerance, bool plots) {
  std::vector<std::string> files;
  const std::function<std::string(const std::string&)> path = [&](const std::string& name) {
    files.push_back((fs::path(dir) / name).string());
    return files.back();
  };
  AnalysisGrids grids;
  write_knockout_tables(res, tolerance, path, grids);
  write_head_tables(res, path, grids);
  write_file_atomic(path("summary.md"), summary_markdown(res, tolerance, grids));
  files.push_back(write_record(dir, res));
  if (plots && plot::gnuplot_available()) write_analysis_plots(res, grids, path);
  return files;
}

}  // namespace hybridlab::analysis
