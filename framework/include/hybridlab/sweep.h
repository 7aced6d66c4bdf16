#pragma once
// Sweeps: the `sweep:` section, its expansion into variants, run names and shards.
//
// This layer sits below `experiment` (experiment.h includes it; it includes only config.h), so
// reading an experiment can validate every variant, and running one needs nothing above it.
//
// Expansion order is deterministic: grid axes in file order (the last varies fastest), then zip
// groups, then tuned axes, then seeds; `exclude` entries drop variants. Run names join `<short
// key>-<value>` parts of the varied values with '_' (short key: the last component of the dotted
// key, or more when two varied keys share it), e.g. "pattern-GGGA_scheme-rope_seed-0"; an
// experiment without sweep has one run named "main". Every part goes through folder_name(), so a
// run name is always one safe folder name.

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "hybridlab/config.h"

namespace hybridlab {

/// One axis of a sweep: a dotted config key and its values (YAML nodes, in file order).
struct SweepAxis {
  std::string key;
  std::vector<YAML::Node> values;
  Location where;
};

/// `sweep:` — grid (every combination), zip groups (lists varied together), tune, seeds, exclude.
struct SweepOptions {
  std::vector<SweepAxis> grid;
  std::vector<std::vector<SweepAxis>> zip;  ///< each group: axes of equal length
  /// Hyperparameters tuned per variant (every combination, like grid): each variant trains at
  /// every value and the report keeps the value best on the task's validation split.
  std::vector<SweepAxis> tune;
  std::vector<int64_t> seeds;  ///< empty: one run with train.seed
  /// Partial assignments (dotted key -> value); a variant matching every entry of one is dropped.
  std::vector<std::vector<std::pair<std::string, YAML::Node>>> exclude;
  std::vector<Location> exclude_where;  ///< where each exclude entry is written
  Location where;                       ///< the `sweep:` key (empty file when absent)
  bool empty() const { return grid.empty() && zip.empty() && tune.empty() && seeds.empty(); }
};

/// Reads only `sweep:` (records problems in its config; the caller raises them).
SweepOptions read_sweep_options(Section s);

/// One run of a sweep: its name and the dotted assignments that make it.
struct Variant {
  std::string name;
  std::vector<std::pair<std::string, YAML::Node>> assignments;  ///< in expansion order
  std::vector<std::pair<std::string, std::string>> labels;      ///< short key -> value text
  /// Label keys set by `sweep.tune` -> the value labels of that key's grid, in file order.
  std::vector<std::pair<std::string, std::vector<std::string>>> tuned;
};

/// The part of a run name for one varied value: `<key>-<value>`, each side through folder_name()
/// (e.g. "scheme-rope", "seed-0").
std::string run_name_part(const std::string& key, const std::string& value);

/// The variant a run belongs to: its name without the parts of `drop` keys (the seed, tuned
/// keys), "main" when nothing is left. E.g. "pattern-GGGA_lr-0.001_seed-1" with drop {seed, lr}
/// is "pattern-GGGA".
std::string variant_name(const std::string& run_name,
                         const std::vector<std::pair<std::string, std::string>>& labels,
                         const std::set<std::string>& drop);

/// The run name and labels under which evaluation variant `eval` of a run is reported ("trained"
/// for the trained setting, when the experiment has eval variants): "<name>_eval-<eval>" and the
/// labels plus eval=<eval>. Claims and the report both name such rows through this.
std::pair<std::string, std::vector<std::pair<std::string, std::string>>> eval_variant_run(
    const std::string& name, const std::vector<std::pair<std::string, std::string>>& labels,
    const std::string& eval);

/// Every variant of `sweep` (one unnamed "main" variant when it is empty). Throws ConfigError for
/// zip groups of unequal length, exclude entries that match nothing, or two variants with the
/// same name (naming the sweep's file:line).
std::vector<Variant> expand_sweep(const SweepOptions& sweep);

/// A copy of `base` with the variant's assignments applied (locations point at the sweep).
Config variant_config(const Config& base, const Variant& v, const SweepOptions& sweep);

/// Parses "i/n" (0 <= i < n). Throws UserError otherwise.
std::pair<int64_t, int64_t> parse_shard(const std::string& text);

/// The variants of shard i of n: those whose index % n == i (round robin, so shards balance).
std::vector<Variant> shard_variants(const std::vector<Variant>& all, int64_t i, int64_t n);

/// The folder-name rule for experiment and run names. Bytes in [A-Za-z0-9._+-] are kept, every
/// other run of bytes (space, '/', NUL, any non-ASCII UTF-8) becomes one '_', and a leading '.'
/// becomes '_' (so "", "." and ".." can never name a folder that escapes or aliases its parent).
/// When the text was altered, "-" and the first 8 hex digits of the text's FNV-1a 64-bit hash are
/// appended, so distinct texts stay distinct folders: "a_b" -> "a_b", "a b" -> "a_b-<hash>",
/// "α β" and "γ δ" -> "_-<hash1>" and "_-<hash2>". Safe names are returned unchanged.
std::string folder_name(const std::string& text);

}  // namespace hybridlab
