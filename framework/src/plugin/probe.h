#pragma once
// A plugin's code run first in a supervised child (util/supervised.h): its library loaded and
// its record read there, then each distinct scheme built and its hooks called there, before this
// process runs any of it.

#include <cstdint>
#include <string>
#include <vector>

#include "hybridlab/mixer.h"
#include "hybridlab/position.h"

namespace hybridlab::detail {

/// What the child learned about a library.
struct ProbedLibrary {
  std::string name, version, description;
  int kind = kPluginKindPosition;  ///< PluginKind: which record and factory the library exports
  char letter = 0;                 ///< a mixer's pattern letter
  int api_version = 0;             ///< the plugin API its record names
  uint32_t hooks = 0;              ///< of a scheme built with default settings (0 when that throws)
  std::vector<std::string> eval_safe_keys;  ///< a mixer's MixerPluginInfo::eval_safe_keys (API 3)
  std::string refusal;  ///< why this host must not load it (ABI, record): a PluginError message
                        ///< (name and letter stay filled where the record's layout is known)
};

/// Loads `file` (canonical path) in a supervised child and reads its record there (no null or
/// overlong strings, a name that is an identifier, the host's plugin API, LibTorch version and C++
/// ABI flag; for a mixer, its kind and a printable pattern letter), then builds a scheme (or mixer)
/// with default settings at a small shape and asks its hooks (a mixer: builds one). Remembered per
/// file for the life of the process. Throws PluginCrashed naming the file and the stage (loading
/// the library, reading its record, its factory, its hooks) when the child is killed by a signal,
/// does not return within plugin_time_limit() or throws something that is not a std::exception.
ProbedLibrary probe_library(const std::string& file);

/// Builds the scheme `factory(params, ctx)` of plugin `name` (`file`, built against plugin API
/// `api_version`) in a supervised child, refuses hooks that API does not have, and calls each hook
/// it declares once at a small shape (T = 8, or its max_length), checking the outputs
/// (hybridlab/position_hooks.h) and that they are finite (a bias may be -inf). Remembered per
/// (file, settings, context). Throws PluginCrashed as probe_library does, and PluginError naming
/// the scheme, the hook, what it should have returned and what it returned, for a hook that fails
/// or returns a wrong tensor. What the factory itself throws is left to the caller's own call,
/// which throws it again.
void probe_factory(const std::string& name, const std::string& file, int api_version,
                   PositionFactory& factory, Section& params, const PositionContext& ctx);

/// The mixer counterpart of probe_factory: builds `factory(params, ctx)` of mixer plugin `name`
/// in a supervised child and runs one forward at [1, 8, d_model] there (with and without a
/// decoding cache), checking that it returns a finite tensor of that shape and dtype, that its
/// info() figures are >= 0 with a KV cache whose bytes fit in 64 bits, and that
/// document_boundaries() is a value of the enum.
/// Remembered per (file, settings, context). Throws as probe_factory does.
void probe_mixer_factory(const std::string& name, const std::string& file, MixerFactory& factory,
                         Section& params, const MixerContext& ctx);

}  // namespace hybridlab::detail
