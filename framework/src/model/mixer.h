#pragma once
// The registry of mixer types of the layer graph (the Mixer interface itself is hybridlab/mixer.h).
//
// A block is `x + mixer(norm(x))`, then `x + mlp(norm(x))`. The mixer is any registered type
// (attention, gated_deltanet, ...). Adding one is one new file (a Mixer subclass, its options
// reader and a `MixerType` describing it) plus one line in register_builtin_mixers()
// (mixer_registry.cpp).

#include <torch/nn/module.h>
#include <torch/types.h>

#include <any>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "hybridlab/config.h"
#include "hybridlab/mixer.h"
#include "hybridlab/model.h"
#include "hybridlab/plugin_host.h"
#include "util/registry.h"

namespace hybridlab {

/// Model-wide settings a mixer's options reader needs for its checks.
struct ModelDims {
  int64_t d_model = 0;
  bool fused_kernels = true;  ///< model.fused_kernels
};

/// Positional schemes shared across layers (PositionScheme::shared_across_layers()), keyed by
/// their settings; the model registers each of them once.
struct SharedSchemes {
  std::map<std::string, std::shared_ptr<PositionScheme>> by_key;
};

/// Everything a mixer needs to be built.
struct MixerBuildContext {
  int64_t d_model = 0;
  int64_t layer_index = 0;
  PluginHost* host = nullptr;
  ModelBuildContext lengths;
  SharedSchemes* shared = nullptr;
  bool fused_kernels = true;  ///< model.fused_kernels
};

/// One registered mixer type.
struct MixerType {
  std::string name;  ///< YAML name and section under `model:` ("attention")
  char letter = 0;   ///< pattern letter ('A')
  std::string description;
  /// The plugin library that provides the type ("" for a built-in one): faults in its forward
  /// are reported naming it.
  std::string plugin_file;
  /// The keys of its section (and of a layer override) its trained parameters do not depend on,
  /// which an evaluation variant may change; each covers its subtree ("position").
  std::vector<std::string> eval_safe_keys;
  /// Reads options from `s` (the `model.<name>` section, or an override map). `base`: the options
  /// the section overrides (nullptr for `model.<name>` itself). Records problems in the config.
  std::function<std::any(Section s, const ModelDims& dims, const std::any* base)> read;
  /// Builds the mixer from what read() returned. Throws ConfigError / PluginError.
  std::function<std::shared_ptr<Mixer>(const std::any& options, const MixerBuildContext& ctx)>
      build;
};

/// The registry of mixer types (one per process, filled once by register_builtin_mixers()): a
/// Registry of types by name and one of names by pattern letter.
class MixerRegistry {
 public:
  /// The registry with the built-in mixers registered.
  static const MixerRegistry& instance();
  /// Adds a type. Throws DuplicateEntry (a std::logic_error) for a duplicate name or letter,
  /// naming both types.
  void add(MixerType type);
  /// The type for a letter ('A') or a name ("attention"); nullptr if none.
  const MixerType* find(const std::string& letter_or_name) const;
  /// Every type, sorted by name.
  std::vector<const MixerType*> types() const { return by_name_.entries(); }
  /// "A (attention), G (gated_deltanet)" for messages.
  std::string names() const;

 private:
  Registry<MixerType> by_name_{"mixer type"};
  Registry<std::string> by_letter_{"mixer pattern letter"};  // letter -> type name
};

/// Registers every built-in mixer type: one line per type. Called once by instance().
void register_builtin_mixers(MixerRegistry& registry);

/// What find_plugin_mixer found.
struct PluginMixerLookup {
  const MixerType* type = nullptr;    ///< nullptr when no usable mixer plugin has the letter/name
  std::vector<const MixerType*> all;  ///< every usable mixer plugin on the search path
  std::string names;                  ///< "D (deltanet, plugin), ..." for messages ("" if none)
  std::string note;  ///< what is amiss among the plugins (a clash, a crash), "" when nothing is
  /// When no usable plugin has the key but a set-aside library does: which and why ("" if none).
  std::string set_aside;
};

/// The mixer type that a mixer plugin on `cfg`'s plugin search path (plugins.paths,
/// HYBRIDLAB_PLUGIN_PATH, the installation's folder) provides for `letter_or_name` (its pattern
/// letter or its name). Plugins are searched once per search path and their types live for the
/// process. A plugin whose letter or name is a built-in mixer's, or another plugin's, is not
/// used, and the note says so. The type's read() keeps the plugin's settings for its factory,
/// which reads (and checks) them when the model is built, through MixerBuildContext::host.
PluginMixerLookup find_plugin_mixer(const Config& cfg, const std::string& letter_or_name);

// One MixerType per built-in mixer, each defined in its own file.
MixerType attention_mixer_type();       // mixer_attention.cpp
MixerType gated_deltanet_mixer_type();  // mixer_gated_deltanet.cpp

}  // namespace hybridlab
