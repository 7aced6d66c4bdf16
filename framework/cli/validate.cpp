// validate_experiment_config: the strict read of a whole experiment file.
// MAIN-JOB ISSUE: replace the body with a call to read_experiment(cfg) once it exists.

#include "commands.h"
#include "hybridlab/runtime.h"

namespace hybridlab::cli {

void validate_experiment_config(Config& cfg) {
  Section root = cfg.root();
  for (const char* k : {"name", "description", "model", "task", "train", "eval", "sweep"}) {
    root.accept(k);
  }
  read_runtime_options(root.child("runtime"));
  Section plugins = root.child("plugins");
  plugins.get<std::vector<std::string>>("paths", {});
  plugins.finish();
  root.finish();
  cfg.raise_errors();
}

}  // namespace hybridlab::cli
