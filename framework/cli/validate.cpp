// validate_experiment_config: the strict read of a whole experiment file, as a run would do it.

#include <algorithm>

#include "commands.h"
#include "hybridlab/experiment.h"
#include "hybridlab/model.h"
#include "hybridlab/plugin_host.h"
#include "hybridlab/task.h"
#include "run/build.h"

namespace hybridlab::cli {

void validate_experiment_config(Config& cfg) {
  const Experiment exp = read_experiment(cfg);
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
}

}  // namespace hybridlab::cli
