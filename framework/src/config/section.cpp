// Section: the strict reader over one map of the configuration.

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "config/config_state.h"
#include "hybridlab/config.h"

namespace hybridlab {

Section::Section(std::shared_ptr<detail::ConfigState> state, std::string path, YAML::Node node)
    : state_(std::move(state)),
      path_(std::move(path)),
      node_(std::move(node)),
      known_(std::make_shared<std::set<std::string>>()) {
  if (node_.IsDefined() && !node_.IsNull() && !node_.IsMap()) {
    record(config().location(path_).str() + ": " + path_ + ": expected a map of keys, got '" +
           quote_value(node_) + "'");
    // reset(), not assignment: YAML::Node's operator= would write the null into the tree, where
    // every later reader of this key (a layer override over its section) would find it.
    node_.reset(YAML::Node(YAML::NodeType::Null));
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
  return has_own(key) || (base_ && base_->has(key));
}

bool Section::has_own(const std::string& key) const {
  const YAML::Node v = value(key);
  if (v.IsDefined() && v.IsNull()) {
    // A key written with no value (`key:` or `key: ~`) is an error, never a silent default.
    record(line(key,
                "the key has no value; give one, or remove the key to use the default (on the "
                "command line, KEY=null removes a key)"));
    known_->insert(key);  // reported here: finish() must not call it unknown as well
  }
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
  if (has_own(key)) return Section(state_, key_path(key), value(key));
  if (base_ && base_->has(key)) return base_->child(key);
  return Section(state_, key_path(key), YAML::Node(YAML::NodeType::Null));
}

Section Section::over(const Section& base) const {
  Section s(*this);
  s.known_ = std::make_shared<std::set<std::string>>();
  s.base_ = std::make_shared<Section>(base);
  return s;
}

void Section::accept(const std::string& key) { known_->insert(key); }

bool Section::from_base(const std::string& key) const {
  return !key.empty() && !value(key).IsDefined() && base_ && base_->has(key);
}

Location Section::location(const std::string& key) const {
  if (from_base(key)) return base_->location(key);
  return config().location(key.empty() ? path_ : key_path(key));
}

void Section::error(const std::string& key, const std::string& message) {
  if (from_base(key)) {  // the value stands in the base: name it there, and who read it
    if (!state_->error_set.count(base_->line(key, message)))  // said once, where the base was read
      base_->error(key, message + " (as " + path_ + " reads it)");
    return;
  }
  record(line(key, message));
}

std::string Section::line(const std::string& key, const std::string& message) const {
  constexpr size_t kMaxLine = 2000;  // a message quoting a huge value stays one readable line
  std::string out = location(key).str() + ": " + key_path(key) + ": " + message;
  if (out.size() > kMaxLine) out = out.substr(0, kMaxLine) + "... (message cut)";
  return out;
}

void Section::record(const std::string& line) const {
  if (state_->error_set.insert(line).second) state_->errors.push_back(line);
}

void Section::finish() {
  if (base_) {  // the same reader read both maps: what it never asked for is unknown in either
    for (const std::string& key : *known_) base_->accept(key);
    base_->finish();
  }
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
//
// One spelling per type (YAML 1.2 core schema, narrowed): a bool is `true` or `false`, an integer
// is decimal digits with an optional sign, a number is decimal with an optional exponent. A quoted
// scalar is a string, never a number or a bool. Tags were refused when the file was loaded.

namespace {

template <class T>
YAML::Node flow_seq(const std::vector<T>& v) {
  YAML::Node n(YAML::NodeType::Sequence);
  for (const auto& x : v) n.push_back(x);
  n.SetStyle(YAML::EmitterStyle::Flow);
  return n;
}

// yaml-cpp marks a quoted (or block) scalar with the non-specific tag "!", a plain one with "?";
// nodes built in code have no tag and count as plain.
bool is_plain(const YAML::Node& n) { return n.Tag() != "!"; }

bool plain_scalar(const YAML::Node& n, std::string& text) {
  if (!n.IsScalar() || !is_plain(n)) return false;
  text = n.Scalar();
  return true;
}

bool is_decimal_integer(const std::string& t) {
  size_t i = (!t.empty() && (t[0] == '-' || t[0] == '+')) ? 1 : 0;
  if (i == t.size()) return false;
  for (; i < t.size(); ++i) {
    if (t[i] < '0' || t[i] > '9') return false;
  }
  return true;
}

bool is_decimal_number(const std::string& t) {
  size_t i = (!t.empty() && (t[0] == '-' || t[0] == '+')) ? 1 : 0;
  size_t digits = 0;
  while (i < t.size() && t[i] >= '0' && t[i] <= '9') ++i, ++digits;
  if (i < t.size() && t[i] == '.') {
    ++i;
    while (i < t.size() && t[i] >= '0' && t[i] <= '9') ++i, ++digits;
  }
  if (digits == 0) return false;
  if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
    ++i;
    if (i < t.size() && (t[i] == '-' || t[i] == '+')) ++i;
    size_t exp_digits = 0;
    while (i < t.size() && t[i] >= '0' && t[i] <= '9') ++i, ++exp_digits;
    if (exp_digits == 0) return false;
  }
  return i == t.size();
}

bool is_yaml_nonfinite(const std::string& t) {
  static const char* const spellings[] = {".inf",  ".Inf",  ".INF",  "+.inf", "+.Inf", "+.INF",
                                          "-.inf", "-.Inf", "-.INF", ".nan",  ".NaN",  ".NAN"};
  for (const char* s : spellings) {
    if (t == s) return true;
  }
  return false;
}

bool read_int64(const YAML::Node& n, int64_t& out) {
  std::string t;
  return plain_scalar(n, t) && parse_integer_text(t, out);
}

bool read_bool(const YAML::Node& n, bool& out) {
  std::string t;
  if (!plain_scalar(n, t) || (t != "true" && t != "false")) return false;
  out = t == "true";
  return true;
}

bool read_double(const YAML::Node& n, double& out) {
  std::string t;
  return plain_scalar(n, t) && parse_number_text(t, out);
}

bool read_string(const YAML::Node& n, std::string& out) {
  if (!n.IsScalar()) return false;
  out = n.Scalar();
  return true;
}

template <class T, class Read>
bool seq_as(const YAML::Node& n, std::vector<T>& out, Read read) {
  if (!n.IsSequence()) return false;
  out.clear();
  for (const auto& e : n) {
    T v{};
    if (!read(e, v)) return false;
    out.push_back(v);
  }
  return true;
}

// Why a scalar was refused, beyond "expected <type>": the spelling rules above, spelled out.
std::string spelling_hint(const YAML::Node& n, const std::string& expected) {
  if (n.IsSequence()) {
    for (const auto& e : n) {
      if (std::string h = spelling_hint(e, expected); !h.empty()) return h;
    }
    return "";
  }
  if (!n.IsScalar()) return "";
  if (!is_plain(n) && expected.find("string") == std::string::npos) {
    return " (a quoted value is a string; write it without quotes)";
  }
  if (is_yaml_nonfinite(n.Scalar()) && expected.find("number") != std::string::npos) {
    return " (.inf and .nan are refused)";
  }
  double unused = 0;
  if (is_decimal_number(n.Scalar()) && !parse_number_text(n.Scalar(), unused) &&
      expected.find("number") != std::string::npos) {
    return " (beyond the range of a double: 1e400 would read as infinity, 1e-400 as 0, 1e-320 "
           "with 3 of its digits)";
  }
  return "";
}

// `ok`, or false with the reason for the refusal appended to `expected`.
bool hinted(bool ok, const YAML::Node& n, std::string& expected) {
  if (!ok) expected += spelling_hint(n, expected);
  return ok;
}

}  // namespace

bool parse_integer_text(const std::string& text, int64_t& out) {
  if (!is_decimal_integer(text)) return false;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno == ERANGE) return false;
  out = static_cast<int64_t>(v);
  return true;
}

bool parse_number_text(const std::string& text, double& out) {
  if (!is_decimal_number(text)) return false;
  // strtod sets ERANGE when the value overflows or underflows (to 0 or a subnormal, C11
  // 7.22.1.3). Overflow and underflow to 0 lose the number written; a subnormal keeps it when
  // it still holds 12 significant digits (1e-308 holds 15, 1e-320 about 3), judged against
  // the wider long double read.
  errno = 0;
  const double v = std::strtod(text.c_str(), nullptr);
  if (!std::isfinite(v)) return false;
  if (errno == ERANGE) {
    if (v == 0) return false;
    const long double wide = std::strtold(text.c_str(), nullptr);
    if (std::fabs(static_cast<long double>(v) - wide) > 1e-12L * std::fabs(wide)) return false;
  }
  out = v;
  return true;
}

std::string shortest_double(double v) {
  // The shortest text that reads back as the same double (0.004, not 0.0040000000000000001).
  if (std::isnan(v)) return ".nan";
  if (std::isinf(v)) return v > 0 ? ".inf" : "-.inf";
  char buf[32];
  for (int precision = 6; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  std::string out(buf);
  // Keep it a number to a YAML reader and to our own: "1e-08" is fine, "1" stays "1".
  return out;
}

std::string quote_value(const YAML::Node& n, size_t max_chars) {
  std::string text;
  try {
    text = n.IsScalar() ? n.Scalar() : YAML::Dump(n);
  } catch (const std::exception&) {
    text = "<unprintable>";
  }
  if (text.size() > max_chars) {
    text = text.substr(0, max_chars) + "... (" + std::to_string(text.size()) + " characters)";
  }
  return text;
}

bool Section::convert(const YAML::Node& n, bool& out, std::string& expected) {
  expected = "true or false";
  return hinted(read_bool(n, out), n, expected);
}
bool Section::convert(const YAML::Node& n, int& out, std::string& expected) {
  expected = "an integer";
  int64_t v = 0;
  if (!read_int64(n, v)) return hinted(false, n, expected);
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) {
    expected = "an integer between " + std::to_string(std::numeric_limits<int>::min()) + " and " +
               std::to_string(std::numeric_limits<int>::max());
    return false;
  }
  out = static_cast<int>(v);
  return true;
}
bool Section::convert(const YAML::Node& n, int64_t& out, std::string& expected) {
  expected = "an integer";
  if (read_int64(n, out)) return true;
  if (n.IsScalar() && is_plain(n) && is_decimal_integer(n.Scalar())) {
    expected = "an integer between -9223372036854775808 and 9223372036854775807";
  }
  return hinted(false, n, expected);
}
bool Section::convert(const YAML::Node& n, double& out, std::string& expected) {
  expected = "a finite number";
  return hinted(read_double(n, out), n, expected);
}
bool Section::convert(const YAML::Node& n, std::string& out, std::string& expected) {
  expected = "a string";
  return read_string(n, out);
}
bool Section::convert(const YAML::Node& n, std::vector<int64_t>& out, std::string& expected) {
  expected = "a list of integers, e.g. [256, 512]";
  return hinted(seq_as(n, out, read_int64), n, expected);
}
bool Section::convert(const YAML::Node& n, std::vector<double>& out, std::string& expected) {
  expected = "a list of finite numbers, e.g. [1.0, 2.5]";
  return hinted(seq_as(n, out, read_double), n, expected);
}
bool Section::convert(const YAML::Node& n, std::vector<std::string>& out, std::string& expected) {
  expected = "a list of strings, e.g. [a, b]";
  return seq_as(n, out, read_string);
}

YAML::Node Section::to_node(bool v) { return YAML::Node(v); }
YAML::Node Section::to_node(int v) { return YAML::Node(v); }
YAML::Node Section::to_node(int64_t v) { return YAML::Node(v); }
YAML::Node Section::to_node(double v) { return YAML::Node(shortest_double(v)); }
YAML::Node Section::to_node(const std::string& v) { return YAML::Node(v); }
YAML::Node Section::to_node(const std::vector<int64_t>& v) { return flow_seq(v); }
YAML::Node Section::to_node(const std::vector<double>& v) {
  std::vector<std::string> text;
  for (double x : v) text.push_back(shortest_double(x));
  return flow_seq(text);
}
YAML::Node Section::to_node(const std::vector<std::string>& v) { return flow_seq(v); }

}  // namespace hybridlab
