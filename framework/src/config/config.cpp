// Config: loading with `extends`, merging, overrides, locations, resolved output.

#include "hybridlab/config.h"

#include <algorithm>
#include <cerrno>
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

// A config is a few hundred values; anything past this is an alias bomb ("billion laughs": each
// anchor repeats the previous one ten times) or a generated file that does not belong here.
// yaml-cpp shares aliased nodes, so parsing is cheap; walking, copying or printing the tree is
// what explodes, so the walk below counts every value it visits and stops at the limit.
constexpr std::size_t kMaxConfigValues = 100000;
constexpr std::uintmax_t kMaxConfigBytes = 16u << 20;

struct IndexBudget {
  std::size_t visited = 0;
};

std::string node_text_for_key(const YAML::Node& key) { return quote_value(key, 40); }

// Records the location of every map key under `node` and refuses what a config never needs:
// duplicate keys (yaml-cpp keeps both silently and returns the first: see
// reference/cpp_conventions.md section 3), keys that are not plain names, YAML tags (`!!str 20`,
// `!foo`: one spelling per type, see section.cpp), and trees that expand past kMaxConfigValues.
void index_node(const YAML::Node& node, const std::string& prefix, const std::string& file,
                std::map<std::string, Location>& locations, IndexBudget& budget) {
  if (++budget.visited > kMaxConfigValues) {
    throw ConfigError(mark_location(file, node.Mark()).str() + ": " +
                      (prefix.empty() ? std::string("the file") : prefix) +
                      ": the configuration expands to more than " +
                      std::to_string(kMaxConfigValues) +
                      " values (aliases repeating aliases, a 'billion laughs'?); write the "
                      "values out, or share settings with `extends`");
  }
  const std::string& tag = node.Tag();
  if (!tag.empty() && tag != "?" && tag != "!") {
    throw ConfigError(mark_location(file, node.Mark()).str() + ": " +
                      (prefix.empty() ? std::string("the file") : prefix) + ": YAML tag '" + tag +
                      "' is not accepted: values have one spelling per type (write 20, not "
                      "!!str 20; quote a value to make it a string)");
  }
  if (node.IsSequence()) {  // list entries are located as <key>.<index>
    for (std::size_t i = 0; i < node.size(); ++i) {
      const std::string path = join_path(prefix, std::to_string(i));
      locations[path] = mark_location(file, node[i].Mark());
      index_node(node[i], path, file, locations, budget);
    }
    return;
  }
  if (!node.IsMap()) return;
  std::set<std::string> seen;
  for (const auto& kv : node) {
    const Location loc = mark_location(file, kv.first.Mark());
    if (!kv.first.IsScalar()) {
      throw ConfigError(loc.str() + ": " + (prefix.empty() ? std::string("the file") : prefix) +
                        ": a key must be a name, got '" + node_text_for_key(kv.first) + "'");
    }
    const std::string key = kv.first.Scalar();
    if (!seen.insert(key).second) {
      throw ConfigError(loc.str() + ": " + join_path(prefix, key) +
                        ": duplicate key (each key may appear once in a map; remove one)");
    }
    const std::string path = join_path(prefix, key);
    locations[path] = loc;
    index_node(kv.second, path, file, locations, budget);
  }
}

void index_node(const YAML::Node& node, const std::string& prefix, const std::string& file,
                std::map<std::string, Location>& locations) {
  IndexBudget budget;
  index_node(node, prefix, file, locations, budget);
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
    std::vector<YAML::Node> docs = YAML::LoadAll(text);
    if (docs.size() > 1) {
      throw ConfigError(mark_location(name, docs[1].Mark()).str() +
                        ": a second YAML document (after '---'); a config file holds one "
                        "document: merge them, or put the shared part in a base file and use "
                        "`extends`");
    }
    YAML::Node n = docs.empty() ? YAML::Node() : docs.front();
    if (n.IsNull() || !n.IsDefined()) return YAML::Node(YAML::NodeType::Map);
    if (!n.IsMap()) {
      throw ConfigError(
          mark_location(name, n.Mark()).str() +
          ": the top level of a config must be a map of sections (model:, task:, ...)");
    }
    return n;
  } catch (const YAML::ParserException& e) {
    throw ConfigError(mark_location(name, e.mark).str() + ": YAML syntax error: " + e.msg);
  } catch (const YAML::Exception& e) {
    throw ConfigError(mark_location(name, e.mark).str() + ": cannot read the YAML: " + e.msg);
  }
}

void load_into(ConfigState& st, const YAML::Node& doc, const std::string& name,
               const fs::path& base_dir, std::vector<std::string>& chain);

void load_file_into(ConfigState& st, const std::string& path, const std::string& referrer,
                    std::vector<std::string>& chain) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (ec && ec.value() == ELOOP) {
    throw ConfigError(referrer + "config file '" + path + "' is a loop of symbolic links");
  }
  if (!fs::exists(status)) {
    throw ConfigError(referrer + "config file '" + path + "' does not exist");
  }
  if (fs::is_directory(status)) {
    throw ConfigError(referrer + "'" + path + "' is a folder, not a YAML config file");
  }
  if (!fs::is_regular_file(status)) {
    // A device (/dev/zero never ends), a pipe or a socket: reading it could hang or never stop.
    throw ConfigError(referrer + "'" + path +
                      "' is not a regular file (a device, pipe or socket); give a YAML file");
  }
  if (fs::file_size(path, ec) > kMaxConfigBytes) {
    throw ConfigError(referrer + "config file '" + path + "' is " +
                      std::to_string(fs::file_size(path, ec)) + " bytes; a config is at most " +
                      std::to_string(kMaxConfigBytes) + " bytes");
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

void unset_key(ConfigState& st, const std::string& dotted_key) {
  const auto parts = detail::split_path(dotted_key);
  YAML::Node cur = st.tree;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    const YAML::Node& c = cur;
    YAML::Node next = c[parts[i]];
    if (!next.IsDefined() || !next.IsMap()) return;
    cur.reset(next);
  }
  if (!parts.empty() && cur.IsMap()) cur.remove(parts.back());
  for (auto it = st.locations.begin(); it != st.locations.end();) {
    if (it->first == dotted_key || it->first.rfind(dotted_key + ".", 0) == 0) {
      it = st.locations.erase(it);
    } else {
      ++it;
    }
  }
}

// An override value: one YAML document of flow text, checked like a file (tags, key names, size).
YAML::Node parse_override_value(const std::string& text, const std::string& origin) {
  std::vector<YAML::Node> docs = YAML::LoadAll(text);
  if (docs.size() > 1) {
    throw ConfigError(origin + ": the value holds more than one YAML document");
  }
  YAML::Node value = docs.empty() ? YAML::Node(YAML::NodeType::Null) : docs.front();
  std::map<std::string, Location> ignored;
  try {
    index_node(value, "", origin, ignored);
  } catch (const ConfigError& e) {
    // Lines and columns of the value's text mean nothing on a command line: name the override.
    std::string msg = e.what();
    const auto colon = msg.find(": ", origin.size());
    throw ConfigError(origin + msg.substr(colon == std::string::npos ? msg.size() : colon));
  }
  return value;
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
  cfg.state_->origin = name;
  std::vector<std::string> chain;
  load_into(*cfg.state_, parse_text(text, name), name, fs::current_path(), chain);
  return cfg;
}

void Config::apply_override(const std::string& assignment, const std::string& origin) {
  const auto eq = assignment.find('=');
  // Messages quote the assignment; a huge value is cut so that every message stays short.
  constexpr size_t kQuoted = 100;
  const std::string shown = assignment.size() <= kQuoted
                                ? assignment
                                : assignment.substr(0, kQuoted) + "... (" +
                                      std::to_string(assignment.size()) + " characters)";
  const Location where{origin + " override '" + shown + "'", 0, 0};
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
    value = parse_override_value(text, where.file);
  } catch (const YAML::Exception& e) {
    throw ConfigError(where.file + ": the value is not valid YAML: " + e.msg +
                      " (lists are written [a,b], maps {k: v})");
  }
  if (value.IsNull()) {
    unset_key(*state_, key);  // KEY=null: back to the default
    return;
  }
  set(key, value, where);
}

void Config::set(const std::string& dotted_key, const YAML::Node& value, const Location& where) {
  const auto parts = detail::split_path(dotted_key);
  if (parts.empty() ||
      std::any_of(parts.begin(), parts.end(), [](const std::string& p) { return p.empty(); })) {
    throw ConfigError(where.str() + ": '" + dotted_key + "' is not a valid dotted key");
  }
  if (value.IsNull()) {  // an override or sweep value of null: back to the reader's default
    unset_key(*state_, dotted_key);
    return;
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
  // Maps the assignment created (`foo` of `foo.bar=1`) were set there too: an unknown `foo` is
  // blamed on the command line, not on the file.
  std::string prefix;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    prefix += (i ? "." : "") + parts[i];
    state_->locations.emplace(prefix, where);
  }
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
  const std::string& named = state_->file.empty() ? state_->origin : state_->file;
  return Location{named.empty() ? "<config>" : named, 0, 0};
}

const YAML::Node& Config::tree() const { return state_->tree; }
const std::string& Config::file() const { return state_->file; }

Section Config::root() const { return Section(state_, "", state_->tree); }

Section Config::section(const std::string& dotted_path) const {
  if (dotted_path.empty()) return root();
  return Section(state_, dotted_path, lookup(dotted_path));
}

Section Config::section_at(const std::string& dotted_path, const YAML::Node& node) const {
  return Section(state_, dotted_path, node);
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
  // Past a screenful the rest are more of the same: name how many, not each.
  constexpr size_t kShown = 40;
  const size_t n = state_->errors.size();
  for (size_t i = 0; i < std::min(n, kShown); ++i) {
    if (i) msg += "\n";
    msg += state_->errors[i];
  }
  if (n > kShown) msg += "\n... and " + std::to_string(n - kShown) + " more problems";
  throw ConfigError(msg);
}

Config Config::clone() const {
  auto st = std::make_shared<ConfigState>();
  st->tree = YAML::Clone(state_->tree);
  st->locations = state_->locations;
  st->file = state_->file;
  st->origin = state_->origin;
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
