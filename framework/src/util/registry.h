#pragma once
// The one registry idiom of every extension point: mixer types, tasks, positional-scheme and
// mixer plugins, CLI commands. Entries are keyed by name and remember where they came from (a
// file, "built in"), so a duplicate names both; an unknown name gets the nearest known one.

#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "hybridlab/config.h"

namespace hybridlab {

/// Thrown by Registry::add for a name that is taken. what(): "two <kind>s are named 'NAME':
/// ORIGIN1 and ORIGIN2".
class DuplicateEntry : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

template <class T>
class Registry {
 public:
  /// `kind` names an entry in messages ("task", "mixer type", "plugin").
  explicit Registry(std::string kind) : kind_(std::move(kind)) {}

  /// Adds `entry` as `name`, from `origin` (a file path, "built in"). Returns the stored entry.
  /// Throws DuplicateEntry naming both origins when `name` is taken.
  T& add(const std::string& name, T entry, const std::string& origin) {
    if (auto it = entries_.find(name); it != entries_.end()) {
      throw DuplicateEntry("two " + kind_ + "s are named '" + name + "': " + it->second.second +
                           " and " + origin);
    }
    return entries_.emplace(name, std::make_pair(std::move(entry), origin)).first->second.first;
  }

  /// The entry called `name`, or nullptr.
  const T* find(const std::string& name) const {
    auto it = entries_.find(name);
    return it == entries_.end() ? nullptr : &it->second.first;
  }
  T* find(const std::string& name) {
    auto it = entries_.find(name);
    return it == entries_.end() ? nullptr : &it->second.first;
  }

  /// Where the entry called `name` came from ("" when there is none).
  std::string origin(const std::string& name) const {
    auto it = entries_.find(name);
    return it == entries_.end() ? std::string() : it->second.second;
  }

  /// Every name, sorted.
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& kv : entries_) out.push_back(kv.first);
    return out;
  }

  /// Every entry, sorted by name.
  std::vector<const T*> entries() const {
    std::vector<const T*> out;
    for (const auto& kv : entries_) out.push_back(&kv.second.first);
    return out;
  }

  /// "unknown <kind> 'NAME'; did you mean 'NEAR'? (<kind>s: a, b, c)" (the hint only when a
  /// known name is close).
  std::string unknown(const std::string& name) const {
    std::string list;
    for (const auto& kv : entries_) list += (list.empty() ? "" : ", ") + kv.first;
    const std::string near = nearest_key(name, names());
    return "unknown " + kind_ + " '" + name + "'" +
           (near.empty() ? "" : "; did you mean '" + near + "'?") + " (" + kind_ +
           "s: " + (list.empty() ? "none" : list) + ")";
  }

  size_t size() const { return entries_.size(); }
  const std::string& kind() const { return kind_; }

 private:
  std::string kind_;
  std::map<std::string, std::pair<T, std::string>> entries_;  // name -> (entry, origin)
};

}  // namespace hybridlab
