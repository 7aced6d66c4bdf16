// Placeholder: filled in by its issue.
#include "commands.h"

namespace hybridlab::cli {
void add_inspect_command(CLI::App& /*app*/) {}
}  // namespace hybridlab::cli
