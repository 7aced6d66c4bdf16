// Config: loading with `extends`, merging, overrides, locations, resolved output.

#include "hybridlab/config.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "config/config_state.h"
#include "hybridlab/version.h"

namespace hybridlab {
namespace fs = std::filesystem;
using detail::ConfigState;

std::string Location::str() const {
  if (line <= 0) return file;
  return file + ":" + std::to_string(line) + ":" + std::to_string(column);
}

namespace detail {

std::vector<std::string> split_path(const std::string& dotted) {
  std::vector<std::string> parts;
  if (dotted.empty()) return parts;
  std::string cur;
  for (char c : dotted) {
    if (c == '.') {
      parts.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  parts.push_back(cur);
  return parts;
}

void set_path(YAML::Node root, const std::vector<std::string>& parts, const YAML::Node& value) {
  YAML::Node cur = root;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    // Node handles alias the tree: rebind with reset(); `a = b` would assign into the tree.
    YAML::Node next;
    next.reset(cur[parts[i]]);
    if (!next.IsMap()) {
      cur[parts[i]] = YAML::Node(YAML::NodeType::Map);
      next.reset(cur[parts[i]]);
    }
    cur.reset(next);
  }
  cur[parts.back()] = value;
}

}  // namespace detail

namespace {

std::string join_path(const std::string& prefix, const std::string& key) {
  return prefix.empty() ? key : prefix + "." + key;
}

Location mark_location(const std::string& file, const YAML::Mark& m) {
  return Location{file, m.line + 1, m.column + 1};
}

// Records the location of every map key under `node` and refuses duplicate keys (yaml-cpp keeps
// both silently and returns the first: see reference/cpp_conventions.md section 3).
void index_node(const YAML::Node& node, const std::string& prefix, const std::string& file,
                std::map<std::string, Location>& locations) {
  if (node.IsSequence()) {  // list entries are located as <key>.<index>
    for (std::size_t i = 0; i < node.size(); ++i) {
      const std::string path = join_path(prefix, std::to_string(i));
      locations[path] = mark_location(file, node[i].Mark());
      index_node(node[i], path, file, locations);
    }
    return;
  }
  if (!node.IsMap()) return;
  std::set<std::string> seen;
  for (const auto& kv : node) {
    const std::string key = kv.first.Scalar();
    const Location loc = mark_location(file, kv.first.Mark());
    if (!seen.insert(key).second) {
      throw ConfigError(loc.str() + ": " + join_path(prefix, key) +
                        ": duplicate key (each key may appear once in a map; remove one)");
    }
    const std::string path = join_path(prefix, key);
    locations[path] = loc;
    index_node(kv.second, path, file, locations);
  }
}

// dst <- src: maps merge key by key, anything else is replaced.
void merge_into(YAML::Node dst, const YAML::Node& src) {
  for (const auto& kv : src) {
    const std::string key = kv.first.Scalar();
    const YAML::Node& cdst = dst;
    const YAML::Node existing =
        cdst[key];  // a missing key gives an invalid node: test IsDefined first
    if (existing.IsDefined() && existing.IsMap() && kv.second.IsMap()) {
      merge_into(dst[key], kv.second);
    } else {
      dst[key] = YAML::Clone(kv.second);
    }
  }
}

YAML::Node parse_text(const std::string& text, const std::string& name) {
  try {
    YAML::Node n = YAML::Load(text);
    if (n.IsNull() || !n.IsDefined()) return YAML::Node(YAML::NodeType::Map);
    if (!n.IsMap()) {
      throw ConfigError(
          mark_location(name, n.Mark()).str() +
          ": the top level of a config must be a map of sections (model:, task:, ...)");
    }
    return n;
  } catch (const YAML::ParserException& e) {
    throw ConfigError(mark_location(name, e.mark).str() + ": YAML syntax error: " + e.msg);
  }
}

void load_into(ConfigState& st, const YAML::Node& doc, const std::string& name,
               const fs::path& base_dir, std::vector<std::string>& chain);

void load_file_into(ConfigState& st, const std::string& path, const std::string& referrer,
                    std::vector<std::string>& chain) {
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    throw ConfigError(referrer + "config file '" + path + "' does not exist");
  }
  if (fs::is_directory(path, ec)) {
    throw ConfigError(referrer + "'" + path + "' is a folder, not a YAML config file");
  }
  std::ifstream in(path);
  if (!in) throw ConfigError(referrer + "cannot read config file '" + path + "'");
  const std::string canon = fs::weakly_canonical(path, ec).string();
  if (std::find(chain.begin(), chain.end(), canon) != chain.end()) {
    std::string cycle;
    for (const auto& c : chain) cycle += c + " -> ";
    throw ConfigError(referrer + "`extends` cycle: " + cycle + canon);
  }
  chain.push_back(canon);
  std::stringstream ss;
  ss << in.rdbuf();
  const YAML::Node doc = parse_text(ss.str(), path);
  load_into(st, doc, path, fs::path(path).parent_path(), chain);
  chain.pop_back();
}

void load_into(ConfigState& st, const YAML::Node& doc, const std::string& name,
               const fs::path& base_dir, std::vector<std::string>& chain) {
  std::map<std::string, Location> locs;
  index_node(doc, "", name, locs);
  const YAML::Node ext = doc["extends"];
  if (ext.IsDefined() && !ext.IsNull()) {
    std::vector<std::string> bases;
    if (ext.IsScalar()) {
      bases.push_back(ext.Scalar());
    } else if (ext.IsSequence()) {
      for (const auto& e : ext) {
        if (!e.IsScalar()) {
          throw ConfigError(mark_location(name, e.Mark()).str() +
                            ": extends: expected a file name or a list of file names");
        }
        bases.push_back(e.Scalar());
      }
    } else {
      throw ConfigError(locs["extends"].str() +
                        ": extends: expected a file name or a list of file names");
    }
    for (const auto& b : bases) {
      const fs::path p = fs::path(b).is_absolute() ? fs::path(b) : base_dir / b;
      load_file_into(st, p.string(), locs["extends"].str() + ": extends: ", chain);
    }
  }
  YAML::Node body(YAML::NodeType::Map);
  for (const auto& kv : doc) {
    if (kv.first.Scalar() != "extends") body[kv.first.Scalar()] = YAML::Clone(kv.second);
  }
  merge_into(st.tree, body);
  locs.erase("extends");
  for (const auto& [k, v] : locs) st.locations[k] = v;
}

}  // namespace

Config::Config() : state_(std::make_shared<ConfigState>()) {}
Config::Config(std::shared_ptr<ConfigState> state) : state_(std::move(state)) {}

Config Config::load(const std::string& path) {
  Config cfg;
  cfg.state_->file = path;
  std::vector<std::string> chain;
  load_file_into(*cfg.state_, path, "", chain);
  return cfg;
}

Config Config::parse(const std::string& text, const std::string& name) {
  Config cfg;
  std::vector<std::string> chain;
  load_into(*cfg.state_, parse_text(text, name), name, fs::current_path(), chain);
  return cfg;
}

void Config::apply_override(const std::string& assignment, const std::string& origin) {
  const auto eq = assignment.find('=');
  const Location where{origin + " override '" + assignment + "'", 0, 0};
  if (eq == std::string::npos || eq == 0) {
    throw ConfigError(where.file + ": expected key=value, e.g. model.d_model=512");
  }
  const std::string key = assignment.substr(0, eq);
  for (char c : key) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-')) {
      throw ConfigError(where.file + ": '" + key +
                        "' is not a dotted key (letters, digits, '_', '-' and '.')");
    }
  }
  const std::string text = assignment.substr(eq + 1);
  if (text.find_first_not_of(" \t") == std::string::npos) {
    throw ConfigError(where.file + ": the value is empty; write the value after '=' (or " + key +
                      "=null to unset the key)");
  }
  YAML::Node value;
  try {
    value = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw ConfigError(where.file + ": the value is not valid YAML: " + e.msg +
                      " (lists are written [a,b], maps {k: v})");
  }
  set(key, value, where);
}

void Config::set(const std::string& dotted_key, const YAML::Node& value, const Location& where) {
  const auto parts = detail::split_path(dotted_key);
  if (parts.empty() ||
      std::any_of(parts.begin(), parts.end(), [](const std::string& p) { return p.empty(); })) {
    throw ConfigError(where.str() + ": '" + dotted_key + "' is not a valid dotted key");
  }
  detail::set_path(state_->tree, parts, YAML::Clone(value));
  // Locations under the replaced key are stale now.
  for (auto it = state_->locations.begin(); it != state_->locations.end();) {
    if (it->first.rfind(dotted_key + ".", 0) == 0) {
      it = state_->locations.erase(it);
    } else {
      ++it;
    }
  }
  state_->locations[dotted_key] = where;
}

YAML::Node Config::lookup(const std::string& dotted_key) const {
  YAML::Node cur = YAML::Clone(state_->tree);
  for (const auto& p : detail::split_path(dotted_key)) {
    if (!cur.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
    const YAML::Node& c = cur;
    YAML::Node next = c[p];
    if (!next.IsDefined()) return YAML::Node(YAML::NodeType::Undefined);
    cur.reset(next);
  }
  return cur;
}

Location Config::location(const std::string& dotted_key) const {
  std::string k = dotted_key;
  while (true) {
    auto it = state_->locations.find(k);
    if (it != state_->locations.end()) return it->second;
    const auto dot = k.rfind('.');
    if (dot == std::string::npos) break;
    k = k.substr(0, dot);
  }
  return Location{state_->file.empty() ? "<config>" : state_->file, 0, 0};
}

const YAML::Node& Config::tree() const { return state_->tree; }
const std::string& Config::file() const { return state_->file; }

Section Config::root() const { return Section(state_, "", state_->tree); }

Section Config::section(const std::string& dotted_path) const {
  if (dotted_path.empty()) return root();
  return Section(state_, dotted_path, lookup(dotted_path));
}

YAML::Node Config::resolved() const { return state_->resolved; }

std::string Config::resolved_yaml() const {
  YAML::Emitter out;
  out << state_->resolved;
  std::string header = "# resolved configuration";
  if (!state_->file.empty()) header += " of " + state_->file;
  header += " (hybridlab " HYBRIDLAB_VERSION "): every value used, defaults included\n";
  return header + out.c_str() + "\n";
}

const std::vector<std::string>& Config::errors() const { return state_->errors; }

void Config::raise_errors() const {
  if (state_->errors.empty()) return;
  std::string msg;
  if (state_->errors.size() > 1) {
    msg = std::to_string(state_->errors.size()) + " problems in the configuration:\n";
  }
  for (size_t i = 0; i < state_->errors.size(); ++i) {
    if (i) msg += "\n";
    msg += state_->errors[i];
  }
  throw ConfigError(msg);
}

Config Config::clone() const {
  auto st = std::make_shared<ConfigState>();
  st->tree = YAML::Clone(state_->tree);
  st->locations = state_->locations;
  st->file = state_->file;
  return Config(st);
}

std::string nearest_key(const std::string& key, const std::vector<std::string>& known) {
  auto distance = [](const std::string& a, const std::string& b) {
    std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
      cur[0] = i;
      for (size_t j = 1; j <= b.size(); ++j) {
        const size_t sub = prev[j - 1] + (std::tolower(a[i - 1]) == std::tolower(b[j - 1]) ? 0 : 1);
        cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
      }
      std::swap(prev, cur);
    }
    return prev[b.size()];
  };
  std::string best;
  size_t best_d = std::string::npos;
  for (const auto& k : known) {
    const size_t d = distance(key, k);
    if (d < best_d) {
      best_d = d;
      best = k;
    }
  }
  const size_t limit = std::max<size_t>(2, key.size() / 3);
  return best_d <= limit ? best : "";
}

}  // namespace hybridlab
