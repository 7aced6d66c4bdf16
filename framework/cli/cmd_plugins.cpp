// `hybridlab plugins list`: the positional-scheme and mixer plugins this installation finds.

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>

#include "commands.h"
#include "hybridlab/model.h"
#include "hybridlab/plugin_host.h"

namespace hybridlab::cli {
namespace fs = std::filesystem;

void add_plugins_command(CLI::App& app) {
  auto* plugins = app.add_subcommand("plugins", "Positional-scheme and mixer plugins");
  plugins->require_subcommand(1);
  struct Args {
    std::vector<std::string> paths;
    std::string config;
  };
  auto args = std::make_shared<Args>();
  auto* list = plugins->add_subcommand(
      "list",
      "List the plugins found: name, kind (position, or mixer with its pattern letter), version, "
      "hooks (a mixer: the keys evaluation variants may change), file and description. Searches "
      "--path folders, then HYBRIDLAB_PLUGIN_PATH, then the installation's plugin folder");
  list->add_option("--path", args->paths, "Extra plugin folder(s) to search first");
  list->add_option("--config", args->config, "Also search `plugins.paths` of this experiment YAML");
  list->callback([args] {
    std::vector<std::string> paths = args->paths;
    if (!args->config.empty()) {
      Config cfg = Config::load(args->config);
      auto host = make_plugin_host(cfg);
      for (const auto& p : host->search_path()) paths.push_back(p);
    }
    PluginHost host(paths);
    // Every library's code ran first in a supervised child: one that crashed or hung there is
    // listed as such, and the others are listed as usual.
    const auto records = host.plugins();
    if (records.empty()) {
      std::cout << "no working plugins found; searched:\n";
      for (const auto& p : host.search_path()) std::cout << "  " << p << "\n";
    }
    // The name column fits the longest name (gated_deltaproduct), so the columns stay aligned.
    size_t width = 16;
    for (const auto& r : records) width = std::max(width, r.name.size());
    const auto row = [width](const std::string& name, const std::string& kind,
                             const std::string& version, const std::string& hooks,
                             const std::string& text) {
      return fmt::format("{:<{}} {:<10} {:<8} {:<28} {}\n", name, width, kind, version, hooks,
                         text);
    };
    if (!records.empty()) std::cout << row("NAME", "KIND", "VERSION", "HOOKS", "DESCRIPTION");
    for (const auto& r : records) {
      const bool mixer = r.kind == kPluginKindMixer;
      const std::string eval_keys = r.eval_safe_keys.empty()
                                        ? std::string("-")
                                        : fmt::format("eval: {}", fmt::join(r.eval_safe_keys, ","));
      std::cout << row(r.name, mixer ? fmt::format("mixer {}", r.letter) : std::string("position"),
                       r.version, mixer ? eval_keys : hook_names(r.hooks), r.description);
      std::cout << row("", "", "", "", r.file);
    }
    // What each pattern letter names on this search path, built-in and plugin types in one
    // registry; a mixer plugin whose letter or name is taken is never reached by a pattern.
    Config search;
    YAML::Node folders(YAML::NodeType::Sequence);
    for (const std::string& p : paths)
      folders.push_back(fs::absolute(p).lexically_normal().string());
    search.set("plugins.paths", folders, Location{"--path", 0, 0});
    std::vector<std::string> unused;
    std::cout << "mixer pattern letters:\n";
    for (const MixerTypeInfo& t : mixer_types(search, true, &unused))
      std::cout << fmt::format("  {} {} ({})\n", t.letter, t.name, t.origin);
    // Also when nothing worked: a library that crashed or timed out is named, not hidden.
    for (const std::string& u : unused) std::cout << u << "; rename it\n";
    for (const auto& s : host.skipped_files()) std::cout << "skipped: " << s << "\n";
    // Refused records: set aside so that the other plugins work; named here and where used.
    for (const auto& a : host.set_aside_plugins())
      std::cout << "skipped: " << a.file << " (set aside: " << a.reason << ")\n";
    for (const auto& c : host.broken_plugins()) std::cout << "crashed: " << c << "\n";
  });
}

}  // namespace hybridlab::cli
