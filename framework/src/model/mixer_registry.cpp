// The mixer types by name and letter: the built-in ones, and over them those of each plugin
// search path (mixer_plugins.cpp fills those).

#include <fmt/format.h>

#include <mutex>
#include <stdexcept>

#include "model/mixer.h"

namespace hybridlab {

void register_builtin_mixers(MixerRegistry& registry) {
  registry.add(attention_mixer_type(), "built in");
  registry.add(gated_deltanet_mixer_type(), "built in");
}

const MixerRegistry& MixerRegistry::builtin() {
  static MixerRegistry registry;
  static std::once_flag once;
  std::call_once(once, [] { register_builtin_mixers(registry); });
  return registry;
}

const MixerRegistry& MixerRegistry::of(const Config& cfg) {
  // One registry per search path, for the process: its plugin types must outlive every model.
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<MixerRegistry>> by_search_path;
  std::string search;
  try {
    for (const std::string& p : make_plugin_host_unchecked(cfg)->search_path()) search += p + ":";
  } catch (const std::exception&) {
    search.clear();  // scan() says why
  }
  std::lock_guard<std::mutex> lock(mu);
  std::unique_ptr<MixerRegistry>& r = by_search_path[search];
  if (!r) r = scan(cfg);
  return *r;
}

void MixerRegistry::add(MixerType type, const std::string& origin) {
  const std::string letter(1, type.letter);
  // A name or a letter taken here or among the built-in types: both named, with their origins.
  for (const MixerRegistry* r : {builtin_, static_cast<const MixerRegistry*>(this)}) {
    if (!r) continue;
    const MixerType* taken = r->by_name_.find(type.name);
    const bool by_name = taken != nullptr;
    if (!taken) taken = r->find(letter);
    if (!taken) continue;
    throw DuplicateEntry(
        fmt::format("'{}' (letter {}, {}) is not used: '{}' (letter {}, {}) has "
                    "its {}",
                    type.name, type.letter, origin, taken->name, taken->letter,
                    r->origin(taken->name), by_name ? "name" : "letter"));
  }
  const std::string name = type.name;
  by_letter_.add(letter, name, origin);
  by_name_.add(name, std::move(type), origin);
}

const MixerType* MixerRegistry::find(const std::string& key) const {
  if (builtin_) {
    if (const MixerType* t = builtin_->find(key)) return t;
  }
  if (const MixerType* t = by_name_.find(key)) return t;
  const std::string* name = key.size() == 1 ? by_letter_.find(key) : nullptr;
  return name ? by_name_.find(*name) : nullptr;
}

std::string MixerRegistry::origin(const std::string& name) const {
  if (builtin_ && builtin_->by_name_.find(name)) return builtin_->origin(name);
  return by_name_.origin(name);
}

std::vector<const MixerType*> MixerRegistry::types() const {
  std::vector<const MixerType*> out =
      builtin_ ? builtin_->types() : std::vector<const MixerType*>{};
  for (const MixerType* t : by_name_.entries()) out.push_back(t);
  return out;
}

std::string MixerRegistry::names() const {
  std::string out;
  for (const MixerType* t : types()) {
    out += fmt::format("{}{} ({}{})", out.empty() ? "" : ", ", t->letter, t->name,
                       t->plugin_file.empty() ? "" : ", plugin");
  }
  return out;
}

std::string MixerRegistry::set_aside(const std::string& key) const {
  if (find(key)) return "";
  for (const SetAsidePlugin& a : set_aside_) {
    if (!(a.name == key || (key.size() == 1 && a.letter != 0 && key[0] == a.letter))) continue;
    return fmt::format("mixer plugin '{}'{} is set aside: {}", a.file,
                       a.letter ? fmt::format(" (letter {})", a.letter) : std::string(), a.reason);
  }
  return "";
}

std::vector<MixerTypeInfo> mixer_types(const Config& cfg, bool with_plugins,
                                       std::vector<std::string>* unused) {
  const MixerRegistry& r = with_plugins ? MixerRegistry::of(cfg) : MixerRegistry::builtin();
  std::vector<MixerTypeInfo> out;
  for (const MixerType* t : r.types())
    out.push_back({t->letter, t->name, r.origin(t->name), t->eval_safe_keys});
  if (unused) *unused = r.unused();
  return out;
}

}  // namespace hybridlab
