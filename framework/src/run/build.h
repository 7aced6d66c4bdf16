#pragma once
// Building a run from its config: experiment, plugin host, model on its device, prepared task.

#include <cstdint>
#include <memory>
#include <string>

#include "hybridlab/experiment.h"
#include "hybridlab/plugin_host.h"

namespace hybridlab {

struct BuiltRun {
  Experiment exp;
  std::unique_ptr<PluginHost> host;  ///< declared before the model: outlives it
  std::shared_ptr<LanguageModel> model;
  int64_t params = 0;
};

/// Reads `cfg` (no sweep validation), applies its runtime (`threads` > 0 overrides
/// runtime.threads), seeds, builds the model and prepares the task at every length.
/// `config_dir` resolves relative data paths ("" = the config file's folder). Throws what
/// read_experiment, the plugin host and the task throw; a LibTorch failure becomes a UserError.
BuiltRun build_run(const Config& cfg, const std::string& config_dir = "", int64_t threads = 0);

}  // namespace hybridlab
