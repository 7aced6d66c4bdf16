// Reading `sweep:` strictly: grid axes, tuned axes, zip groups, seeds, exclude entries.

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "hybridlab/sweep.h"

namespace hybridlab {
namespace {

// A sequence node of a sweep axis, or an error.
bool axis_values(Section& s, const YAML::Node& n, const std::string& key, const std::string& where,
                 std::vector<YAML::Node>& out) {
  if (!n.IsSequence() || n.size() == 0) {
    s.error(where,
            fmt::format("'{}' must map to a non-empty list of values, e.g. [nope, rope]", key));
    return false;
  }
  for (const auto& v : n) out.push_back(YAML::Clone(v));
  return true;
}

// grid and tune share one form: dotted key -> non-empty list of values.
void read_axes(Section& s, const char* name, std::vector<SweepAxis>& out) {
  if (!s.has(name)) return;
  Section axes = s.child(name);
  for (const std::string& key : axes.keys()) {
    axes.accept(key);
    SweepAxis axis{key, {}, axes.location(key)};
    if (axis_values(axes, axes.node()[key], key, key, axis.values)) out.push_back(axis);
  }
  axes.finish();
}

// One zip group (the map at `path` below the sweep section): its axes, of equal lengths.
std::vector<SweepAxis> read_zip_group(Section& s, const YAML::Node& g, const std::string& path) {
  std::vector<SweepAxis> group;
  size_t len = 0;
  for (const auto& kv : g) {
    if (!kv.first.IsScalar()) {  // loaded files refuse these; a tree built in code may not
      s.error("zip",
              "keys of a zip group are dotted config keys, got '" + quote_value(kv.first) + "'");
      continue;
    }
    SweepAxis axis{kv.first.Scalar(), {}, s.location(path + "." + kv.first.Scalar())};
    if (!axis_values(s, kv.second, axis.key, "zip", axis.values)) continue;
    if (len && axis.values.size() != len) {
      s.error("zip", fmt::format("lists of one zip group must have equal lengths; '{}' has {}, "
                                 "the group's first list has {}",
                                 axis.key, axis.values.size(), len));
    }
    len = axis.values.size();
    group.push_back(axis);
  }
  return group;
}

void read_zip(Section& s, SweepOptions& o) {
  s.accept("zip");
  if (!s.has("zip")) return;
  YAML::Node z = s.node()["zip"];
  // Each group with its path below the section, under which the config indexes its locations.
  std::vector<std::pair<YAML::Node, std::string>> groups;
  if ((z.IsMap() || z.IsSequence()) && z.size() == 0) {
    s.error("zip", "must hold at least one group of key: [values] (leave zip out for none)");
    return;
  }
  if (z.IsMap()) {
    groups.emplace_back(z, "zip");
  } else if (z.IsSequence()) {
    for (std::size_t i = 0; i < z.size(); ++i)
      groups.emplace_back(z[i], "zip." + std::to_string(i));
  }
  for (const auto& [g, path] : groups) {
    if (!g.IsMap()) {
      s.error("zip", "expected a map of key: [values] (or a list of such maps)");
      continue;
    }
    std::vector<SweepAxis> group = read_zip_group(s, g, path);
    if (!group.empty()) o.zip.push_back(group);
  }
}

void read_seeds(Section& s, SweepOptions& o) {
  o.seeds = s.get<std::vector<int64_t>>("seeds", {});
  s.check(std::all_of(o.seeds.begin(), o.seeds.end(), [](int64_t v) { return v >= 0; }), "seeds",
          "every seed must be >= 0");
  const std::set<int64_t> distinct(o.seeds.begin(), o.seeds.end());
  s.check(distinct.size() == o.seeds.size(), "seeds",
          "lists a seed twice: both runs would be the same; remove one");
}

void read_exclude(Section& s, SweepOptions& o) {
  s.accept("exclude");
  if (!s.has("exclude")) return;
  YAML::Node ex = s.node()["exclude"];
  if (!ex.IsSequence()) {
    s.error("exclude", "expected a list of maps {dotted.key: value, ...}");
    return;
  }
  for (std::size_t i = 0; i < ex.size(); ++i) {
    const YAML::Node e = ex[i];
    if (!e.IsMap()) {
      s.error("exclude", "each entry must be a map {dotted.key: value, ...}");
      continue;
    }
    std::vector<std::pair<std::string, YAML::Node>> entry;
    bool keys_ok = true;
    for (const auto& kv : e) {
      if (!kv.first.IsScalar()) {
        s.error(
            "exclude." + std::to_string(i),
            "keys of an exclude entry are dotted config keys, got '" + quote_value(kv.first) + "'");
        keys_ok = false;
        continue;
      }
      entry.emplace_back(kv.first.Scalar(), YAML::Clone(kv.second));
    }
    if (!keys_ok) continue;
    o.exclude.push_back(entry);
    o.exclude_where.push_back(s.location("exclude." + std::to_string(i)));
  }
}

}  // namespace

SweepOptions read_sweep_options(Section s) {
  SweepOptions o;
  read_axes(s, "grid", o.grid);
  read_axes(s, "tune", o.tune);
  read_zip(s, o);
  read_seeds(s, o);
  read_exclude(s, o);
  s.finish();
  return o;
}

}  // namespace hybridlab
