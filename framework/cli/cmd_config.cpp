// `hybridlab config show EXP.yaml [key=value ...]`: the resolved configuration.

#include <iostream>
#include <memory>

#include "commands.h"
#include "hybridlab/run.h"

namespace hybridlab::cli {

void add_config_command(CLI::App& app) {
  auto* config = app.add_subcommand("config", "Inspect experiment configurations");
  config->require_subcommand(1);
  struct Args {
    std::string file;
    std::vector<std::string> overrides;
  };
  auto args = std::make_shared<Args>();
  auto* show = config->add_subcommand(
      "show",
      "Print the resolved configuration (extends merged, overrides applied, defaults "
      "filled in) after strict validation");
  show->add_option("experiment", args->file, "Experiment YAML file")->required();
  show->add_option("overrides", args->overrides, "Dotted overrides, e.g. model.d_model=512");
  show->callback([args] {
    Config cfg = load_experiment_config(args->file, args->overrides);
    // Every variant, corpus and init_from source as `run` checks them, in a forked child first:
    // a plugin that crashes while building cannot take this command down.
    check_experiment(cfg, args->file);
    validate_experiment_config(cfg);
    std::cout << cfg.resolved_yaml();
  });
}

}  // namespace hybridlab::cli
