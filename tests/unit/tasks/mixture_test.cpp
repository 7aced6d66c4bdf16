// Task mixtures (task.mixture): reading, which setting each step draws, batches of each
// setting's shape, evaluation on the task's own keys, and the located errors.

#include <catch2/catch.hpp>

#include <map>

#include "hybridlab/error.h"
#include "hybridlab/task.h"

using namespace hybridlab;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace mixture_test {
namespace {

std::shared_ptr<Task> make(const std::string& yaml, Config* keep = nullptr) {
  Config cfg = Config::parse(yaml, "exp.yaml");
  auto t = read_task(cfg.section("task"), {});
  cfg.raise_errors();
  if (keep) *keep = cfg;
  return t;
}

// The one-line errors that reading `yaml`'s task section records.
std::string errors_of(const std::string& yaml) {
  Config cfg = Config::parse(yaml, "exp.yaml");
  read_task(cfg.section("task"), {});
  std::string all;
  for (const auto& e : cfg.errors()) all += e + "\n";
  return all;
}

// MQAR's own setting is (64, 8); training mixes (32, 4) with weight 3 and (64, 16) with weight 1.
const char* const kMqar = R"(
task:
  name: mqar
  vocab_size: 64
  seq_len: 64
  num_kv_pairs: 8
  mixture:
    order: ORDER
    settings:
      - {seq_len: 32, num_kv_pairs: 4, weight: 3}
      - {seq_len: 64, num_kv_pairs: 16}
)";

std::string with_order(const std::string& order, const std::string& extra = "") {
  std::string y = kMqar;
  y.replace(y.find("ORDER"), 5, order + extra);
  return y;
}

// Scored positions per row of a batch: MQAR scores one position per pair.
int64_t pairs_of(const Batch& b) { return (b.targets[0] != kIgnoreIndex).sum().item<int64_t>(); }

}  // namespace

TEST_CASE("mixture: random order draws settings by weight, batches of each setting's shape",
          "[tasks][mixture]") {
  Config cfg;
  auto t = make(with_order("random"), &cfg);
  REQUIRE(t->name() == "mqar");
  REQUIRE(t->seq_len() == 64);  // the task's own setting: what evaluation uses
  REQUIRE(t->train_lengths() == std::vector<int64_t>{32, 64});
  REQUIRE(longest_train_length(*t) == 64);
  std::map<int64_t, int64_t> drawn;  // pairs -> steps
  for (int64_t step = 0; step < 400; ++step) {
    const Batch b = t->train_batch(step, 2, 5);
    const int64_t k = pairs_of(b);
    REQUIRE((k == 4 || k == 16));
    REQUIRE(b.tokens.size(1) == (k == 4 ? 32 : 64));
    ++drawn[k];
  }
  // Weight 3 : 1 -> 300 of 400 expected; a binomial sd is ~8.7, so 30 is over 3 sd.
  REQUIRE(drawn[4] > 270);
  REQUIRE(drawn[4] < 330);
  // A pure function of (seed, step); another seed draws other settings.
  for (int64_t step : {0, 7, 99}) {
    REQUIRE(torch::equal(t->train_batch(step, 2, 5).tokens, t->train_batch(step, 2, 5).tokens));
  }
  int64_t differ = 0;
  for (int64_t step = 0; step < 50; ++step)
    differ += pairs_of(t->train_batch(step, 1, 5)) != pairs_of(t->train_batch(step, 1, 6));
  REQUIRE(differ > 5);
  // Evaluation and the chance level are the task's own setting (8 pairs at 64).
  const Batch ev = t->eval_set(64, 4, 1);
  REQUIRE(ev.tokens.size(1) == 64);
  REQUIRE(pairs_of(ev) == 8);
  REQUIRE(t->chance_levels().at("accuracy") == Approx(1.0 / 32));
  // The resolved config lists the settings with every value used.
  const YAML::Node settings = cfg.resolved()["task"]["mixture"]["settings"];
  REQUIRE(settings.IsSequence());
  REQUIRE(settings.size() == 2);
  REQUIRE(settings[0]["weight"].as<double>() == 3);
  REQUIRE(settings[1]["vocab_size"].as<int64_t>() == 64);  // inherited from the task's keys
  REQUIRE(settings[1]["power_a"].as<double>() == 0.01);    // the default, resolved
}

TEST_CASE("mixture: in_order runs each setting's share of every cycle, in list order",
          "[tasks][mixture]") {
  auto t = make(with_order("in_order", "\n    cycle_steps: 8"));
  // Weights 3 : 1 of 8 steps: steps 0-5 the first setting, 6-7 the second, then again.
  std::vector<int64_t> got;
  for (int64_t step = 0; step < 16; ++step) got.push_back(pairs_of(t->train_batch(step, 1, 3)));
  REQUIRE(got == std::vector<int64_t>{4, 4, 4, 4, 4, 4, 16, 16, 4, 4, 4, 4, 4, 4, 16, 16});
}

TEST_CASE("mixture: weights at a double's extremes keep their shares", "[tasks][mixture]") {
  // Weights near a double's maximum sum to infinity: 1e308 : 1e308 is still half and half.
  std::string huge = kMqar;
  huge.replace(huge.find("weight: 3"), 9, "weight: 1.0e308");
  huge.replace(huge.find("num_kv_pairs: 16}"), 17, "num_kv_pairs: 16, weight: 1.0e308}");
  huge.replace(huge.find("ORDER"), 5, "in_order\n    cycle_steps: 4");
  auto even = make(huge);
  std::vector<int64_t> got;
  for (int64_t step = 0; step < 4; ++step) got.push_back(pairs_of(even->train_batch(step, 1, 3)));
  REQUIRE(got == std::vector<int64_t>{4, 4, 16, 16});
  // A subnormal weight is a valid, tiny share: read, and the other setting takes every draw.
  std::string tiny = kMqar;
  tiny.replace(tiny.find("weight: 3"), 9, "weight: 1e-308");
  tiny.replace(tiny.find("ORDER"), 5, "random");
  auto t = make(tiny);
  for (int64_t step = 0; step < 50; ++step) REQUIRE(pairs_of(t->train_batch(step, 1, 3)) == 16);
}

TEST_CASE("mixture: in_order refuses a cycle too short to give every setting a step",
          "[tasks][mixture]") {
  // Weights 3 : 1 need a cycle of at least 2 steps; (0.5)/C < 3/4 always, and the second
  // setting gets position C-1 once (C-0.5)/C >= 3/4, i.e. C >= 2.
  const std::string e = errors_of(with_order("in_order", "\n    cycle_steps: 1"));
  CAPTURE(e);
  REQUIRE(e.find("exp.yaml:9:5: task.mixture.cycle_steps: 1 steps per cycle give setting 1 "
                 "(weight 1) no step in order: in_order, so it would never be trained; use "
                 "cycle_steps >= 2") != std::string::npos);
  REQUIRE(errors_of(with_order("in_order", "\n    cycle_steps: 2")).empty());
  // 1 : 10 needs (0.5)/C < 1/11, so C >= 6.
  std::string y = with_order("in_order", "\n    cycle_steps: 5");
  y.replace(y.find("weight: 3"), 9, "weight: 0.1");
  REQUIRE(errors_of(y).find("5 steps per cycle give setting 0 (weight 0.1) no step") !=
          std::string::npos);
  REQUIRE(errors_of(y).find("use cycle_steps >= 6") != std::string::npos);
}

TEST_CASE("mixture: bad settings are errors at their file:line:key", "[tasks][mixture]") {
  const std::string bad = R"(
task:
  name: mqar
  vocab_size: 64
  seq_len: 64
  num_kv_pairs: 8
  mixture:
    order: sideways
    settings:
      - {seq_len: 32, num_kv_pairs: 4, weight: -1}
      - {seq_len: 64, num_kv_pairs: 16, vocab_size: 128, name: copy, nmu_kv_pairs: 3}
      - {seq_len: 30, num_kv_pairs: 8, weight: .nan}
)";
  const std::string e = errors_of(bad);
  CAPTURE(e);
  REQUIRE(e.find("exp.yaml:8:5: task.mixture.order: 'sideways' is not an order") !=
          std::string::npos);
  REQUIRE(e.find("exp.yaml:10:40: task.mixture.settings.0.weight: must be a finite number > 0") !=
          std::string::npos);
  REQUIRE(e.find("task.mixture.settings.1.name: a setting cannot set task.name") !=
          std::string::npos);
  REQUIRE(e.find("task.mixture.settings.1.vocab_size: the settings of a mixture share one "
                 "vocabulary: this one uses 128 token ids, task's own keys 64") !=
          std::string::npos);
  REQUIRE(e.find("task.mixture.settings.1.nmu_kv_pairs: unknown key 'nmu_kv_pairs'; did you "
                 "mean 'num_kv_pairs'?") != std::string::npos);
  REQUIRE(e.find("exp.yaml:12:40: task.mixture.settings.2.weight: expected a finite number") !=
          std::string::npos);
  // (30, 8): MQAR's own rules, located at the setting.
  REQUIRE(e.find("exp.yaml:12:10: task.mixture.settings.2.seq_len: must be >= 4 * num_kv_pairs") !=
          std::string::npos);

  REQUIRE(errors_of(with_order("in_order"))
              .find("task.mixture.cycle_steps: must be >= 1 with order: in_order") !=
          std::string::npos);
  REQUIRE(errors_of(with_order("random", "\n    cycle_steps: 8"))
              .find("task.mixture.cycle_steps: is read only with order: in_order") !=
          std::string::npos);
  REQUIRE(errors_of("task: {name: mqar, mixture: {settings: []}}")
              .find("task.mixture.settings: expected a non-empty list of settings") !=
          std::string::npos);
  REQUIRE(errors_of("task: {name: mqar, mixture: 3}")
              .find("task.mixture: expected a map of keys, got '3'") != std::string::npos);
  REQUIRE(errors_of("task: {name: mqar, mixture: {order: random}}")
              .find("task.mixture.settings: required key is missing") != std::string::npos);
}

}  // namespace mixture_test
