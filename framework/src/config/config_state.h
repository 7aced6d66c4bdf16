#pragma once
// Internal state shared by Config and its Sections.

#include <yaml-cpp/yaml.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "hybridlab/config.h"

namespace hybridlab::detail {

struct ConfigState {
  YAML::Node tree{YAML::NodeType::Map};       // merged tree, `extends` removed
  std::map<std::string, Location> locations;  // dotted key path -> where it was set
  std::string file;                           // the file given to Config::load
  std::string origin;  // the name given to Config::parse (messages only: not a base folder)
  YAML::Node resolved{YAML::NodeType::Map};  // what readers read, defaults filled in
  std::vector<std::string> errors;           // recorded problems, in order
  std::set<std::string> error_set;           // to report each problem once
};

/// Splits "a.b.c" into {"a","b","c"}.
std::vector<std::string> split_path(const std::string& dotted);
/// Sets root[a][b][c] = value, creating maps on the way (replacing non-map intermediates).
void set_path(YAML::Node root, const std::vector<std::string>& parts, const YAML::Node& value);

}  // namespace hybridlab::detail
