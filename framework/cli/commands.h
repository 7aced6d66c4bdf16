#pragma once
// The CLI's subcommands. Each cli/cmd_*.cpp adds its subcommands to the app; main.cpp calls every
// add_* below once. Callbacks throw UserError (exit 2) for bad input.

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

#include "hybridlab/config.h"
#include "util/registry.h"

namespace hybridlab::cli {

/// Reads every section of an experiment config strictly (filling Config::resolved()) and throws
/// one ConfigError listing every problem. Implemented in validate.cpp.
void validate_experiment_config(Config& cfg);

void add_config_command(CLI::App& app);   // config show
void add_plugins_command(CLI::App& app);  // plugins list
void add_inspect_command(CLI::App& app);  // inspect position, inspect attention
/// `inspect attention` (cmd_inspect_attention.cpp), under the `inspect` subcommand.
void add_inspect_attention_command(CLI::App& inspect);
void add_model_command(CLI::App& app);     // model summary
void add_run_commands(CLI::App& app);      // run, train, eval, sweep, report
void add_analyze_command(CLI::App& app);   // analyze (cmd_analyze.cpp)
void add_generate_command(CLI::App& app);  // generate (cmd_generate.cpp)
void add_export_command(CLI::App& app);    // export (cmd_export.cpp)

/// One group of subcommands in the command registry: `add` puts them on the app, `order` places
/// them in `--help` (the workflow's order: run first).
struct CommandGroup {
  int order = 0;
  std::function<void(CLI::App&)> add;
};

/// The CLI's command groups by name ("run": run, train, eval, run-folder, sweep, report; "model";
/// ...), registered once; main.cpp adds them in `order`.
const Registry<CommandGroup>& command_groups();

}  // namespace hybridlab::cli
