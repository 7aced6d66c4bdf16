#pragma once
// The pre-flight check of a sweep: every distinct model built once, in a forked process.

#include <map>
#include <string>
#include <vector>

#include "hybridlab/config.h"
#include "hybridlab/sweep.h"

namespace hybridlab {

/// Builds (and drops) the model and prepares the task of every distinct variant (runs that
/// differ only in train/sweep keys share one build) in a forked child, so that a bad scheme,
/// table size, device or corpus is one clear error before any run folder is written, and a build
/// that crashes the process (a plugin factory's segfault) cannot take the sweep down.
/// Returns run name -> "crashed while building its model: plugin 'FILE': killed by signal ...
/// while STAGE" for every variant of a build whose plugin code crashed or hung in its supervised
/// child (plugin_host.h), or "...: killed by signal ... (positional schemes: ...)" when the build
/// itself crashed; the check goes on with the next build. Throws the first build's ConfigError /
/// PluginError / DataError / UserError, prefixed with "run '<name>': " when there are several
/// variants. With `on_this_machine` false every model is built on the CPU whatever its
/// runtime.device says, so that a GPU experiment is checked on a machine without one.
std::map<std::string, std::string> preflight_variants(const Config& cfg,
                                                      const std::vector<Variant>& variants,
                                                      const SweepOptions& sweep,
                                                      const std::string& config_dir,
                                                      bool on_this_machine = true);

/// "killed by signal 11 (Segmentation fault)".
std::string signal_text(int sig);

}  // namespace hybridlab
