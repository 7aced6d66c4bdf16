// Mixer types provided by mixer plugins (hybridlab/mixer.h): found through the plugin host by
// pattern letter or name, and built through it. Their settings are the plugin's to read.

#include <fmt/format.h>

#include <map>
#include <mutex>

#include "model/mixer.h"

namespace hybridlab {

namespace {

// A plugin mixer's settings: the `model.<name>` map, or it with a layer's override merged over
// it, kept for the plugin's factory (which reads and checks them when the model is built).
struct PluginMixerSettings {
  Config config;
  std::string path;  ///< where the settings stand: "model.deltanet", "model.overrides.3"
  YAML::Node node;   ///< a map
};

MixerType plugin_mixer_type(const PluginRecord& r) {
  MixerType t;
  t.name = r.name;
  t.letter = r.letter;
  t.description = r.description + " (plugin " + r.file + ")";
  t.plugin_file = r.file;
  t.eval_safe_keys = r.eval_safe_keys;
  t.read = [](Section s, const ModelDims&, const std::any* base) -> std::any {
    PluginMixerSettings out{s.config(), s.path(),
                            base
                                ? YAML::Clone(std::any_cast<const PluginMixerSettings&>(*base).node)
                                : YAML::Node(YAML::NodeType::Map)};
    if (s.node().IsDefined() && !s.node().IsMap()) return out;  // child() reported it
    for (const std::string& key : s.keys()) {
      s.accept(key);  // the plugin reads (and reports) its keys when it builds the mixer
      out.node[key] = YAML::Clone(s.node()[key]);
    }
    return out;
  };
  const std::string name = r.name;
  t.build = [name](const std::any& opts, const MixerBuildContext& ctx) -> std::shared_ptr<Mixer> {
    const auto& settings = std::any_cast<const PluginMixerSettings&>(opts);
    if (!ctx.host) throw PluginError("mixer '" + name + "' is a plugin: building it needs a host");
    Section params = settings.config.section_at(settings.path, settings.node);
    MixerContext mc;
    mc.d_model = ctx.d_model;
    mc.layer_index = ctx.layer_index;
    mc.train_length = ctx.lengths.train_length;
    mc.max_length = ctx.lengths.max_length;
    mc.fused_kernels = ctx.fused_kernels;
    return ctx.host->create_mixer(name, params, mc);
  };
  return t;
}

// The mixer plugins of one search path, as types, with what is amiss among them.
struct PluginMixerTable {
  std::vector<std::unique_ptr<MixerType>> types;
  std::string note;
  std::vector<SetAsidePlugin> set_aside;  ///< mixer plugins whose records are refused
};

PluginMixerTable scan(const Config& cfg) {
  PluginMixerTable table;
  const MixerRegistry& builtin = MixerRegistry::instance();
  std::vector<std::string> notes;
  try {
    auto host = make_plugin_host_unchecked(cfg);
    for (const PluginRecord& r : host->plugins()) {
      if (r.kind != kPluginKindMixer) continue;
      const std::string letter(1, r.letter);
      const MixerType* clash = builtin.find(letter);
      if (!clash) clash = builtin.find(r.name);
      for (const auto& t : table.types)
        if (!clash && (t->letter == r.letter || t->name == r.name)) clash = t.get();
      if (clash) {
        notes.push_back(fmt::format(
            "mixer plugin '{}' (letter {}, {}) is not used: '{}' (letter {}) has its {}", r.name,
            letter, r.file, clash->name, clash->letter,
            clash->letter == r.letter ? "letter" : "name"));
        continue;
      }
      table.types.push_back(std::make_unique<MixerType>(plugin_mixer_type(r)));
    }
    for (const std::string& b : host->broken_plugins()) notes.push_back(b);
    for (const SetAsidePlugin& a : host->set_aside_plugins())
      if (a.kind == kPluginKindMixer) table.set_aside.push_back(a);
  } catch (const std::exception& e) {
    notes.push_back(std::string("searching the mixer plugins failed: ") + e.what());
  }
  for (const std::string& n : notes) table.note += (table.note.empty() ? "" : "; ") + n;
  return table;
}

}  // namespace

PluginMixerLookup find_plugin_mixer(const Config& cfg, const std::string& key) {
  static std::mutex mu;
  static auto* tables = new std::map<std::string, PluginMixerTable>();  // by search path
  std::string search;
  for (const std::string& p : make_plugin_host_unchecked(cfg)->search_path()) search += p + ":";
  std::lock_guard<std::mutex> lock(mu);
  auto it = tables->find(search);
  if (it == tables->end()) it = tables->emplace(search, scan(cfg)).first;
  PluginMixerLookup out;
  out.note = it->second.note;
  for (const auto& t : it->second.types) {
    out.all.push_back(t.get());
    out.names +=
        fmt::format("{}{} ({}, plugin)", out.names.empty() ? "" : ", ", t->letter, t->name);
    if (!out.type && (t->name == key || (key.size() == 1 && key[0] == t->letter))) {
      out.type = t.get();
    }
  }
  // A set-aside library is named only when the key is its letter or name: the others work.
  for (const SetAsidePlugin& a : it->second.set_aside) {
    if (out.type || !(a.name == key || (key.size() == 1 && a.letter != 0 && key[0] == a.letter)))
      continue;
    out.set_aside =
        fmt::format("mixer plugin '{}'{} is set aside: {}", a.file,
                    a.letter ? fmt::format(" (letter {})", a.letter) : std::string(), a.reason);
    break;
  }
  return out;
}

}  // namespace hybridlab
