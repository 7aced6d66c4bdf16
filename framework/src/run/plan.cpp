// The one rule for an existing run folder, and the source config a run folder executes.

#include <fmt/format.h>

#include <filesystem>

#include "hybridlab/experiment.h"
#include "hybridlab/run.h"
#include "hybridlab/sweep.h"
#include "run/variants.h"

namespace hybridlab {
namespace fs = std::filesystem;

std::string run_source_yaml(const Config& variant_cfg) {
  YAML::Node tree = YAML::Clone(variant_cfg.tree());
  // A run has no sweep: adding a value to a sweep must not make its finished runs "changed".
  tree.remove("sweep");
  // Nor do its claims: they are judged over the experiment (expect.yaml beside the runs); nor
  // what its report draws and measures (report.yaml beside the runs).
  tree.remove("expect");
  tree.remove("report");
  // The folder runs from anywhere: plugin folders are resolved now, as make_plugin_host would.
  YAML::Node paths = tree["plugins"] ? tree["plugins"]["paths"] : YAML::Node();
  if (paths && paths.IsSequence()) {
    const fs::path base = variant_cfg.file().empty()
                              ? fs::current_path()
                              : fs::absolute(fs::path(variant_cfg.file())).parent_path();
    for (std::size_t i = 0; i < paths.size(); ++i) {
      if (!paths[i].IsScalar()) continue;
      const fs::path p(paths[i].Scalar());
      if (!p.is_absolute()) paths[i] = (base / p).lexically_normal().string();
    }
  }
  // So is the run a run continues from (train.init_from).
  YAML::Node init = tree["train"] ? tree["train"]["init_from"] : YAML::Node();
  if (init && init.IsScalar() && !init.Scalar().empty() && fs::path(init.Scalar()).is_relative()) {
    const fs::path base = variant_cfg.file().empty()
                              ? fs::current_path()
                              : fs::absolute(fs::path(variant_cfg.file())).parent_path();
    tree["train"]["init_from"] = (base / init.Scalar()).lexically_normal().string();
  }
  YAML::Emitter em;
  em << tree;
  return std::string(em.c_str()) + "\n";
}

namespace {

// A source config without its `eval.variants` (what training depends on), or "" when unreadable.
std::string training_part(const std::string& source) {
  try {
    YAML::Node tree = YAML::Load(source);
    if (tree.IsMap() && tree["eval"] && tree["eval"].IsMap()) tree["eval"].remove("variants");
    YAML::Emitter em;
    em << tree;
    return em.c_str();
  } catch (const YAML::Exception&) {
    return "";
  }
}

// The eval variants `source` lists (read from its YAML: plan_run reads nothing else).
std::vector<EvalVariant> listed_variants(const std::string& source) {
  std::vector<EvalVariant> out;
  try {
    const YAML::Node tree = YAML::Load(source);
    const YAML::Node listed =
        tree.IsMap() && tree["eval"] ? tree["eval"]["variants"] : YAML::Node();
    if (!listed || !listed.IsMap()) return out;
    for (const auto& kv : listed) {
      EvalVariant v{kv.first.Scalar(), {}, {}};
      if (kv.second.IsMap()) {
        for (const auto& s : kv.second) v.set.emplace_back(s.first.Scalar(), s.second);
      }
      out.push_back(v);
    }
  } catch (const YAML::Exception&) {
  }
  return out;
}

}  // namespace

std::vector<EvalVariant> variants_without_results(const std::vector<EvalVariant>& listed,
                                                  const std::optional<RunResults>& done) {
  std::vector<EvalVariant> missing;
  for (const EvalVariant& v : listed) {
    const std::string set = eval_variant_text(v);
    bool found = false;
    if (done) {
      for (const auto& r : done->variants) found |= r.name == v.name && r.set == set;
    }
    if (!found) missing.push_back(v);
  }
  return missing;
}

RunPlan plan_run(const RunRecord& rec, const std::string& source, bool train_only) {
  const bool same = rec.source && *rec.source == source;
  // Eval variants are evaluated on the trained weights: listing others never retrains a run.
  const bool same_training = same || (rec.source && !training_part(source).empty() &&
                                      training_part(*rec.source) == training_part(source));
  switch (rec.status.state) {
    case RunState::kFinished:
      if (same_training) {
        const std::vector<EvalVariant> missing =
            variants_without_results(listed_variants(source), rec.results);
        if (missing.empty()) return {RunAction::kSkip, "finished before, skipped"};
        std::string names;
        for (const auto& m : missing) names += (names.empty() ? "" : ", ") + m.name;
        if (train_only) return {RunAction::kSkip, "finished before, skipped"};
        return {RunAction::kResume, "finished before; evaluating its eval variants " + names};
      }
      return {RunAction::kRefuse,
              fmt::format("'{}' finished with a different configuration and is not overwritten; "
                          "delete it or use another --runs-dir",
                          rec.dir)};
    case RunState::kTrained:
      if (!same_training) {
        return {RunAction::kRefuse,
                fmt::format("'{}' was trained with a different configuration and is not "
                            "overwritten; delete it or use another --runs-dir",
                            rec.dir)};
      }
      if (train_only) return {RunAction::kSkip, "trained before, skipped"};
      return {RunAction::kResume, "trained before; evaluating"};
    case RunState::kNew:
    case RunState::kRunning:  // the caller holds the lock: its writer is dead
    case RunState::kFailed:
    case RunState::kInterrupted:
      break;
  }
  if (same_training || !rec.source)
    return {rec.source ? RunAction::kResume : RunAction::kFresh, ""};
  return {RunAction::kFresh, "configuration changed since it was interrupted; starting afresh"};
}

RunPlan prepare_run_folder(const RunFolder& folder, const std::string& source,
                           const RunIdentity& id, bool train_only) {
  const RunPlan plan = plan_run(folder.read(), source, train_only);
  if (plan.action == RunAction::kSkip || plan.action == RunAction::kRefuse) return plan;
  if (plan.action == RunAction::kFresh) folder.clear_training();
  folder.write_source(source, id);
  return plan;
}

namespace {

// The keys the `sweep:` section of `path` varies (grid, zip, tune, and train.seed for `seeds:`),
// each with where it is written: the sweep's own reader on a copy of the file, whose problems
// are reported when the experiment itself is read.
std::vector<std::pair<std::string, Location>> swept_keys(const std::string& path) {
  const Config copy = Config::load(path);
  if (!copy.lookup("sweep").IsDefined()) return {};
  const SweepOptions sweep = read_sweep_options(copy.section("sweep"));
  std::vector<std::pair<std::string, Location>> out;
  for (const auto* axes : {&sweep.grid, &sweep.tune}) {
    for (const SweepAxis& a : *axes) out.emplace_back(a.key, a.where);
  }
  for (const auto& group : sweep.zip) {
    for (const SweepAxis& a : group) out.emplace_back(a.key, a.where);
  }
  if (!sweep.seeds.empty()) out.emplace_back("train.seed", copy.location("sweep.seeds"));
  return out;
}

// Whether key `a` is `b`, inside it or holds it (dotted paths).
bool overlaps(const std::string& a, const std::string& b) {
  auto within = [](const std::string& inner, const std::string& outer) {
    return inner.size() > outer.size() && inner.compare(0, outer.size(), outer) == 0 &&
           inner[outer.size()] == '.';
  };
  return a == b || within(a, b) || within(b, a);
}

}  // namespace

Config load_experiment_config(const std::string& path, const std::vector<std::string>& overrides) {
  Config cfg = Config::load(path);
  const auto swept =
      overrides.empty() ? std::vector<std::pair<std::string, Location>>() : swept_keys(path);
  for (const auto& o : overrides) {
    // A swept key is set again in every variant: an override of it would be discarded unseen.
    const std::string key = o.substr(0, o.find('='));
    for (const auto& [k, where] : swept) {
      if (overlaps(key, k)) {
        throw ConfigError(where.str() + ": override '" + o + "': " + k +
                          " is varied by the sweep, which sets it in every variant, so the "
                          "override would be discarded; edit the sweep instead (or run one "
                          "variant with --only)");
      }
    }
    cfg.apply_override(o);
  }
  return cfg;
}

}  // namespace hybridlab
