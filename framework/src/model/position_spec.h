#pragma once
// The `position:` map of an attention layer (or of the model input): which scheme, with which
// params. Kept as a config Section so the plugin reads (and the host validates) its own keys.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "hybridlab/config.h"
#include "hybridlab/model.h"
#include "hybridlab/plugin_host.h"
#include "hybridlab/position.h"

namespace hybridlab {

struct PositionSpec {
  std::string scheme = "nope";    ///< plugin name or path to a .so
  std::optional<Section> params;  ///< the `position:` map (absent: no params)
  /// The reader the spec was read with (set by read_position_spec; over nothing when the map is
  /// absent), to read it again where it stands (PositionService::build).
  std::optional<Section> section;
  Location where;    ///< where the scheme was chosen, for build-time errors
  std::string path;  ///< dotted config path of the map, for messages
  /// scheme + canonical YAML of the params: layers with equal keys may share one instance.
  std::string key() const;
};

/// Reads a `position:` map: `scheme` (string, default "nope") and the scheme's own keys, which are
/// left for the plugin (validated when the scheme is built).
PositionSpec read_position_spec(Section s);

/// Builds the scheme through `host`. Throws PluginError / ConfigError (the message names the
/// config location of the `position:` map).
std::shared_ptr<PositionScheme> build_position_scheme(const PositionSpec& spec, PluginHost& host,
                                                      const PositionContext& ctx);

/// Throws ConfigError at `spec`'s key when `scheme` encodes fewer positions
/// (PositionScheme::max_length) than the model must serve: the longer of ctx's train and eval
/// lengths.
void check_scheme_length(const PositionScheme& scheme, const PositionSpec& spec,
                         const ModelBuildContext& ctx);

}  // namespace hybridlab
