// Sweep expansion, run names and shards.

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <set>

#include "hybridlab/sweep.h"

namespace hybridlab {
namespace {

std::string last_components(const std::string& key, int n) {
  size_t at = key.size();
  for (int i = 0; i < n; ++i) {
    const size_t dot = key.rfind('.', at == 0 ? 0 : at - 1);
    if (dot == std::string::npos || at == 0) return key;
    at = dot;
  }
  return key.substr(at + 1);
}

// A readable label for a value: scalars as written, maps by their name/scheme/type field.
std::string value_label(const YAML::Node& v) {
  // Nothing, an empty map (no overrides) and an empty list all read as "none".
  if (v.IsNull() || ((v.IsMap() || v.IsSequence()) && v.size() == 0)) return "none";
  if (v.IsScalar()) {
    // A plugin given by path is labelled by its file name.
    const std::string s = v.as<std::string>();
    const size_t slash = s.rfind('/');
    return slash != std::string::npos && s.size() > 3 && s.compare(s.size() - 3, 3, ".so") == 0
               ? s.substr(slash + 1)
               : s;
  }
  if (v.IsMap()) {
    for (const char* k : {"name", "scheme", "type", "pattern"}) {
      if (v[k] && v[k].IsScalar()) return v[k].as<std::string>();
    }
  }
  if (v.IsSequence()) {
    std::string s;
    for (const auto& e : v) s += (s.empty() ? "" : "-") + value_label(e);
    return s;
  }
  YAML::Emitter em;
  em << YAML::Flow << v;
  return em.c_str();
}

// Every scalar of a value joined by '-' (the fallback when value_label repeats on one axis).
std::string leaves_label(const YAML::Node& v) {
  if (v.IsScalar() || v.IsNull() || v.size() == 0) return value_label(v);
  std::string s;
  if (v.IsMap()) {
    for (const auto& kv : v) {
      const std::string part = leaves_label(kv.second);
      if (!part.empty()) s += (s.empty() ? "" : "-") + part;
    }
  } else if (v.IsSequence()) {
    for (const auto& e : v) s += (s.empty() ? "" : "-") + leaves_label(e);
  }
  return s;
}

// One text per setting, shared by values a reader reads alike: numbers by value (0.001, 1e-3 and
// 1.0e-3), maps whatever their key order. A quoted scalar is a string, never a number.
std::string canonical_value(const YAML::Node& v) {
  if (v.IsScalar()) {
    const bool quoted = v.Tag() == "!";
    double d = 0;
    if (!quoted && parse_number_text(v.Scalar(), d)) return "#" + shortest_double(d);
    return (quoted ? "'" : "") + v.Scalar();
  }
  std::vector<std::string> parts;
  if (v.IsSequence()) {
    for (const auto& e : v) parts.push_back(canonical_value(e));
    return "[" + fmt::format("{}", fmt::join(parts, ",")) + "]";
  }
  if (v.IsMap()) {
    for (const auto& kv : v) parts.push_back(kv.first.Scalar() + ":" + canonical_value(kv.second));
    std::sort(parts.begin(), parts.end());
    return "{" + fmt::format("{}", fmt::join(parts, ",")) + "}";
  }
  return "~";
}

bool same_value(const YAML::Node& a, const YAML::Node& b) {
  return canonical_value(a) == canonical_value(b);
}

std::string shown(const YAML::Node& v) {
  YAML::Emitter em;
  em << YAML::Flow << v;
  return em.c_str();
}

// Keys that name the experiment rather than set a run: varying them repeats identical runs.
bool names_the_experiment(const std::string& key) {
  const std::string top = key.substr(0, key.find('.'));
  return top == "sweep" || top == "name" || top == "extends" || top == "expect";
}

// Refuses axes that would run the same configuration twice: a key that is not a run setting,
// train.seed beside `seeds:` (which sets it), and a value (or a zip group's tuple) listed twice
// (read_sweep_options refuses a repeated seed).
void check_axes(const SweepOptions& sweep) {
  const auto check_key = [&](const SweepAxis& a, const char* where) {
    if (names_the_experiment(a.key)) {
      throw ConfigError(fmt::format(
          "{}: sweep.{}: '{}' is not a setting of a run (it names or describes the experiment); "
          "every variant would run the same configuration",
          a.where.str(), where, a.key));
    }
    if (a.key == "train.seed" && !sweep.seeds.empty()) {
      throw ConfigError(
          fmt::format("{}: sweep.{}: 'train.seed' is set by sweep.seeds; list the seeds there only",
                      a.where.str(), where));
    }
  };
  // Rows: the values of one axis, or the tuples of one zip group.
  const auto check_rows = [](const std::vector<std::string>& rows,
                             const std::vector<std::string>& texts, const Location& where,
                             const std::string& what) {
    for (size_t i = 0; i < rows.size(); ++i) {
      for (size_t j = 0; j < i; ++j) {
        if (rows[i] != rows[j]) continue;
        throw ConfigError(fmt::format(
            "{}: {} lists the same setting twice ({} and {}, entries {} and {}): both would "
            "run the same configuration; remove one",
            where.str(), what, texts[j], texts[i], j + 1, i + 1));
      }
    }
  };
  for (const auto& [axes, kind] :
       {std::make_pair(&sweep.grid, "grid"), std::make_pair(&sweep.tune, "tune")}) {
    for (const SweepAxis& a : *axes) {
      check_key(a, kind);
      std::vector<std::string> rows, texts;
      for (const auto& v : a.values) rows.push_back(canonical_value(v)), texts.push_back(shown(v));
      check_rows(rows, texts, a.where, fmt::format("sweep.{}: '{}'", kind, a.key));
    }
  }
  for (const auto& group : sweep.zip) {
    if (group.empty()) continue;
    std::vector<std::string> rows(group.front().values.size()), texts(rows.size());
    for (const SweepAxis& a : group) {
      check_key(a, "zip");
      for (size_t i = 0; i < rows.size() && i < a.values.size(); ++i) {
        rows[i] += canonical_value(a.values[i]) + "\n";
        texts[i] += (texts[i].empty() ? "" : ", ") + a.key + "=" + shown(a.values[i]);
      }
    }
    check_rows(rows, texts, group.front().where, "sweep.zip: a group");
  }
}

}  // namespace

std::string run_name_part(const std::string& key, const std::string& value) {
  return folder_name(key) + "-" + folder_name(value);
}

namespace {

// A key cannot be both compared (grid/zip) and tuned per variant (tune).
// A key is swept by one axis only: listed in grid and in a zip group (or in two zip groups) it
// would give runs of one configuration under two names; tuned and swept it would be both
// compared and chosen. Throws ConfigError at the later occurrence, naming the first.
void check_axis_clash(const SweepOptions& sweep) {
  std::map<std::string, std::pair<std::string, Location>> first;  // key -> (axis kind, where)
  const auto see = [&first](const SweepAxis& a, const std::string& kind) {
    const auto [it, fresh] = first.emplace(a.key, std::make_pair(kind, a.where));
    if (fresh) return;
    if (kind == "tune") {
      throw ConfigError(
          fmt::format("{}: sweep.tune: '{}' is also swept by grid/zip; a key is "
                      "either compared (grid) or tuned per variant (tune)",
                      a.where.str(), a.key));
    }
    throw ConfigError(fmt::format(
        "{}: sweep.{}: '{}' is already swept at {} (sweep.{}); a key is swept by one axis only: "
        "list its values once, in grid or in the zip group of the keys it goes with",
        a.where.str(), kind, a.key, it->second.second.str(), it->second.first));
  };
  for (const auto& a : sweep.grid) see(a, "grid");
  for (const auto& g : sweep.zip)
    for (const auto& a : g) see(a, "zip");
  for (const auto& a : sweep.tune) see(a, "tune");
}

// One axis of the expansion: one key (grid, tune, seeds) or several varied together (zip).
struct Axis {
  std::vector<std::string> keys;
  std::vector<std::vector<YAML::Node>> columns;  // per key: its values
  size_t size() const { return columns.empty() ? 0 : columns[0].size(); }
};

// The axes in expansion order: grid axes, one per zip group, tuned axes [first_tuned,
// end_tuned), then seeds. Throws ConfigError for zip lists of unequal lengths.
std::vector<Axis> sweep_axes(const SweepOptions& sweep, size_t& first_tuned, size_t& end_tuned) {
  std::vector<Axis> axes;
  for (const auto& a : sweep.grid) axes.push_back({{a.key}, {a.values}});
  for (const auto& group : sweep.zip) {
    Axis ax;
    for (const auto& a : group) {
      if (!ax.columns.empty() && a.values.size() != ax.size()) {
        throw ConfigError(
            fmt::format("{}: sweep.zip: '{}' has {} values but the group's other lists "
                        "have {}; lists varied together must have equal lengths",
                        a.where.str(), a.key, a.values.size(), ax.size()));
      }
      ax.keys.push_back(a.key);
      ax.columns.push_back(a.values);
    }
    if (!ax.keys.empty()) axes.push_back(ax);
  }
  first_tuned = axes.size();
  for (const auto& a : sweep.tune) axes.push_back({{a.key}, {a.values}});
  end_tuned = axes.size();
  if (!sweep.seeds.empty()) {
    Axis ax{{"train.seed"}, {{}}};
    for (int64_t s : sweep.seeds) ax.columns[0].push_back(YAML::Node(s));
    axes.push_back(ax);
  }
  return axes;
}

// Short names for the keys that take more than one value: the fewest last components that
// tell them apart.
std::map<std::string, std::string> short_names(const std::vector<Axis>& axes) {
  std::vector<std::string> varied;
  for (const auto& ax : axes) {
    if (ax.size() > 1) varied.insert(varied.end(), ax.keys.begin(), ax.keys.end());
  }
  std::map<std::string, std::string> short_name;
  for (const auto& k : varied) {
    for (int n = 1;; ++n) {
      const std::string cand = last_components(k, n);
      bool clash = false;
      for (const auto& o : varied) clash |= o != k && last_components(o, n) == cand;
      if (!clash || cand == k) {
        short_name[k] = cand;
        break;
      }
    }
  }
  return short_name;
}

// Value labels per axis and key; maps whose name/scheme repeats get all their values.
std::vector<std::vector<std::vector<std::string>>> axis_labels(const std::vector<Axis>& axes) {
  std::vector<std::vector<std::vector<std::string>>> labels(axes.size());
  for (size_t a = 0; a < axes.size(); ++a) {
    for (const auto& column : axes[a].columns) {
      std::vector<std::string> l;
      for (const auto& value : column) l.push_back(value_label(value));
      if (std::set<std::string>(l.begin(), l.end()).size() != l.size()) {
        for (size_t i = 0; i < l.size(); ++i) l[i] = leaves_label(column[i]);
      }
      labels[a].push_back(l);
    }
  }
  return labels;
}

// Whether an exclude entry drops `v` (every key of the entry set to its value); marks the
// entries that drop something in `used`.
bool excluded(const Variant& v, const SweepOptions& sweep, std::vector<bool>& used) {
  bool out = false;
  for (size_t e = 0; e < sweep.exclude.size(); ++e) {
    bool all = !sweep.exclude[e].empty();
    for (const auto& [key, value] : sweep.exclude[e]) {
      bool hit = false;
      for (const auto& [k, val] : v.assignments) hit |= k == key && same_value(val, value);
      all &= hit;
    }
    used[e] = used[e] || all;
    out |= all;
  }
  return out;
}

// Two variants with one name would share a run folder.
void check_unique_names(const std::vector<Variant>& out, const SweepOptions& sweep) {
  std::set<std::string> names;
  for (const auto& v : out) {
    if (!names.insert(v.name).second) {
      // Located at the first swept key: the labels of its values collided.
      const std::string where = !sweep.grid.empty()  ? sweep.grid.front().where.str() + ": "
                                : !sweep.zip.empty() ? sweep.zip.front().front().where.str() + ": "
                                                     : "";
      throw ConfigError(
          fmt::format("{}sweep: two variants are both named '{}'; give the varied values "
                      "distinct labels (maps are labelled by their name/scheme field)",
                      !where.empty()             ? where
                      : sweep.where.file.empty() ? ""
                                                 : sweep.where.str() + ": ",
                      v.name));
    }
  }
}

// An exclude entry that drops nothing is a typo in a key or a value: say so rather than run
// variants the user meant to leave out; and an exclude that drops everything leaves nothing.
void check_excludes(const SweepOptions& sweep, const std::vector<bool>& used,
                    const std::vector<Variant>& out) {
  std::string unused;
  for (size_t e = 0; e < sweep.exclude.size(); ++e) {
    if (used[e]) continue;
    std::string entry;
    for (const auto& [key, value] : sweep.exclude[e]) {
      entry += (entry.empty() ? "" : ", ") + key + ": " + value_label(value);
    }
    const std::string where =
        e < sweep.exclude_where.size() ? sweep.exclude_where[e].str() + ": " : "";
    unused += fmt::format(
        "{}{}sweep.exclude[{}]: {{{}}} matches no variant; each key must be "
        "a swept key and each value one of its values",
        unused.empty() ? "" : "\n", where, e, entry);
  }
  if (!unused.empty()) throw ConfigError(unused);
  if (out.empty()) {
    const std::string where =
        sweep.exclude_where.empty() ? "" : sweep.exclude_where.front().str() + ": ";
    throw ConfigError(where + "sweep.exclude: drops every variant; nothing to run");
  }
}

}  // namespace

std::vector<Variant> expand_sweep(const SweepOptions& sweep) {
  check_axes(sweep);
  check_axis_clash(sweep);
  size_t first_tuned = 0, end_tuned = 0;
  const std::vector<Axis> axes = sweep_axes(sweep, first_tuned, end_tuned);
  if (axes.empty()) return {Variant{"main", {}, {}, {}}};
  std::map<std::string, std::string> short_name = short_names(axes);
  const auto labels = axis_labels(axes);
  // Tuned keys that vary: their label key and the labels of their grid.
  std::vector<std::pair<std::string, std::vector<std::string>>> tuned;
  for (size_t a = first_tuned; a < end_tuned; ++a) {
    if (short_name.count(axes[a].keys[0]))
      tuned.emplace_back(short_name[axes[a].keys[0]], labels[a][0]);
  }
  std::vector<Variant> out;
  std::vector<size_t> idx(axes.size(), 0);
  std::vector<bool> exclude_used(sweep.exclude.size(), false);
  while (true) {
    Variant v;
    v.tuned = tuned;
    for (size_t a = 0; a < axes.size(); ++a) {
      for (size_t k = 0; k < axes[a].keys.size(); ++k) {
        const std::string& key = axes[a].keys[k];
        v.assignments.emplace_back(key, axes[a].columns[k][idx[a]]);
        if (short_name.count(key)) v.labels.emplace_back(short_name[key], labels[a][k][idx[a]]);
      }
    }
    if (!excluded(v, sweep, exclude_used)) {
      std::string name;
      for (const auto& [k, val] : v.labels)
        name += (name.empty() ? "" : "_") + run_name_part(k, val);
      v.name = name.empty() ? "main" : name;
      out.push_back(v);
    }
    // Odometer: the last axis varies fastest.
    size_t a = axes.size();
    while (a > 0 && ++idx[a - 1] == axes[a - 1].size()) idx[--a] = 0;
    if (a == 0) break;
  }
  check_unique_names(out, sweep);
  check_excludes(sweep, exclude_used, out);
  return out;
}

Config variant_config(const Config& base, const Variant& v, const SweepOptions& sweep) {
  Config c = base.clone();
  for (const auto& [key, value] : v.assignments) {
    Location where{base.file(), 0, 0};
    for (const auto& a : sweep.grid)
      if (a.key == key) where = a.where;
    for (const auto& a : sweep.tune)
      if (a.key == key) where = a.where;
    for (const auto& g : sweep.zip)
      for (const auto& a : g)
        if (a.key == key) where = a.where;
    if (key == "train.seed") where = base.location("sweep.seeds");
    c.set(key, YAML::Clone(value), where);
  }
  return c;
}

std::pair<int64_t, int64_t> parse_shard(const std::string& text) {
  const size_t slash = text.find('/');
  try {
    if (slash != std::string::npos) {
      size_t u1 = 0, u2 = 0;
      const int64_t i = std::stoll(text.substr(0, slash), &u1);
      const int64_t n = std::stoll(text.substr(slash + 1), &u2);
      if (u1 == slash && u2 == text.size() - slash - 1 && n >= 1 && i >= 0 && i < n) return {i, n};
    }
  } catch (const std::exception&) {
  }
  throw UserError("--shard '" + text +
                  "': expected i/n with 0 <= i < n, e.g. --shard 0/4 (with SLURM: "
                  "--shard $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT)");
}

std::vector<Variant> shard_variants(const std::vector<Variant>& all, int64_t i, int64_t n) {
  std::vector<Variant> out;
  for (size_t k = 0; k < all.size(); ++k) {
    if (static_cast<int64_t>(k % static_cast<size_t>(n)) == i) out.push_back(all[k]);
  }
  return out;
}

}  // namespace hybridlab
