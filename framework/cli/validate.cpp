// validate_experiment_config: the strict read of a whole experiment file, as a run would do it.

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "commands.h"
#include "hybridlab/experiment.h"
#include "hybridlab/model.h"
#include "hybridlab/plugin_host.h"
#include "hybridlab/run_build.h"
#include "hybridlab/sweep.h"
#include "hybridlab/task.h"

namespace hybridlab::cli {
namespace {

// The node at a dotted path of `root`, or an undefined node; creates nothing.
YAML::Node node_at(YAML::Node root, const std::string& dotted) {
  YAML::Node n = root;
  size_t start = 0;
  while (n.IsMap() && start <= dotted.size()) {
    const size_t dot = std::min(dotted.find('.', start), dotted.size());
    const YAML::Node next = n[dotted.substr(start, dot - start)];
    if (!next) return YAML::Node(YAML::NodeType::Undefined);
    n.reset(next);
    if (dot == dotted.size()) return n;
    start = dot + 1;
  }
  return YAML::Node(YAML::NodeType::Undefined);
}

// The keys of the resolved map beside each key a sweep varies. A plugin fills in defaults that
// depend on the values beside them (a scheme's own keys beside `scheme`), so each variant must
// fill its own: written for the base's value they would be read by a variant whose scheme
// refuses them, and a resolved file would no longer run.
std::vector<std::pair<std::string, std::vector<std::string>>> maps_beside_swept_keys(
    const Config& cfg) {
  std::vector<std::pair<std::string, std::vector<std::string>>> out;
  const YAML::Node sweep = cfg.lookup("sweep");
  if (!sweep.IsDefined() || sweep.IsNull()) return out;
  const SweepOptions options = read_sweep_options(cfg.section("sweep"));
  std::vector<std::string> keys;
  for (const auto& a : options.grid) keys.push_back(a.key);
  for (const auto& a : options.tune) keys.push_back(a.key);
  for (const auto& group : options.zip)
    for (const auto& a : group) keys.push_back(a.key);
  for (const std::string& key : keys) {
    const size_t dot = key.rfind('.');
    if (dot == std::string::npos) continue;
    const std::string parent = key.substr(0, dot);
    const YAML::Node map = node_at(cfg.resolved(), parent);
    if (!map.IsMap()) continue;
    std::vector<std::string> present;
    for (const auto& kv : map) present.push_back(kv.first.as<std::string>());
    out.emplace_back(parent, present);
  }
  return out;
}

}  // namespace

void validate_experiment_config(Config& cfg) {
  const Experiment exp = read_experiment(cfg);
  const auto beside_swept = maps_beside_swept_keys(cfg);
  // Positional-scheme settings are read by their plugins when the model is built: build it once
  // (small models build in milliseconds) so their errors surface here and their values, defaults
  // included, land in the resolved config.
  auto host = make_plugin_host(cfg);
  const auto model = build_model(*exp.model, *host, model_build_context(exp));
  // Eval variants too, as the pre-flight check of `run` builds them: a scheme's own keys in a
  // variant are read only by its plugin.
  check_eval_variant_models(cfg, exp.eval.variants, *model, [&](const Config& vc) {
    const Experiment ve = read_experiment(vc, false);
    return build_model(*ve.model, *host, model_build_context(ve));
  });
  // A sweep is read as data (its keys are dotted paths, not config keys): show it as written.
  const YAML::Node sweep = cfg.lookup("sweep");
  if (sweep.IsDefined() && !sweep.IsNull()) {
    YAML::Node resolved = cfg.resolved();
    resolved["sweep"] = YAML::Clone(sweep);
  }
  for (const auto& [parent, present] : beside_swept) {
    YAML::Node map = node_at(cfg.resolved(), parent);
    std::vector<std::string> added;
    for (const auto& kv : map) {
      const auto key = kv.first.as<std::string>();
      if (std::find(present.begin(), present.end(), key) == present.end()) added.push_back(key);
    }
    for (const auto& key : added) map.remove(key);
  }
}

}  // namespace hybridlab::cli
