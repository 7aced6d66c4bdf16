// Mixer types provided by mixer plugins (hybridlab/mixer.h): the registry of a search path, over
// the built-in types, and building them through the plugin host. Their settings are the
// plugin's to read.

#include <fmt/format.h>

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

}  // namespace

std::unique_ptr<MixerRegistry> MixerRegistry::scan(const Config& cfg) {
  std::unique_ptr<MixerRegistry> r(new MixerRegistry(&builtin()));
  std::vector<std::string> notes;
  try {
    auto host = make_plugin_host_unchecked(cfg);
    for (const PluginRecord& rec : host->plugins()) {
      if (rec.kind != kPluginKindMixer) continue;
      try {
        r->add(plugin_mixer_type(rec), rec.file);
      } catch (const DuplicateEntry& e) {
        r->unused_.push_back(std::string("mixer plugin ") + e.what());
        notes.push_back(r->unused_.back());
      }
    }
    for (const std::string& b : host->broken_plugins()) notes.push_back(b);
    for (const SetAsidePlugin& a : host->set_aside_plugins())
      if (a.kind == kPluginKindMixer) r->set_aside_.push_back(a);
  } catch (const std::exception& e) {
    notes.push_back(std::string("searching the mixer plugins failed: ") + e.what());
  }
  for (const std::string& n : notes) r->note_ += (r->note_.empty() ? "" : "; ") + n;
  return r;
}

}  // namespace hybridlab
