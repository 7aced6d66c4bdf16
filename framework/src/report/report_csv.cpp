// summary.csv (one row per run) and summary_by_variant.csv (one row per variant, mean and 95%
// half-width per cell) of a report (report/report_parts.h).

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "plot/csv.h"
#include "plot/gnuplot.h"
#include "report/report_parts.h"

namespace hybridlab::report {
namespace {

// The header names of the sweep's label columns: a label named like one of the file's own columns
// (a sweep over `task` or `train.steps` labels its runs "task" and "steps") is written as
// "sweep_<label>", so that every column has one name and a reader keyed by name finds both.
std::vector<std::string> label_columns(const std::vector<std::string>& labels,
                                       std::initializer_list<const char*> fixed) {
  std::vector<std::string> out;
  for (const std::string& k : labels) {
    const bool taken =
        std::any_of(fixed.begin(), fixed.end(), [&k](const char* f) { return k == f; });
    out.push_back(taken ? "sweep_" + k : k);
  }
  return out;
}

constexpr std::initializer_list<const char*> kRunColumns = {
    "run",  "task", "state", "health", "params", "steps", "final_train_loss", "train_tokens_per_s",
    "error"};

}  // namespace

void write_runs_csv(const std::string& path, const ReportInput& in,
                    const std::vector<VariantCells>& groups, const MetricColumns& columns) {
  const std::vector<RunData>& data = in.data;
  // Health of each run, by name (the variant holds it per run).
  std::map<std::string, std::string> run_health;
  for (const auto& v : groups) {
    for (size_t i = 0; i < v.runs.size(); ++i) run_health[v.runs[i]->name] = v.health[i].text();
  }
  std::vector<std::string> label_keys;
  for (const auto& r : data) {
    for (const auto& [k, v] : r.labels) {
      if (std::find(label_keys.begin(), label_keys.end(), k) == label_keys.end())
        label_keys.push_back(k);
    }
  }
  std::vector<std::string> header = {"run"};
  for (const std::string& k : label_columns(label_keys, kRunColumns)) header.push_back(k);
  for (const char* h : kRunColumns)
    if (std::string(h) != "run") header.push_back(h);
  for (const auto& [m, L] : columns) header.push_back(fmt::format("{}@{}", m, L));
  std::vector<std::vector<std::string>> rows;
  for (size_t i = 0; i < data.size(); ++i) {
    const ReportRow& r = in.runs[in.row_of[i]];
    std::vector<std::string> row = {data[i].name};
    for (const auto& k : label_keys) row.push_back(data[i].label(k));
    const TrainRecord* train = r.results && r.results->train ? &*r.results->train : nullptr;
    row.push_back(data[i].task);
    row.push_back(r.state);
    row.push_back(run_health.count(data[i].name) ? run_health[data[i].name] : "");
    row.push_back(r.results ? std::to_string(r.results->params) : "");
    row.push_back(train ? std::to_string(train->steps) : "");
    row.push_back(train ? plot::format_number(train->final_loss) : "");
    row.push_back(train ? fmt::format("{:.0f}", train->tokens_per_s) : "");
    row.push_back(data[i].error);
    for (const auto& [m, L] : columns) {
      // A recorded NaN or Inf is written as such ("nan", "inf"); a missing value is empty.
      const auto at = data[i].eval.find(L);
      const bool recorded = at != data[i].eval.end() && at->second.count(m);
      row.push_back(recorded ? plot::format_number(data[i].value(m, L)) : "");
    }
    rows.push_back(row);
  }
  plot::write_csv(path, header, rows);
}

void write_variants_csv(const std::string& path, const std::vector<VariantCells>& variants,
                        const MetricColumns& columns) {
  std::vector<std::string> vlabel_keys, tuned_keys;
  for (const auto& v : variants) {
    for (const auto& [k, x] : v.labels) {
      if (std::find(vlabel_keys.begin(), vlabel_keys.end(), k) == vlabel_keys.end())
        vlabel_keys.push_back(k);
    }
    for (const auto& [k, x] : v.chosen) {
      if (std::find(tuned_keys.begin(), tuned_keys.end(), k) == tuned_keys.end())
        tuned_keys.push_back(k);
    }
  }
  std::vector<std::string> vheader = {"variant"};
  for (const std::string& k : label_columns(vlabel_keys, {"variant", "task", "n", "health"}))
    vheader.push_back(k);
  for (const char* h : {"task", "n", "health"}) vheader.push_back(h);
  for (const auto& k : tuned_keys) {
    vheader.push_back("best_" + k);
    vheader.push_back("best_" + k + "_at_edge");
  }
  for (const auto& [m, L] : columns) {
    vheader.push_back(fmt::format("{}@{}", m, L));
    vheader.push_back(fmt::format("{}@{}_ci95", m, L));
  }
  std::vector<std::vector<std::string>> vrows;
  for (const auto& v : variants) {
    std::vector<std::string> row = {v.variant};
    for (const auto& k : vlabel_keys) {
      std::string val;
      for (const auto& [lk, lv] : v.labels)
        if (lk == k) val = lv;
      row.push_back(val);
    }
    row.push_back(v.task);
    row.push_back(std::to_string(v.runs.size()));
    row.push_back(v.health_text());
    for (const auto& k : tuned_keys) {
      std::string val;
      for (const auto& [ck, cv] : v.chosen)
        if (ck == k) val = cv;
      row.push_back(val);
      row.push_back(val.empty() ? "" : v.chosen_at_edge.count(k) ? "yes" : "no");
    }
    for (const auto& [m, L] : columns) {
      const Interval iv = v.cell(m, L);
      row.push_back(iv.empty() && iv.non_finite == 0 ? "" : plot::format_number(iv.mean));
      row.push_back(iv.has_interval() ? plot::format_number(iv.half_width) : "");
    }
    vrows.push_back(row);
  }
  plot::write_csv(path, vheader, vrows);
}

}  // namespace hybridlab::report
