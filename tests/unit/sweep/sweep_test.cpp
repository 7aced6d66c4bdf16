// Sweep expansion (grid, zip, seeds, exclude), run names, sharding, validation of sweep keys.

#include <catch2/catch.hpp>

#include <algorithm>

#include <set>

#include "hybridlab/experiment.h"
#include "hybridlab/sweep.h"
#include "support/job_support.h"

using namespace hybridlab;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace sweep_test {
namespace {

std::vector<std::string> names(const std::vector<Variant>& vs) {
  std::vector<std::string> out;
  for (const auto& v : vs) out.push_back(v.name);
  return out;
}

Experiment read(const std::string& sweep_yaml) {
  return read_experiment(
      Config::parse(jobtest::tiny_experiment(
                        "{name: mqar, seq_len: 32, vocab_size: 64, num_kv_pairs: 4}", sweep_yaml),
                    "exp.yaml"));
}

}  // namespace

TEST_CASE("sweep: grid x seeds in file order, last axis fastest, names from varied values",
          "[job][sweep]") {
  const Experiment e = read(
      "sweep:\n"
      "  grid:\n"
      "    model.attention.position.scheme: [nope, rope]\n"
      "    model.layers: [GA, AA, GG]\n"
      "    train.lr: [0.001]\n"
      "  seeds: [0, 1]\n");
  const auto vs = expand_sweep(e.sweep);
  REQUIRE(vs.size() == 12u);
  REQUIRE(vs[0].name == "scheme-nope_layers-GA_seed-0");
  REQUIRE(vs[1].name == "scheme-nope_layers-GA_seed-1");
  REQUIRE(vs[2].name == "scheme-nope_layers-AA_seed-0");
  REQUIRE(vs[11].name == "scheme-rope_layers-GG_seed-1");
  // Single-valued axes are applied but not named.
  REQUIRE(vs[0].assignments.size() == 4u);
  REQUIRE(vs[0].assignments[2].first == "train.lr");
  REQUIRE(vs[0].assignments[3].first == "train.seed");
  REQUIRE(vs[11].assignments[3].second.as<int64_t>() == 1);
  // The variant config carries the values.
  const Config c = variant_config(e.config, vs[11], e.sweep);
  REQUIRE(c.lookup("model.attention.position.scheme").as<std::string>() == "rope");
  REQUIRE(c.lookup("model.layers").as<std::string>() == "GG");
  REQUIRE(c.lookup("train.seed").as<int64_t>() == 1);
  REQUIRE(e.config.lookup("train.seed").IsDefined() == false);  // the base is untouched
}

TEST_CASE("sweep: zip groups vary together, exclude drops variants, maps labelled by name",
          "[job][sweep]") {
  // vocab_size 256: the copy task uses byte ids.
  std::string yaml =
      jobtest::tiny_experiment("{name: mqar, seq_len: 32, vocab_size: 64, num_kv_pairs: 4}");
  yaml.replace(yaml.find("vocab_size: 64"), 14, "vocab_size: 256");
  const Experiment e = read_experiment(Config::parse(
      yaml + "sweep:\n"
             "  grid:\n"
             "    task: [{name: mqar, seq_len: 32, vocab_size: 64, num_kv_pairs: 4},\n"
             "           {name: copy, seq_len: 32}]\n"
             "  zip:\n"
             "    model.d_model: [16, 32]\n"
             "    model.attention.n_heads: [2, 4]\n"
             "  exclude:\n"
             "    - {task: {name: copy, seq_len: 32}, model.d_model: 32}\n",
      "exp.yaml"));
  const auto vs = expand_sweep(e.sweep);
  REQUIRE(names(vs) == std::vector<std::string>{"task-mqar_d_model-16_n_heads-2",
                                                "task-mqar_d_model-32_n_heads-4",
                                                "task-copy_d_model-16_n_heads-2"});
}

TEST_CASE("sweep: empty maps read as none, repeated labels fall back to the values' leaves",
          "[job][sweep]") {
  // iRoPE beside plain RoPE and FoX: the position labels repeat (rope twice), the overrides are
  // {} for two rows (no overrides: "none") and a layer's scheme for the third.
  const Experiment e = read(
      "sweep:\n"
      "  zip:\n"
      "    model.attention.position: [{scheme: rope}, {scheme: fox}, {scheme: rope}]\n"
      "    model.overrides: [{}, {}, {1: {position: {scheme: nope_temperature}}}]\n");
  REQUIRE(names(expand_sweep(e.sweep)) ==
          std::vector<std::string>{"position-rope_overrides-none", "position-fox_overrides-none",
                                   "position-rope_overrides-nope_temperature"});
}

TEST_CASE("sweep: an exclude entry that matches no variant is an error naming it", "[job][sweep]") {
  std::string msg;
  try {
    const Experiment e = read(
        "sweep:\n"
        "  grid:\n"
        "    model.layers: [GA, AA]\n"
        "  exclude:\n"
        "    - {model.layers: AA}\n"
        "    - {model.layer: GA}\n"     // typo in the key
        "    - {model.layers: GG}\n");  // a value not on the axis
    expand_sweep(e.sweep);
  } catch (const hybridlab::ConfigError& err) {
    msg = err.what();
  }
  CHECK_THAT(msg,
             Catch::Matchers::Contains("sweep.exclude[1]: {model.layer: GA} matches no variant"));
  CHECK_THAT(msg, Catch::Matchers::Contains("sweep.exclude[2]: {model.layers: GG}"));
  CHECK_THAT(msg, !Catch::Matchers::Contains("exclude[0]"));
  // The location of the entry: exp.yaml, the line of `- {model.layer: GA}`.
  const std::string yaml = jobtest::tiny_experiment(
      "{name: mqar, seq_len: 32, vocab_size: 64, num_kv_pairs: 4}", "sweep:\n  grid:\n");
  const int line = 1 + static_cast<int>(std::count(yaml.begin(), yaml.end(), '\n')) + 2;
  CHECK_THAT(msg, Catch::Matchers::Contains("exp.yaml:" + std::to_string(line + 1) + ":"));
}

TEST_CASE("sweep: names disambiguate equal last key components", "[job][sweep]") {
  const Experiment e = read(
      "sweep:\n"
      "  grid:\n"
      "    model.attention.n_heads: [2, 4]\n"
      "    model.gated_deltanet.n_heads: [1, 2]\n");
  const auto vs = expand_sweep(e.sweep);
  REQUIRE(vs[0].name == "attention.n_heads-2_gated_deltanet.n_heads-1");
}

TEST_CASE("sweep: no sweep is one run named main", "[job][sweep]") {
  const Experiment e = read("");
  REQUIRE(names(expand_sweep(e.sweep)) == std::vector<std::string>{"main"});
}

TEST_CASE("sweep: shards are a deterministic round-robin partition", "[job][sweep]") {
  const Experiment e =
      read("sweep: {grid: {model.layers: [GA, AA, GG, AG, GGA]}, seeds: [0, 1]}\n");
  const auto all = expand_sweep(e.sweep);
  REQUIRE(all.size() == 10u);
  std::multiset<std::string> seen;
  for (int64_t i = 0; i < 3; ++i) {
    const auto part = shard_variants(all, i, 3);
    REQUIRE(part.size() == (i == 0 ? 4u : 3u));
    for (size_t k = 0; k < part.size(); ++k) REQUIRE(part[k].name == all[i + 3 * k].name);
    for (const auto& v : part) seen.insert(v.name);
  }
  REQUIRE(seen.size() == all.size());
  REQUIRE(std::set<std::string>(seen.begin(), seen.end()).size() == all.size());
  REQUIRE(parse_shard("2/3") == std::pair<int64_t, int64_t>{2, 3});
  REQUIRE_THROWS_AS(parse_shard("3/3"), UserError);
  REQUIRE_THROWS_AS(parse_shard("1"), UserError);
  REQUIRE_THROWS_AS(parse_shard("a/b"), UserError);
}

TEST_CASE("sweep: a key that is not a config key is reported with the nearest key",
          "[job][sweep]") {
  try {
    read("sweep:\n  grid:\n    model.attention.positon.scheme: [nope, rope]\n");
    FAIL("expected ConfigError");
  } catch (const ConfigError& err) {
    const std::string m = err.what();
    INFO(m);
    REQUIRE(m.find("exp.yaml:8") != std::string::npos);  // the sweep line
    REQUIRE(m.find("did you mean 'position'") != std::string::npos);
  }
  try {
    read("sweep:\n  grid:\n    train.steps: [10, many]\n");
    FAIL("expected ConfigError");
  } catch (const ConfigError& err) {
    REQUIRE(std::string(err.what()).find("train.steps") != std::string::npos);
  }
  REQUIRE_THROWS_WITH(read("sweep:\n  zip:\n    model.d_model: [16, 32]\n    train.lr: [0.1]\n"),
                      Catch::Contains("equal lengths"));
  REQUIRE_THROWS_WITH(read("sweep:\n  grid:\n    model.d_model: 16\n"),
                      Catch::Contains("non-empty list"));
}

TEST_CASE("sweep: axes that would run one configuration twice are refused at their line",
          "[job][sweep]") {
  const std::string head = jobtest::tiny_experiment(
      "{name: mqar, seq_len: 32, vocab_size: 64, num_kv_pairs: 4}", "sweep:\n");
  const auto lines = std::count(head.begin(), head.end(), '\n');  // `sweep:` is the last line
  const std::string line = std::to_string(lines + 2);
  const auto error = [](const std::string& sweep) {
    try {
      read("sweep:\n" + sweep);
    } catch (const ConfigError& err) {
      return std::string(err.what());
    }
    return std::string("<accepted>");
  };
  // One learning rate written three ways.
  CHECK_THAT(error("  grid:\n    train.lr: [0.001, 1e-3, 1.0e-3]\n"),
             Catch::Contains("exp.yaml:" + line +
                             ":5: sweep.grid: 'train.lr' lists the same "
                             "setting twice (0.001 and 1e-3, entries 1 and 2)"));
  // Maps equal whatever the key order; a zip group's rows.
  CHECK_THAT(error("  tune:\n    model.attention.position: [{scheme: rope, rope_theta: 100}, "
                   "{rope_theta: 100.0, scheme: rope}]\n"),
             Catch::Contains("sweep.tune: 'model.attention.position' lists the same setting"));
  CHECK_THAT(error("  zip:\n    train.lr: [0.1, 0.1]\n    train.steps: [2, 2]\n"),
             Catch::Contains("sweep.zip: a group lists the same setting twice"));
  CHECK_NOTHROW(read("sweep:\n  zip:\n    train.lr: [0.1, 0.1]\n    train.steps: [2, 3]\n"));
  // train.seed beside seeds, keys that name the experiment, a seed listed twice.
  CHECK_THAT(error("  tune:\n    train.seed: [0, 1]\n  seeds: [0, 1]\n"),
             Catch::Contains("exp.yaml:" + line +
                             ":5: sweep.tune: 'train.seed' is set by "
                             "sweep.seeds"));
  CHECK_NOTHROW(read("sweep:\n  tune:\n    train.seed: [0, 1]\n"));
  CHECK_THAT(error("  tune:\n    sweep.seeds: [[0], [1]]\n"),
             Catch::Contains("'sweep.seeds' is not a setting of a run"));
  CHECK_THAT(error("  grid:\n    name: [a, b]\n"),
             Catch::Contains("'name' is not a setting of a run"));
  CHECK_THAT(error("  seeds: [0, 1, 0]\n"),
             Catch::Contains("exp.yaml:" + std::to_string(lines + 1) +
                             ":3: sweep.seeds: lists a seed twice"));
  // One key in grid and a zip group, or in two zip groups: refused at the later one.
  CHECK_THAT(error("  grid:\n    train.lr: [0.1, 0.2]\n  zip:\n    train.lr: [0.1, 0.2]\n"
                   "    train.steps: [2, 3]\n"),
             Catch::Contains("exp.yaml:" + std::to_string(lines + 4) +
                             ":5: sweep.zip: 'train.lr' is already swept at exp.yaml:" + line +
                             ":5 (sweep.grid)"));
  CHECK_THAT(error("  zip:\n    - {train.lr: [0.1, 0.2], train.steps: [2, 3]}\n"
                   "    - {train.lr: [0.3, 0.4], model.d_model: [16, 32]}\n"),
             Catch::Contains("sweep.zip: 'train.lr' is already swept at"));
  CHECK_THAT(error("  grid:\n    train.lr: [0.1, 0.2]\n  tune:\n    train.lr: [0.3]\n"),
             Catch::Contains("sweep.tune: 'train.lr' is also swept by grid/zip"));
  // An empty list of zip groups is refused like an empty axis.
  CHECK_THAT(error("  zip: []\n"), Catch::Contains("sweep.zip: must hold at least one group"));
  CHECK_THAT(error("  zip: {}\n"), Catch::Contains("sweep.zip: must hold at least one group"));
  // seeds: [] is how a resolved config (config show) writes "no seeds": one run at train.seed.
  CHECK(names(expand_sweep(read("sweep:\n  seeds: []\n").sweep)) ==
        std::vector<std::string>{"main"});
  // exclude matches values as the readers read them.
  const Experiment e = read(
      "sweep:\n  grid:\n    train.lr: [0.001, 0.01]\n  exclude:\n"
      "    - {train.lr: 1e-3}\n");
  CHECK(names(expand_sweep(e.sweep)) == std::vector<std::string>{"lr-0.01"});
}

TEST_CASE("sweep: claims may name the eval length of any variant, not only the base's",
          "[job][sweep][claims]") {
  // No eval.lengths: each variant evaluates at its own task.seq_len (32 and 64).
  const std::string sweep =
      "sweep:\n"
      "  grid:\n"
      "    task:\n"
      "      - {name: mqar, seq_len: 32, vocab_size: 64, num_kv_pairs: 4}\n"
      "      - {name: mqar, seq_len: 64, vocab_size: 64, num_kv_pairs: 8}\n"
      "expect:\n";
  CHECK_NOTHROW(read(sweep + "  - task-mqar-64-64-8 accuracy at 64 >= 0.5\n"));
  CHECK_NOTHROW(read(sweep + "  - task-mqar-32-64-4 accuracy at 32 >= 0.5\n"));
  CHECK_THROWS_WITH(read(sweep + "  - task-mqar-64-64-8 accuracy at 128 >= 0.5\n"),
                    Catch::Contains("128"));
}

}  // namespace sweep_test
