#pragma once
// Strict YAML configuration: files with `extends:`, dotted command-line overrides, and readers that
// report every unknown key, wrong type and out-of-range value at once with `file:line:col`.
//
// Pattern (after marian-dev's cli_wrapper and torch's options structs): each options struct has
// exactly one reader function taking a Section. The reader calls get/required/child for every key
// it knows, check() for ranges, then finish(). After all readers ran, Config::raise_errors() throws
// one ConfigError listing every problem found.

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "hybridlab/error.h"

namespace hybridlab {

/// Where a value came from: a file position (1-based line and column) or an origin such as
/// "command line" (line 0).
struct Location {
  std::string file;
  int line = 0;
  int column = 0;
  /// "file:line:col", or just "file" when the line is unknown.
  std::string str() const;
};

namespace detail {
struct ConfigState;
}

class Section;

/// A merged configuration tree and where each of its values came from.
/// Copies share state; use clone() for an independent copy (e.g. one per sweep variant).
class Config {
 public:
  Config();

  /// Loads a YAML file. `extends: base.yaml` (or a list of files, paths relative to the file that
  /// names them) is loaded first and this file's keys are merged over it: maps merge key by key,
  /// everything else (scalars, lists) is replaced. Throws ConfigError for a missing/unreadable
  /// file, a YAML syntax error (with line and column), a duplicate key, or an `extends` cycle.
  static Config load(const std::string& path);

  /// Parses YAML text; `name` stands for the file name in messages. Same errors as load().
  static Config parse(const std::string& text, const std::string& name = "<string>");

  /// Applies one `dotted.key=value` assignment. The value is read as YAML flow text, so `512`,
  /// `1.0e-3`, `rope`, `[a,b]` and `{scheme: alibi}` all work; its type is checked when a reader
  /// reads it. Creates missing intermediate maps; an unknown key is reported by the reader.
  /// Throws ConfigError if the text has no `=` or the value is not valid YAML.
  void apply_override(const std::string& assignment, const std::string& origin = "command line");

  /// Sets `dotted_key` to `value` (replacing what was there), recording `where` for messages.
  /// A null `value` removes the key instead, so that its reader's default applies.
  void set(const std::string& dotted_key, const YAML::Node& value, const Location& where);

  /// The value at `dotted_key`, or an undefined node (`!node.IsDefined()`) if absent.
  YAML::Node lookup(const std::string& dotted_key) const;

  /// Where `dotted_key` (or its nearest recorded ancestor) was set.
  Location location(const std::string& dotted_key) const;

  /// The merged tree (before defaults are filled in).
  const YAML::Node& tree() const;

  /// The file load() was given ("" for parse()).
  const std::string& file() const;

  /// A reader over the whole tree ("" path) or over the map at `dotted_path`.
  Section root() const;
  Section section(const std::string& dotted_path) const;
  /// A reader over `node`, a map a reader assembled itself (e.g. one setting of a task mixture
  /// merged over its task), as if it stood at `dotted_path`: problems are located at the values
  /// recorded under that path (or its nearest located ancestor) and recorded in this
  /// configuration; values read go into resolved() under that path.
  Section section_at(const std::string& dotted_path, const YAML::Node& node) const;

  /// Every value the readers read, defaults filled in: what a run actually used.
  YAML::Node resolved() const;
  /// resolved() as YAML text, with a comment header naming the source file.
  std::string resolved_yaml() const;

  /// Problems recorded so far by readers (one line each, `file:line:col: key: message`).
  const std::vector<std::string>& errors() const;
  /// Throws one ConfigError listing every recorded problem, if there is any.
  void raise_errors() const;

  /// A deep, independent copy (tree, locations; no recorded errors or resolved values).
  Config clone() const;

 private:
  explicit Config(std::shared_ptr<detail::ConfigState> state);
  std::shared_ptr<detail::ConfigState> state_;
  friend class Section;
};

/// A strict reader over one map of the configuration. Every get/required/child marks its key as
/// known; finish() records every key that was never asked for as unknown, with the nearest known
/// key as a suggestion. Type and range problems are recorded (not thrown) so that all of them are
/// reported together by Config::raise_errors(); the reader then gets the fallback value.
class Section {
 public:
  /// Dotted path of this map from the root ("" for the root, "model.attention", ...).
  const std::string& path() const { return path_; }
  /// Whether the map (or, for a section over a base, the base) has `key` (and it is not null).
  bool has(const std::string& key) const;
  /// The keys present in the map, in file order (the map's own, never its base's).
  std::vector<std::string> keys() const;
  /// The raw node (undefined if the section is absent): this map's own, never its base's.
  const YAML::Node& node() const { return node_; }
  /// The section this one reads absent keys from (over()); nullptr for none.
  const Section* base() const { return base_.get(); }

  /// The value of `key` converted to T, or `fallback` if the key is absent. A value of the wrong
  /// type records "expected <type>, got '<text>'" and returns `fallback`. T is one of bool,
  /// int, int64_t, double, std::string, std::vector<int64_t>, std::vector<double>,
  /// std::vector<std::string>. The value used (given or fallback) goes into Config::resolved().
  template <class T>
  T get(const std::string& key, const T& fallback);

  /// Like get() but an absent key records "required key is missing".
  template <class T>
  T required(const std::string& key);

  /// The sub-map at `key` (an empty section if absent). A non-map value records an error. For a
  /// section over a base, a map only the base has is the base's child, read where it stands.
  Section child(const std::string& key);

  /// A reader over this map whose absent keys read from `base`: a layer's override over its
  /// mixer's section. get() of a key only `base` has returns base's value (problems located in
  /// base) and records it here, as a default would be; child() of a key only `base` has is
  /// base's child (a map named here replaces base's whole, it is not merged); keys() are this
  /// map's own; finish() reports the keys of both that the reader never asked for, each where
  /// it stands.
  Section over(const Section& base) const;

  /// Marks `key` as known without reading it (for keys read elsewhere, e.g. `extends`).
  void accept(const std::string& key);

  /// Records `message` about `key` (located at the key, or at the section if the key is absent;
  /// for a section over a base, a key only the base has is named where it stands in the base,
  /// the message saying which section read it).
  void error(const std::string& key, const std::string& message);
  /// error(key, message) unless `ok`.
  void check(bool ok, const std::string& key, const std::string& message) {
    if (!ok) error(key, message);
  }

  /// Records every key of this map that no reader asked for ("unknown key 'x'; did you mean
  /// 'y'?"). Call once at the end of a reader.
  void finish();
  /// finish(), then Config::raise_errors().
  void done();

  /// Where `key` is set (or this section, if it is not; a key only the base has, in the base).
  Location location(const std::string& key) const;
  /// The configuration this section reads.
  Config config() const { return Config(state_); }

  Section(const Section&) = default;
  /// Rebinds this section to `other`'s map. A defaulted assignment would assign YAML::Node to
  /// YAML::Node, which in yaml-cpp writes `other`'s map into the tree where this section's map
  /// is: assigning a layer override's position spec over the base one's replaced
  /// model.attention.position for every layer (rope_theta silently back to its default).
  Section& operator=(const Section& other) {
    if (this != &other) {
      state_ = other.state_;
      path_ = other.path_;
      node_.reset(other.node_);
      known_ = other.known_;
      base_ = other.base_;
    }
    return *this;
  }

 private:
  friend class Config;
  Section(std::shared_ptr<detail::ConfigState> state, std::string path, YAML::Node node);
  std::string key_path(const std::string& key) const;
  YAML::Node value(const std::string& key) const;  // read without mutating the tree
  bool has_own(const std::string& key) const;      // has(), this map only
  bool from_base(const std::string& key) const;    // `key` is the base's, not this map's
  // "file:line:col: path.key: message", cut to one readable line; record() keeps it once.
  std::string line(const std::string& key, const std::string& message) const;
  void record(const std::string& line) const;
  void record_resolved(const std::string& key, const YAML::Node& value);
  // One conversion per supported type; false (and `expected` set) when the node does not convert.
  static bool convert(const YAML::Node& n, bool& out, std::string& expected);
  static bool convert(const YAML::Node& n, int& out, std::string& expected);
  static bool convert(const YAML::Node& n, int64_t& out, std::string& expected);
  static bool convert(const YAML::Node& n, double& out, std::string& expected);
  static bool convert(const YAML::Node& n, std::string& out, std::string& expected);
  static bool convert(const YAML::Node& n, std::vector<int64_t>& out, std::string& expected);
  static bool convert(const YAML::Node& n, std::vector<double>& out, std::string& expected);
  static bool convert(const YAML::Node& n, std::vector<std::string>& out, std::string& expected);
  static YAML::Node to_node(bool v);
  static YAML::Node to_node(int v);
  static YAML::Node to_node(int64_t v);
  static YAML::Node to_node(double v);
  static YAML::Node to_node(const std::string& v);
  static YAML::Node to_node(const std::vector<int64_t>& v);
  static YAML::Node to_node(const std::vector<double>& v);
  static YAML::Node to_node(const std::vector<std::string>& v);

  std::shared_ptr<detail::ConfigState> state_;
  std::string path_;
  YAML::Node node_;
  std::shared_ptr<std::set<std::string>> known_;  // shared by copies of this section
  std::shared_ptr<Section> base_;                 // where absent keys are read (over())
};

/// The shortest decimal text that reads back as exactly `v` (0.9, not 0.90000000000000002);
/// ".inf", "-.inf" or ".nan" for non-finite values, as YAML writes them. Throws nothing.
std::string shortest_double(double v);

/// `n` as one line of text for a message (a scalar as written, else YAML), cut to `max_chars`
/// with the full length named ("... (312 characters)"). Throws nothing.
std::string quote_value(const YAML::Node& n, size_t max_chars = 80);

/// The known key nearest to `key` by edit distance, or "" if none is close.
std::string nearest_key(const std::string& key, const std::vector<std::string>& known);

/// Reads `text` as the configuration reads an integer: decimal digits with an optional sign,
/// within int64. The one spelling for files, overrides, claims and command-line numbers; false for
/// any other text (hex, a fraction, an exponent, digits past int64).
bool parse_integer_text(const std::string& text, int64_t& out);

/// Reads `text` as the configuration reads a number: decimal with an optional sign, fraction and
/// exponent (no hex, inf or nan), and a value a double holds. false for any other text, and for
/// digits past a double's range either way (1e400 would read as infinity, 1e-400 as 0).
bool parse_number_text(const std::string& text, double& out);

// ---- template definitions

template <class T>
T Section::get(const std::string& key, const T& fallback) {
  known_->insert(key);
  if (!has_own(key)) {
    const T used = base_ && base_->has(key) ? base_->get<T>(key, fallback) : fallback;
    record_resolved(key, to_node(used));
    return used;
  }
  T out{};
  std::string expected;
  const YAML::Node v = value(key);
  if (!convert(v, out, expected)) {
    error(key, "expected " + expected + ", got '" + YAML::Dump(v) + "'");
    return fallback;
  }
  record_resolved(key, to_node(out));
  return out;
}

template <class T>
T Section::required(const std::string& key) {
  if (!has(key)) {
    known_->insert(key);
    error(key, "required key is missing");
    return T{};
  }
  return get<T>(key, T{});
}

}  // namespace hybridlab
