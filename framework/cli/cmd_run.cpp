// Placeholder: filled in by the main-job issue.
#include "commands.h"

namespace hybridlab::cli {
void add_run_commands(CLI::App& /*app*/) {}
}  // namespace hybridlab::cli
