#pragma once
// The plugin host: finds positional-scheme and mixer plugins, checks them, and builds schemes and
// mixers from them.
//
// Search order: `plugins.paths` from the YAML, then HYBRIDLAB_PLUGIN_PATH (colon-separated), then
// the plugin folder of this installation (<prefix>/lib/hybridlab/plugins, next to the binary's
// ../lib). A scheme name that ends in ".so" or contains '/' is loaded from that file directly.
//
// Libraries stay loaded for the life of the process (boostorg/dll#68: a library linked to
// LibTorch is never safe to unload), and every scheme object also holds a reference to its
// library (boost.dll tutorial 8), so an object outlives any host that made it.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hybridlab/mixer.h"
#include "hybridlab/position.h"

namespace hybridlab {

/// What `hybridlab plugins list` shows about one plugin.
struct PluginRecord {
  std::string name;
  std::string version;
  std::string description;
  std::string file;    ///< absolute path of the .so
  uint32_t hooks = 0;  ///< filled by probing: the hooks of a scheme built with default settings
  PluginKind kind = kPluginKindPosition;  ///< a positional scheme or a mixer
  char letter = 0;                        ///< a mixer's pattern letter (0 for schemes)
  int api_version = 0;  ///< the plugin API it was built against (its record's api_version)
  /// A mixer's keys that evaluation variants may change (MixerPluginInfo::eval_safe_keys; none
  /// for a record of mixer API 2).
  std::vector<std::string> eval_safe_keys;
};

/// A plugin library that discover() found on the search path but set aside, because its record is
/// refused: built for another plugin API (or LibTorch, or C++ ABI), a null, empty or
/// non-identifier name, a pattern letter that is not an ASCII letter, or a name that a library
/// earlier on the search path already has. The others are used as if it were not there; a
/// configuration that names it (its scheme name, its mixer name or letter) is told this.
struct SetAsidePlugin {
  std::string file;    ///< absolute path of the .so
  std::string reason;  ///< why it is refused (a PluginError message naming the file)
  std::string name;    ///< the name its record gives, "" when it has no readable one
  PluginKind kind = kPluginKindPosition;  ///< the kind of record it exports
  char letter = 0;                        ///< a mixer's pattern letter, when readable (else 0)
};

/// "position" or "mixer".
std::string plugin_kind_name(PluginKind kind);

class PluginHost {
 public:
  /// A host that searches `extra_paths` (e.g. `plugins.paths` from the YAML, relative paths
  /// already resolved) before HYBRIDLAB_PLUGIN_PATH and the default folder. Discovery is lazy.
  explicit PluginHost(std::vector<std::string> extra_paths = {});
  ~PluginHost();
  PluginHost(const PluginHost&) = delete;
  PluginHost& operator=(const PluginHost&) = delete;

  /// The folders searched, in order (existing or not).
  std::vector<std::string> search_path() const;

  /// Scans every folder in the search path for plugins and loads them, each library's code run
  /// first in a supervised child (its load, its record, a scheme with default settings) under
  /// HYBRIDLAB_PLUGIN_TIMEOUT seconds (default 60). Files without the hybridlab plugin symbol are
  /// skipped; plugins whose code crashed or hung there are set aside (broken_plugins()), and so
  /// are plugins whose record is refused (set_aside_plugins()): another ABI, a broken record, a
  /// name another plugin has. Throws PluginError for an unreadable folder. Idempotent.
  void discover();

  /// The plugins found by discover(), sorted by name, each with the hooks of a scheme built with
  /// default settings in its supervised first load (0 when that scheme cannot be built so).
  std::vector<PluginRecord> plugins();

  /// The plugins discover() found but could not use because their code crashed (a signal), did
  /// not return within its time limit or threw something that is not a std::exception in the
  /// supervised child that ran it first: "plugin 'FILE': killed by signal 11 (Segmentation
  /// fault) while STAGE". Commands that do not need them go on without them.
  std::vector<std::string> broken_plugins();

  /// The plugins discover() set aside because their records are refused (SetAsidePlugin), in
  /// search order.
  std::vector<SetAsidePlugin> set_aside_plugins();

  /// Builds the scheme `name_or_path` with `params` (its YAML keys besides `scheme`) and `ctx`.
  /// Each distinct (plugin, settings, context) is built first in a supervised child, where each
  /// hook the scheme declares is called once at a small shape and its output checked. Throws
  /// PluginError naming the available schemes when the name is unknown (naming the set-aside
  /// library and why, when one has the name, or when two libraries have it), for a file that is not
  /// a hybridlab plugin (at the scheme's file:line), when the factory throws (its message
  /// included), or for a hook that fails or returns the wrong shape, dtype or device (the hook,
  /// expected and got); PluginCrashed when the plugin's code crashed, hung or threw something
  /// that is not a std::exception in the child (its file, what it was doing, the signal or the
  /// time limit); ConfigError for bad or unknown params (after the factory ran, all at once).
  std::shared_ptr<PositionScheme> create(const std::string& name_or_path, Section& params,
                                         const PositionContext& ctx);

  /// Builds the mixer `name_or_path` (a mixer plugin's name, or its .so path) with `params` (its
  /// `model.<name>` section, a layer's overrides applied) and `ctx`. Each distinct (plugin,
  /// settings, context) is built first in a supervised child and run once at [1, 8, d_model]
  /// (output shape, dtype and finiteness checked; MixerInfo figures and document_boundaries() in
  /// range). Throws PluginError naming the available mixer plugins when the name is unknown or
  /// names a positional scheme (naming the set-aside library and why, when one has the name),
  /// when the factory throws (its message included) or the forward fails; PluginCrashed when its
  /// code crashed, hung or threw something foreign in the child; ConfigError for bad or unknown
  /// params.
  std::shared_ptr<Mixer> create_mixer(const std::string& name_or_path, Section& params,
                                      const MixerContext& ctx);

  /// The .so files discover() found but did not load, each as "path (reason)": libraries that
  /// are not hybridlab plugins.
  std::vector<std::string> skipped_files();

  /// Loads and checks one plugin file; returns its record. Throws PluginError and PluginCrashed
  /// as above.
  PluginRecord load_file(const std::string& path);

  /// The default plugin folder of this installation: <dir of the
  /// executable>/../lib/hybridlab/plugins.
  static std::string default_plugin_dir();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hybridlab

namespace hybridlab {
/// Reads the `plugins:` section (`paths: [dir, ...]`, relative to the config file's folder) and
/// returns a host that searches those folders first. Throws ConfigError at `file:line:col` of the
/// entry for a path that is empty, does not exist, is not a folder or cannot be read.
std::unique_ptr<PluginHost> make_plugin_host(const Config& cfg);

/// The host make_plugin_host returns, without checking or reporting the `plugins:` section:
/// entries that are not readable folders are left out (the section's own reader reports them).
/// For lookups while a configuration is still being read (a pattern letter of a mixer plugin).
std::unique_ptr<PluginHost> make_plugin_host_unchecked(const Config& cfg);
}  // namespace hybridlab
