// RUN_DIR/analysis/analysis.json: the typed record of an analysis, read back by reports and by
// the analysis of a whole experiment.

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "analysis/write.h"
#include "util/atomic_file.h"

namespace hybridlab {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

json options_json(const AnalyzeOptions& o) {
  return {{"kinds", o.kinds},           {"lengths", o.lengths},
          {"examples", o.examples},     {"state_window", o.state_window},
          {"windows", o.reach_windows}, {"tolerance", o.reach_tolerance}};
}

AnalyzeOptions options_of(const json& j) {
  AnalyzeOptions o;
  o.kinds = j.value("kinds", std::vector<std::string>{});
  o.lengths = j.value("lengths", std::vector<int64_t>{});
  o.examples = j.value("examples", int64_t{0});
  o.state_window = j.value("state_window", int64_t{0});
  o.reach_windows = j.value("windows", std::vector<int64_t>{});
  o.reach_tolerance = j.value("tolerance", o.reach_tolerance);
  return o;
}

// Records written before KnockoutResult::mixer existed name the mixer only inside the target
// label, "layer 3 (attention, rope)": the text up to the first ',' or ')' after the '('.
std::string mixer_in_label(const KnockoutResult& k) {
  const size_t open = k.target.find('(');
  if (k.layer < 0 || open == std::string::npos) return "";
  const size_t end = k.target.find_first_of(",)", open);
  return k.target.substr(open + 1, end == std::string::npos ? std::string::npos : end - open - 1);
}

}  // namespace

namespace analysis {

std::string write_record(const std::string& dir, const AnalysisResult& res) {
  json knockouts = json::array();
  for (const KnockoutResult& k : res.knockouts) {
    knockouts.push_back({{"kind", k.kind},
                         {"layer", k.layer},
                         {"target", k.target},
                         {"setting", k.setting},
                         {"length", k.length},
                         {"baseline", k.baseline},
                         {"value", k.value},
                         {"damage", k.damage},
                         {"mixer", k.mixer}});
  }
  const json j = {{"options", options_json(res.options)},
                  {"task", res.task},
                  {"metric", res.metric},
                  {"higher_is_better", res.higher_is_better},
                  {"train_length", res.train_length},
                  {"lengths", res.lengths},
                  {"knockouts", knockouts},
                  {"summary", res.summary},
                  {"seconds", res.seconds}};
  const std::string path = (fs::path(dir) / "analysis.json").string();
  write_file_atomic(path, j.dump(2) + "\n");
  return path;
}

}  // namespace analysis

std::optional<AnalysisResult> read_analysis(const std::string& run_dir) {
  std::ifstream in(fs::path(run_dir) / "analysis" / "analysis.json");
  if (!in) return std::nullopt;
  try {
    const json j = json::parse(in);
    AnalysisResult r;
    r.run = run_dir;
    r.options = options_of(j.value("options", json::object()));
    r.task = j.value("task", "");
    r.metric = j.value("metric", "");
    r.higher_is_better = j.value("higher_is_better", true);
    r.train_length = j.value("train_length", int64_t{0});
    r.lengths = j.value("lengths", std::vector<int64_t>{});
    for (const json& k : j.value("knockouts", json::array())) {
      KnockoutResult r_k{k.value("kind", ""),           k.value("layer", int64_t{-1}),
                         k.value("target", ""),         k.value("setting", int64_t{0}),
                         k.value("length", int64_t{0}), k.value("baseline", 0.0),
                         k.value("value", 0.0),         k.value("damage", 0.0),
                         k.value("mixer", "")};
      if (!k.contains("mixer")) r_k.mixer = mixer_in_label(r_k);
      r.knockouts.push_back(std::move(r_k));
    }
    r.summary = j.value("summary", "");
    r.seconds = j.value("seconds", 0.0);
    return r;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::string analysis_summary(const std::string& run_dir) {
  const std::optional<AnalysisResult> r = read_analysis(run_dir);
  return r ? r->summary : "";
}

bool same_measurements(const AnalyzeOptions& a, const AnalyzeOptions& b) {
  return options_json(a) == options_json(b);
}

}  // namespace hybridlab
