// Mixer types provided by mixer plugins (hybridlab/mixer.h): the registry of a search path, over
// the built-in types, and building any type (a plugin's through the plugin host, which reads
// its settings).

#include <fmt/format.h>

#include "model/mixer.h"

namespace hybridlab {

namespace {

MixerType plugin_mixer_type(const PluginRecord& r) {
  MixerType t;
  t.name = r.name;
  t.letter = r.letter;
  t.description = r.description + " (plugin " + r.file + ")";
  t.plugin_file = r.file;
  t.eval_safe_keys = r.eval_safe_keys;
  return t;  // no factory: the host calls the library's (build_mixer)
}

}  // namespace

std::shared_ptr<Mixer> build_mixer(const MixerType& type, Section& params, const MixerContext& ctx,
                                   PluginHost& host) {
  if (type.factory) return type.factory(params, ctx);
  return host.create_mixer(type.name, params, ctx);
}

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
