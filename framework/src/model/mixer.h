#pragma once
// The registry of mixer types of the layer graph (the Mixer interface itself is hybridlab/mixer.h).
//
// A block is `x + mixer(norm(x))`, then `x + mlp(norm(x))`. The mixer is any registered type
// (attention, gated_deltanet, ...). Adding one is one new file (a Mixer subclass, its options
// reader and a `MixerType` describing it) plus one line in register_builtin_mixers()
// (mixer_registry.cpp); a mixer plugin joins the registry of its search path (mixer_plugins.cpp).

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

/// The mixer types a model can name, by name and by pattern letter, each with its origin ("built
/// in", or its plugin library's path). builtin() holds the built-in types; of(cfg) holds them and
/// the usable mixer plugins on cfg's search path. Both live for the process.
class MixerRegistry {
 public:
  /// The built-in mixer types (register_builtin_mixers), one registry per process.
  static const MixerRegistry& builtin();
  /// The built-in types and the mixer plugins on `cfg`'s search path (plugins.paths,
  /// HYBRIDLAB_PLUGIN_PATH, the installation's folder), searched once per search path (each
  /// library's code runs first in a supervised child). A plugin whose name or letter is taken (a
  /// built-in type's, an earlier plugin's) is not used, and note() says so. Throws nothing: a
  /// search that fails leaves the built-in types and says why in note(). A plugin type's read()
  /// keeps its settings for its factory, which reads (and checks) them when the model is built,
  /// through MixerBuildContext::host.
  static const MixerRegistry& of(const Config& cfg);

  /// An empty registry over `builtin` (the built-in types a search path's registry sits on;
  /// nullptr for none).
  explicit MixerRegistry(const MixerRegistry* builtin = nullptr) : builtin_(builtin) {}

  /// Adds `type` from `origin` ("built in", a library path). Throws DuplicateEntry (a
  /// std::logic_error) naming both types, their letters and origins when its name or its letter
  /// is taken, here or among the built-in types.
  void add(MixerType type, const std::string& origin);
  /// The type for a letter ('A') or a name ("attention"); nullptr if none. A built-in type is the
  /// same object in builtin() and in every of(cfg).
  const MixerType* find(const std::string& letter_or_name) const;
  /// Where the type called `name` came from: "built in" or its library's path ("" if none).
  std::string origin(const std::string& name) const;
  /// Every type: the built-in ones, then the plugins', each sorted by name.
  std::vector<const MixerType*> types() const;
  /// "A (attention), G (gated_deltanet), D (deltanet, plugin)" for messages.
  std::string names() const;
  /// What is amiss among the plugins searched: a plugin not used and why, a library that crashed
  /// ("" when nothing is).
  const std::string& note() const { return note_; }
  /// The mixer plugins found but not used, one line each naming both types and origins.
  const std::vector<std::string>& unused() const { return unused_; }
  /// When `letter_or_name` is the letter or name of a library set aside on the search path (its
  /// record refused): which library and why ("" otherwise, and when a usable type has it).
  std::string set_aside(const std::string& letter_or_name) const;

 private:
  // The plugins of one search path, over the built-in types.
  static std::unique_ptr<MixerRegistry> scan(const Config& cfg);

  const MixerRegistry* builtin_;  // nullptr for builtin() itself
  Registry<MixerType> by_name_{"mixer type"};
  Registry<std::string> by_letter_{"mixer pattern letter"};  // letter -> type name
  std::string note_;
  std::vector<std::string> unused_;
  std::vector<SetAsidePlugin> set_aside_;
};

/// Registers every built-in mixer type: one line per type. Called once by builtin().
void register_builtin_mixers(MixerRegistry& registry);

// One MixerType per built-in mixer, each defined in its own file.
MixerType attention_mixer_type();       // mixer_attention.cpp
MixerType gated_deltanet_mixer_type();  // mixer_gated_deltanet.cpp

}  // namespace hybridlab
