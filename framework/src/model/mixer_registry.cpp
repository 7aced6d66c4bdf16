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
  for (const MixerType& t : types_) {
    if (t.name == type.name || t.letter == type.letter) {
      throw std::logic_error("mixer type '" + type.name + "' (letter " + type.letter +
                             ") clashes with '" + t.name + "' (letter " + t.letter + ")");
    }
  }
  types_.push_back(std::move(type));
}

const MixerType* MixerRegistry::find(const std::string& key) const {
  for (const MixerType& t : types_) {
    if (t.name == key || (key.size() == 1 && key[0] == t.letter)) return &t;
  }
  return nullptr;
}

std::vector<std::pair<char, std::string>> builtin_mixers() {
  std::vector<std::pair<char, std::string>> out;
  for (const MixerType& t : MixerRegistry::instance().types()) out.emplace_back(t.letter, t.name);
  return out;
}

std::string MixerRegistry::names() const {
  std::string out;
  for (const MixerType& t : types_) {
    if (!out.empty()) out += ", ";
    out += std::string(1, t.letter) + " (" + t.name + ")";
  }
  return out;
}

}  // namespace hybridlab
