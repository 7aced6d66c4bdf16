// Placeholder: filled in by its issue.
#include "commands.h"

namespace hybridlab::cli {
void add_model_command(CLI::App& /*app*/) {}
}  // namespace hybridlab::cli
