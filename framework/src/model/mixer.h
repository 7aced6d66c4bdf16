#pragma once
// The registry of mixer types of the layer graph (the Mixer interface itself is hybridlab/mixer.h).
//
// A block is `x + mixer(norm(x))`, then `x + mlp(norm(x))`. The mixer is any registered type
// (attention, gated_deltanet, ...). A built-in one is a Mixer subclass, its options reader and
// constructor (builtin_mixer_type) in its own file, plus one line in register_builtin_mixers()
// (mixer_registry.cpp); a mixer plugin joins the registry of its search path (mixer_plugins.cpp).

#include <torch/nn/module.h>
#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hybridlab/config.h"
#include "hybridlab/mixer.h"
#include "hybridlab/model.h"
#include "hybridlab/plugin_host.h"
#include "util/registry.h"

namespace hybridlab {

/// One registered mixer type. A built-in type is built as a plugin's is: by a factory with the
/// MixerFactory signature (hybridlab/mixer.h) that reads the type's settings and builds the
/// mixer; positional schemes come from MixerContext::position.
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
  /// Built-in types: the factory. nullptr for a plugin type: the host calls its library's.
  MixerFactory* factory = nullptr;
  /// Built-in types: reads and checks the settings as the factory does, without building, and
  /// records problems in the config: the `model:` reader calls it so that every problem is
  /// reported before anything is built. nullptr for a plugin type, whose factory checks them
  /// when the model is built.
  void (*check)(Section& params, const MixerContext& ctx) = nullptr;
};

/// A built-in MixerType from an options reader and a constructor, each in the type's own file:
/// Read(params, ctx) returns the options and records problems in the config (ctx.position is
/// null when it only checks); Make(options, ctx) builds the mixer. The factory reads, then throws
/// ConfigError listing every problem recorded (unknown keys included), then builds.
template <class Options, Options (*Read)(Section&, const MixerContext&),
          std::shared_ptr<Mixer> (*Make)(const Options&, const MixerContext&)>
MixerType builtin_mixer_type(std::string name, char letter, std::string description,
                             std::vector<std::string> eval_safe_keys) {
  MixerType t;
  t.name = std::move(name);
  t.letter = letter;
  t.description = std::move(description);
  t.eval_safe_keys = std::move(eval_safe_keys);
  t.check = [](Section& params, const MixerContext& ctx) {
    Read(params, ctx);
    params.finish();
  };
  t.factory = [](Section& params, const MixerContext& ctx) -> std::shared_ptr<Mixer> {
    const Options options = Read(params, ctx);
    params.finish();
    params.config().raise_errors();
    return Make(options, ctx);
  };
  return t;
}

/// Builds a mixer of `type` from its settings `params` (its `model.<name>` section, or a layer's
/// override over it): a built-in type's factory, or the plugin's through `host` (tried first in
/// a supervised child). Throws ConfigError naming params' keys, PluginError.
std::shared_ptr<Mixer> build_mixer(const MixerType& type, Section& params, const MixerContext& ctx,
                                   PluginHost& host);

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
  /// search that fails leaves the built-in types and says why in note(). A plugin type's
  /// factory reads (and checks) its settings when the model is built, through the host.
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
