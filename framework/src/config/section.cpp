// Section: the strict reader over one map of the configuration.

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "config/config_state.h"
#include "hybridlab/config.h"

namespace hybridlab {

Section::Section(std::shared_ptr<detail::ConfigState> state, std::string path, YAML::Node node)
    : state_(std::move(state)),
      path_(std::move(path)),
      node_(std::move(node)),
      known_(std::make_shared<std::set<std::string>>()) {
  if (node_.IsDefined() && !node_.IsNull() && !node_.IsMap()) {
    const Location loc = config().location(path_);
    const std::string line =
        loc.str() + ": " + path_ + ": expected a map of keys, got '" + YAML::Dump(node_) + "'";
    if (state_->error_set.insert(line).second) state_->errors.push_back(line);
    node_ = YAML::Node(YAML::NodeType::Null);
  }
}

std::string Section::key_path(const std::string& key) const {
  return path_.empty() ? key : path_ + "." + key;
}

YAML::Node Section::value(const std::string& key) const {
  if (!node_.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
  const YAML::Node& n = node_;
  return n[key];
}

bool Section::has(const std::string& key) const {
  const YAML::Node v = value(key);
  return v.IsDefined() && !v.IsNull();
}

std::vector<std::string> Section::keys() const {
  std::vector<std::string> out;
  if (!node_.IsMap()) return out;
  for (const auto& kv : node_) out.push_back(kv.first.Scalar());
  return out;
}

Section Section::child(const std::string& key) {
  known_->insert(key);
  if (!has(key)) return Section(state_, key_path(key), YAML::Node(YAML::NodeType::Null));
  return Section(state_, key_path(key), value(key));
}

void Section::accept(const std::string& key) { known_->insert(key); }

Location Section::location(const std::string& key) const {
  return config().location(key.empty() ? path_ : key_path(key));
}

void Section::error(const std::string& key, const std::string& message) {
  const std::string line = location(key).str() + ": " + key_path(key) + ": " + message;
  if (state_->error_set.insert(line).second) state_->errors.push_back(line);
}

void Section::finish() {
  const std::vector<std::string> known(known_->begin(), known_->end());
  for (const auto& key : keys()) {
    if (known_->count(key)) continue;
    std::string msg = "unknown key '" + key + "'";
    const std::string near = nearest_key(key, known);
    if (!near.empty()) msg += "; did you mean '" + near + "'?";
    std::string valid;
    for (const auto& k : known) valid += (valid.empty() ? "" : ", ") + k;
    msg += valid.empty() ? " (this section takes no keys)" : " (valid keys: " + valid + ")";
    error(key, msg);
  }
}

void Section::done() {
  finish();
  config().raise_errors();
}

void Section::record_resolved(const std::string& key, const YAML::Node& value) {
  detail::set_path(state_->resolved, detail::split_path(key_path(key)), value);
}

// ---- conversions

namespace {
template <class T>
bool scalar_as(const YAML::Node& n, T& out) {
  if (!n.IsScalar()) return false;
  try {
    out = n.as<T>();
    return true;
  } catch (const YAML::Exception&) {
    return false;
  }
}

template <class T>
YAML::Node flow_seq(const std::vector<T>& v) {
  YAML::Node n(YAML::NodeType::Sequence);
  for (const auto& x : v) n.push_back(x);
  n.SetStyle(YAML::EmitterStyle::Flow);
  return n;
}

template <class T>
bool seq_as(const YAML::Node& n, std::vector<T>& out) {
  if (!n.IsSequence()) return false;
  out.clear();
  for (const auto& e : n) {
    T v{};
    if (!scalar_as(e, v)) return false;
    out.push_back(v);
  }
  return true;
}
}  // namespace

bool Section::convert(const YAML::Node& n, bool& out, std::string& expected) {
  expected = "true or false";
  return scalar_as(n, out);
}
bool Section::convert(const YAML::Node& n, int& out, std::string& expected) {
  expected = "an integer";
  return scalar_as(n, out);
}
bool Section::convert(const YAML::Node& n, int64_t& out, std::string& expected) {
  expected = "an integer";
  return scalar_as(n, out);
}
bool Section::convert(const YAML::Node& n, double& out, std::string& expected) {
  expected = "a number";
  return scalar_as(n, out);
}
bool Section::convert(const YAML::Node& n, std::string& out, std::string& expected) {
  expected = "a string";
  return scalar_as(n, out);
}
bool Section::convert(const YAML::Node& n, std::vector<int64_t>& out, std::string& expected) {
  expected = "a list of integers, e.g. [256, 512]";
  return seq_as(n, out);
}
bool Section::convert(const YAML::Node& n, std::vector<double>& out, std::string& expected) {
  expected = "a list of numbers, e.g. [1.0, 2.5]";
  return seq_as(n, out);
}
bool Section::convert(const YAML::Node& n, std::vector<std::string>& out, std::string& expected) {
  expected = "a list of strings, e.g. [a, b]";
  return seq_as(n, out);
}

YAML::Node Section::to_node(bool v) { return YAML::Node(v); }
YAML::Node Section::to_node(int v) { return YAML::Node(v); }
YAML::Node Section::to_node(int64_t v) { return YAML::Node(v); }
YAML::Node Section::to_node(double v) {
  // The shortest text that reads back as the same double (0.004, not 0.0040000000000000001).
  char buf[32];
  for (int precision = 6; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return YAML::Node(std::string(buf));
}
YAML::Node Section::to_node(const std::string& v) { return YAML::Node(v); }
YAML::Node Section::to_node(const std::vector<int64_t>& v) { return flow_seq(v); }
YAML::Node Section::to_node(const std::vector<double>& v) { return flow_seq(v); }
YAML::Node Section::to_node(const std::vector<std::string>& v) { return flow_seq(v); }

}  // namespace hybridlab
