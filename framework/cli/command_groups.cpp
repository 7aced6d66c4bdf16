// The command registry: one line per group of subcommands.

#include "commands.h"

namespace hybridlab::cli {

const Registry<CommandGroup>& command_groups() {
  static const Registry<CommandGroup> registry = [] {
    Registry<CommandGroup> r("command group");
    r.add("run", {0, add_run_commands}, "cmd_run.cpp");
    r.add("generate", {1, add_generate_command}, "cmd_generate.cpp");
    r.add("model", {2, add_model_command}, "cmd_model.cpp");
    r.add("config", {3, add_config_command}, "cmd_config.cpp");
    r.add("plugins", {4, add_plugins_command}, "cmd_plugins.cpp");
    r.add("inspect", {5, add_inspect_command}, "cmd_inspect.cpp");
    r.add("analyze", {6, add_analyze_command}, "cmd_analyze.cpp");
    r.add("export", {7, add_export_command}, "cmd_export.cpp");
    return r;
  }();
  return registry;
}

}  // namespace hybridlab::cli
