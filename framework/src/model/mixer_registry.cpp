#include <mutex>
#include <stdexcept>

#include "model/mixer.h"

namespace hybridlab {

void register_builtin_mixers(MixerRegistry& registry) {
  registry.add(attention_mixer_type());
  registry.add(gated_deltanet_mixer_type());
}

const MixerRegistry& MixerRegistry::instance() {
  static MixerRegistry registry;
  static std::once_flag once;
  std::call_once(once, [] { register_builtin_mixers(registry); });
  return registry;
}

void MixerRegistry::add(MixerType type) {
  const std::string letter(1, type.letter), origin = "mixer type '" + type.name + "'";
  if (by_name_.find(type.name) == nullptr) by_letter_.add(letter, type.name, origin);
  const std::string name = type.name;
  by_name_.add(name, std::move(type), origin);
}

const MixerType* MixerRegistry::find(const std::string& key) const {
  if (const MixerType* t = by_name_.find(key)) return t;
  const std::string* name = key.size() == 1 ? by_letter_.find(key) : nullptr;
  return name ? by_name_.find(*name) : nullptr;
}

std::vector<std::pair<char, std::string>> builtin_mixers() {
  std::vector<std::pair<char, std::string>> out;
  for (const MixerType* t : MixerRegistry::instance().types()) out.emplace_back(t->letter, t->name);
  return out;
}

std::vector<MixerEvalKeys> mixer_eval_keys(const Config& cfg, bool with_plugins) {
  std::vector<MixerEvalKeys> out;
  for (const MixerType* t : MixerRegistry::instance().types())
    out.push_back({t->name, t->eval_safe_keys});
  if (with_plugins) {
    for (const MixerType* t : find_plugin_mixer(cfg, "").all)
      out.push_back({t->name, t->eval_safe_keys});
  }
  return out;
}

std::string MixerRegistry::names() const {
  std::string out;
  for (const MixerType* t : types()) {
    if (!out.empty()) out += ", ";
    out += std::string(1, t->letter) + " (" + t->name + ")";
  }
  return out;
}

}  // namespace hybridlab
