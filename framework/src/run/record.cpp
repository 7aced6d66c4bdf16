// RunFolder: the one reader and writer of status.json, run.json, source.yaml, config.yaml and
// results.json. JSON stays inside this file; every other module sees the typed record.

#include <c10/util/hash.h>
#include <fmt/format.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "hybridlab/run_record.h"
#include "run/json_number.h"
#include "util/atomic_file.h"

namespace hybridlab {
namespace fs = std::filesystem;
using json = nlohmann::json;

RunBusy::~RunBusy() = default;

namespace {

constexpr RunState kStates[] = {RunState::kNew,      RunState::kRunning, RunState::kTrained,
                                RunState::kFinished, RunState::kFailed,  RunState::kInterrupted};

json labels_json(const std::vector<std::pair<std::string, std::string>>& labels) {
  json j = json::object();
  for (const auto& [k, v] : labels) j[k] = v;
  return j;
}

std::vector<std::pair<std::string, std::string>> labels_of(const json& j) {
  std::vector<std::pair<std::string, std::string>> out;
  if (!j.is_object()) return out;
  for (const auto& [k, v] : j.items())
    out.emplace_back(k, v.is_string() ? v.get<std::string>() : v.dump());
  return out;
}

// The digest run.json keeps of source.yaml: an edit after the run was written is noticed
// before a model is built from it.
std::string source_digest(const std::string& source_yaml) { return c10::sha1(source_yaml).str(); }

using Tuned = std::vector<std::pair<std::string, std::vector<std::string>>>;

json tuned_json(const Tuned& tuned) {
  json j = json::object();
  for (const auto& [k, grid] : tuned) j[k] = grid;
  return j;
}

Tuned tuned_of(const json& j) {
  Tuned out;
  if (!j.is_object()) return out;
  for (const auto& [k, grid] : j.items()) out.emplace_back(k, grid.get<std::vector<std::string>>());
  return out;
}

json lengths_json(const std::vector<LengthResult>& results) {
  json j = json::object();
  for (const auto& l : results) {
    json m = {{"examples", l.examples}};
    // Only the non-default scoring is written: teacher-forced results read as before.
    if (l.scoring != "teacher_forced") m["scoring"] = l.scoring;
    for (const auto& [k, v] : l.metrics) m[k] = number_json(v);
    j[std::to_string(l.length)] = m;
  }
  return j;
}

// {"<length>": curve} of one per-position curve of `results` (position_loss or
// position_accuracy), lengths without one left out.
json positions_json(const std::vector<LengthResult>& results,
                    std::vector<double> LengthResult::*curve) {
  json j = json::object();
  for (const auto& l : results) {
    if (!(l.*curve).empty()) j[std::to_string(l.length)] = numbers_json(l.*curve);
  }
  return j;
}

// Writes both per-position curves of `results` into `j` (when any length has them).
void put_positions(json& j, const std::vector<LengthResult>& results) {
  if (const json p = positions_json(results, &LengthResult::position_loss); !p.empty())
    j["position_loss"] = p;
  if (const json p = positions_json(results, &LengthResult::position_accuracy); !p.empty())
    j["position_accuracy"] = p;
}

// {"<length>": {"examples": n, metric: value, ...}} -> results in ascending length, with the
// per-position curves of `holder` ("position_loss", "position_accuracy"), when it has them.
std::vector<LengthResult> lengths_of(const json& j, const json& holder = json::object()) {
  const json pos = holder.value("position_loss", json::object());
  const json acc = holder.value("position_accuracy", json::object());
  std::vector<LengthResult> out;
  for (const auto& [len, metrics] : j.items()) {
    LengthResult lr;
    lr.length = std::stoll(len);
    for (const auto& [k, v] : metrics.items()) {
      if (k == "examples")
        lr.examples = v.get<int64_t>();
      else if (k == "scoring")
        lr.scoring = v.get<std::string>();
      else
        lr.metrics[k] = number_of(v);
    }
    if (pos.contains(len)) lr.position_loss = numbers_of(pos[len]);
    if (acc.contains(len)) lr.position_accuracy = numbers_of(acc[len]);
    out.push_back(lr);
  }
  std::sort(out.begin(), out.end(),
            [](const LengthResult& a, const LengthResult& b) { return a.length < b.length; });
  return out;
}

std::optional<json> read_json(const fs::path& p) {
  if (!path_present(p.string())) return std::nullopt;
  return json::parse(read_plain_file(p.string()));
}

}  // namespace

std::string run_state_name(RunState s) {
  switch (s) {
    case RunState::kNew:
      return "new";
    case RunState::kRunning:
      return "running";
    case RunState::kTrained:
      return "trained";
    case RunState::kFinished:
      return "finished";
    case RunState::kFailed:
      return "failed";
    case RunState::kInterrupted:
      return "interrupted";
  }
  return "new";
}

std::string metrics_line(const MetricsRow& row) {
  json j = {{"step", row.step}};
  if (row.has_loss) {
    j["loss"] = row.loss;  // NaN dumps as null
    j["lr"] = row.lr;
    j["grad_norm"] = row.grad_norm;
    j["tokens_per_s"] = row.tokens_per_s;
    j["time_s"] = row.time_s;
    if (row.ranks > 0) {
      j["ranks"] = row.ranks;
      j["allreduce_wait_s"] = row.allreduce_wait_s;
    }
  }
  if (row.eval_length > 0) {
    j["eval_length"] = row.eval_length;
    for (const auto& [name, value] : row.eval) j["eval_" + name] = value;
  }
  return j.dump();
}

namespace {

double number(const json& j, const char* key) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : 0.0;
}

}  // namespace

std::vector<MetricsRow> read_metrics(const std::string& path) {
  std::vector<MetricsRow> rows;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    try {
      const json j = json::parse(line);
      if (!j.is_object()) continue;
      MetricsRow r;
      r.step = j.value("step", int64_t{0});
      r.has_loss = j.contains("loss");
      if (r.has_loss) r.loss = j["loss"].is_number() ? j["loss"].get<double>() : NAN;
      r.lr = number(j, "lr");
      r.grad_norm = number(j, "grad_norm");
      r.tokens_per_s = number(j, "tokens_per_s");
      r.time_s = number(j, "time_s");
      r.ranks = static_cast<int64_t>(number(j, "ranks"));
      r.allreduce_wait_s = number(j, "allreduce_wait_s");
      r.eval_length = static_cast<int64_t>(number(j, "eval_length"));
      for (const auto& [key, value] : j.items()) {
        if (key.rfind("eval_", 0) == 0 && key != "eval_length" && value.is_number())
          r.eval[key.substr(5)] = value.get<double>();
      }
      r.line = line;
      rows.push_back(std::move(r));
    } catch (const std::exception&) {
      continue;  // a half-written last line
    }
  }
  return rows;
}

RunFolder::RunFolder(std::string dir) : dir_(std::move(dir)) {}

std::string RunFolder::metrics_path() const { return (fs::path(dir_) / "metrics.jsonl").string(); }

std::string RunFolder::fault_note_path() const { return (fs::path(dir_) / "fault.txt").string(); }

std::string RunFolder::checkpoint_path() const {
  return (fs::path(dir_) / "checkpoint" / "state.pt").string();
}

RunStatus RunFolder::status() const {
  RunStatus s;
  try {
    const auto j = read_json(fs::path(dir_) / "status.json");
    if (!j || !j->is_object()) return s;
    const std::string name = j->value("state", "new");
    for (RunState r : kStates) {
      if (run_state_name(r) == name) s.state = r;
    }
    s.error = j->value("error", "");
    s.wall_s = j->value("wall_s", 0.0);
    s.pid = j->value("pid", int64_t{0});
  } catch (const UserError&) {
    throw;  // a link, folder or pipe in its place (require_plain_file): named, not read as new
  } catch (const std::exception&) {
    // A status.json from a crashed write reads as a new run: what it held is rebuilt.
  }
  return s;
}

std::optional<std::string> RunFolder::source() const {
  const fs::path p = fs::path(dir_) / "source.yaml";
  if (!path_present(p.string())) return std::nullopt;
  return read_plain_file(p.string());
}

std::optional<std::string> RunFolder::verified_source() const {
  auto text = source();
  if (!text) return text;
  std::string recorded;
  try {
    const auto j = read_json(fs::path(dir_) / "run.json");
    if (j && j->is_object()) recorded = j->value("source_sha1", "");
  } catch (const UserError&) {
    throw;
  } catch (const std::exception&) {
  }
  // Folders written before the digest existed have none: nothing to compare.
  if (!recorded.empty() && recorded != source_digest(*text)) {
    throw UserError(fmt::format(
        "'{}' was changed after the run was written (it no longer matches the digest in "
        "run.json): the trained weights belong to the configuration it held; restore it, or run "
        "the changed experiment into another --runs-dir",
        (fs::path(dir_) / "source.yaml").string()));
  }
  return text;
}

std::optional<std::string> RunFolder::resolved_config() const {
  const fs::path p = fs::path(dir_) / "config.yaml";
  if (!path_present(p.string())) return std::nullopt;
  return read_plain_file(p.string());
}

std::optional<RunIdentity> RunFolder::identity() const {
  try {
    const auto j = read_json(fs::path(dir_) / "run.json");
    if (!j || !j->is_object()) return std::nullopt;
    RunIdentity id;
    id.experiment = j->value("experiment", "");
    id.run = j->value("run", "");
    id.labels = labels_of(j->value("labels", json::object()));
    id.config_dir = j->value("config_dir", "");
    id.tuned = tuned_of(j->value("tuned", json::object()));
    return id;
  } catch (const UserError&) {
    throw;  // a link or special file in its place: named, not read as "no run here"
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::optional<RunResults> RunFolder::results() const {
  const fs::path p = fs::path(dir_) / "results.json";
  try {
    const auto j = read_json(p);
    if (!j) return std::nullopt;
    if (!j->is_object()) throw std::runtime_error("not a JSON object");
    RunResults r;
    r.id.experiment = j->value("experiment", "");
    r.id.run = j->value("run", fs::path(dir_).filename().string());
    r.id.labels = labels_of(j->value("labels", json::object()));
    r.task = j->value("task", "");
    r.primary_metric = j->value("primary_metric", "");
    r.higher_is_better = j->value("higher_is_better", true);
    r.train_length = j->value("train_length", int64_t{0});
    r.params = j->value("params", int64_t{0});
    if (j->contains("model") && (*j)["model"].is_object()) {
      const json& m = (*j)["model"];
      ModelRecord mr;
      mr.layers = m.value("layers", int64_t{0});
      mr.attention_share = number_at(m, "attention_share", 0.0);
      mr.position_share = number_at(m, "position_share", 0.0);
      mr.recurrent_state_floats = m.value("recurrent_state_floats", int64_t{0});
      mr.kv_floats_per_token = m.value("kv_floats_per_token", int64_t{0});
      r.model = mr;
    }
    if (j->contains("train") && (*j)["train"].is_object()) {
      const json& t = (*j)["train"];
      TrainRecord tr;
      tr.steps = t.value("steps", int64_t{0});
      tr.resumed_from = t.value("resumed_from", int64_t{0});
      tr.final_loss = number_at(t, "final_loss", 0.0);
      tr.tokens_per_s = number_at(t, "tokens_per_s", 0.0);
      tr.wall_s = number_at(t, "wall_s", 0.0);
      tr.model_s = number_at(t, "model_s", 0.0);
      r.train = tr;
    }
    const json eval = j->value("eval", json::object());  // items() must not outlive it
    r.eval = lengths_of(eval, *j);
    r.validation = lengths_of(j->value("validation", json::object()));
    const json chance = j->value("chance", json::object());
    for (const auto& [m, v] : chance.items()) r.chance[m] = number_of(v);
    r.tuned = tuned_of(j->value("tuned", json::object()));
    const json variants = j->value("eval_variants", json::array());
    for (const json& v : variants) {
      EvalVariantResult vr{v.value("name", ""),
                           v.value("set", ""),
                           lengths_of(v.value("eval", json::object()), v),
                           {}};
      const json settings = v.value("settings", json::object());
      for (const auto& [k, text] : settings.items())
        vr.settings.emplace_back(k, text.get<std::string>());
      r.variants.push_back(vr);
    }
    return r;
  } catch (const UserError&) {
    throw;
  } catch (const std::exception& e) {
    throw UserError("unreadable results.json '" + p.string() + "': " + e.what());
  }
}

RunRecord RunFolder::read() const {
  RunRecord r;
  r.dir = dir_;
  r.status = status();
  r.source = source();
  r.identity = identity();
  try {
    r.results = results();
  } catch (const UserError& e) {
    r.results_error = e.what();
  }
  return r;
}

void RunFolder::write_status(const RunStatus& s) const {
  json j = {{"state", run_state_name(s.state)}};
  if (!s.error.empty()) j["error"] = s.error;
  if (s.wall_s > 0) j["wall_s"] = s.wall_s;
  if (s.pid > 0) j["pid"] = s.pid;
  write_file_atomic((fs::path(dir_) / "status.json").string(), j.dump(2) + "\n");
}

void RunFolder::write_status(RunState state, const std::string& error, double wall_s) const {
  write_status(RunStatus{state, error, wall_s, static_cast<int64_t>(::getpid())});
}

void RunFolder::write_source(const std::string& source_yaml, const RunIdentity& id) const {
  json j = {{"experiment", id.experiment},
            {"run", id.run},
            {"labels", labels_json(id.labels)},
            {"config_dir", id.config_dir},
            {"source_sha1", source_digest(source_yaml)}};
  if (!id.tuned.empty()) j["tuned"] = tuned_json(id.tuned);
  write_file_atomic((fs::path(dir_) / "run.json").string(), j.dump(2) + "\n");
  write_file_atomic((fs::path(dir_) / "source.yaml").string(), source_yaml);
}

void RunFolder::write_config(const std::string& resolved_yaml) const {
  write_file_atomic((fs::path(dir_) / "config.yaml").string(), resolved_yaml);
}

void RunFolder::write_results(const RunResults& r) const {
  json j;
  j["experiment"] = r.id.experiment;
  j["run"] = r.id.run;
  j["labels"] = labels_json(r.id.labels);
  j["task"] = r.task;
  j["primary_metric"] = r.primary_metric;
  j["higher_is_better"] = r.higher_is_better;
  j["train_length"] = r.train_length;
  j["params"] = r.params;
  if (r.model) {
    const ModelRecord& m = *r.model;
    j["model"] = {{"layers", m.layers},
                  {"attention_share", number_json(m.attention_share)},
                  {"position_share", number_json(m.position_share)},
                  {"recurrent_state_floats", m.recurrent_state_floats},
                  {"kv_floats_per_token", m.kv_floats_per_token}};
  }
  if (r.train) {
    const TrainRecord& t = *r.train;
    j["train"] = {{"steps", t.steps},
                  {"resumed_from", t.resumed_from},
                  {"final_loss", number_json(t.final_loss)},
                  {"tokens_per_s", number_json(t.tokens_per_s)},
                  {"wall_s", number_json(t.wall_s)},
                  {"model_s", number_json(t.model_s)}};
  }
  j["eval"] = lengths_json(r.eval);
  put_positions(j, r.eval);
  if (!r.chance.empty()) {
    json chance = json::object();
    for (const auto& [m, v] : r.chance) chance[m] = number_json(v);
    j["chance"] = chance;
  }
  if (!r.variants.empty()) {
    json variants = json::array();
    for (const auto& v : r.variants) {
      json vj = {{"name", v.name}, {"set", v.set}, {"eval", lengths_json(v.eval)}};
      if (!v.settings.empty()) {
        json settings = json::object();
        for (const auto& [k, text] : v.settings) settings[k] = text;
        vj["settings"] = settings;
      }
      put_positions(vj, v.eval);
      variants.push_back(vj);
    }
    j["eval_variants"] = variants;
  }
  if (!r.tuned.empty()) {
    j["tuned"] = tuned_json(r.tuned);
    j["validation"] = lengths_json(r.validation);
  }
  write_file_atomic((fs::path(dir_) / "results.json").string(), j.dump(2) + "\n");
}

void RunFolder::clear_training() const {
  std::error_code ec;
  fs::remove_all(fs::path(dir_) / "checkpoint", ec);
  fs::remove(fs::path(dir_) / "metrics.jsonl", ec);
  fs::remove(fs::path(dir_) / "results.json", ec);
}

void write_expectations(const std::string& experiment_dir, const std::vector<std::string>& claims) {
  const fs::path p = fs::path(experiment_dir) / "expect.yaml";
  if (claims.empty()) {
    std::error_code ec;
    fs::remove(p, ec);
    return;
  }
  YAML::Emitter em;
  em << YAML::BeginSeq;
  for (const auto& c : claims) em << YAML::DoubleQuoted << c;
  em << YAML::EndSeq;
  write_file_atomic(p.string(), std::string(em.c_str()) + "\n");
}

std::vector<std::string> read_expectations(const std::string& experiment_dir) {
  const fs::path p = fs::path(experiment_dir) / "expect.yaml";
  if (!path_present(p.string())) return {};
  try {
    const YAML::Node n = YAML::Load(read_plain_file(p.string()));
    if (!n.IsSequence()) throw std::runtime_error("not a list of claims");
    std::vector<std::string> out;
    for (const auto& c : n) {
      if (!c.IsScalar()) throw std::runtime_error("a claim is not a string");
      out.push_back(c.Scalar());
    }
    return out;
  } catch (const std::exception& e) {
    throw UserError("unreadable claims file '" + p.string() + "': " + e.what());
  }
}

}  // namespace hybridlab

namespace hybridlab {

double model_quantity(const std::string& name, int64_t params, const ModelRecord& m) {
  if (name == "params") return static_cast<double>(params);
  if (name == "layers") return static_cast<double>(m.layers);
  if (name == "attention_share") return m.attention_share;
  if (name == "position_share") return m.position_share;
  if (name == "recurrent_state_floats") return static_cast<double>(m.recurrent_state_floats);
  if (name == "kv_floats_per_token") return static_cast<double>(m.kv_floats_per_token);
  return std::nan("");
}

void write_report_requests(const std::string& experiment_dir, const ReportRequests& r) {
  const fs::path p = fs::path(experiment_dir) / "report.yaml";
  if (r.empty()) {
    std::error_code ec;
    fs::remove(p, ec);
    return;
  }
  YAML::Emitter em;
  em << YAML::BeginMap;
  if (!r.plots.empty()) {
    em << YAML::Key << "plots" << YAML::Value << YAML::BeginSeq;
    for (const PlotRequest& q : r.plots) {
      em << YAML::Flow << YAML::BeginMap << YAML::Key << "x" << YAML::Value << q.x;
      if (!q.metric.empty()) em << YAML::Key << "metric" << YAML::Value << q.metric;
      if (q.length > 0) em << YAML::Key << "length" << YAML::Value << q.length;
      if (!q.series.empty()) em << YAML::Key << "series" << YAML::Value << YAML::Flow << q.series;
      em << YAML::EndMap;
    }
    em << YAML::EndSeq;
  }
  if (r.analysis) {
    const AnalyzeOptions& a = r.analyze;
    em << YAML::Key << "analysis" << YAML::Value << YAML::BeginMap;
    em << YAML::Key << "kinds" << YAML::Value << YAML::Flow << a.kinds;
    em << YAML::Key << "lengths" << YAML::Value << YAML::Flow << a.lengths;
    em << YAML::Key << "examples" << YAML::Value << a.examples;
    em << YAML::Key << "state_window" << YAML::Value << a.state_window;
    em << YAML::Key << "windows" << YAML::Value << YAML::Flow << a.reach_windows;
    em << YAML::Key << "tolerance" << YAML::Value << a.reach_tolerance;
    em << YAML::EndMap;
  }
  if (r.best_of_seeds) em << YAML::Key << "best_of_seeds" << YAML::Value << true;
  em << YAML::EndMap;
  write_file_atomic(p.string(), std::string(em.c_str()) + "\n");
}

ReportRequests read_report_requests(const std::string& experiment_dir) {
  const fs::path p = fs::path(experiment_dir) / "report.yaml";
  if (!path_present(p.string())) return {};
  try {
    const YAML::Node n = YAML::Load(read_plain_file(p.string()));
    ReportRequests r;
    for (const auto& e : n["plots"]) {
      PlotRequest q;
      q.x = e["x"].as<std::string>();
      if (e["metric"]) q.metric = e["metric"].as<std::string>();
      if (e["length"]) q.length = e["length"].as<int64_t>();
      if (e["series"]) q.series = e["series"].as<std::vector<std::string>>();
      r.plots.push_back(q);
    }
    if (const YAML::Node a = n["analysis"]) {
      r.analysis = true;
      r.analyze.kinds = a["kinds"].as<std::vector<std::string>>();
      r.analyze.lengths = a["lengths"].as<std::vector<int64_t>>();
      r.analyze.examples = a["examples"].as<int64_t>();
      r.analyze.state_window = a["state_window"].as<int64_t>();
      r.analyze.reach_windows = a["windows"].as<std::vector<int64_t>>();
      r.analyze.reach_tolerance = a["tolerance"].as<double>();
    }
    if (const YAML::Node b = n["best_of_seeds"]) r.best_of_seeds = b.as<bool>();
    return r;
  } catch (const std::exception& e) {
    throw UserError("unreadable report requests '" + p.string() + "': " + e.what());
  }
}

}  // namespace hybridlab
