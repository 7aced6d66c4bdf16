// Task mixtures: training on several settings of one task, evaluating on the task's own setting.
//
// Based (Arora et al. 2024, arXiv 2402.18668) trains MQAR on a mixture of (length, pairs)
// settings and tests on settings past them; HazyResearch/zoology@d88d6f5
// (paper_configs/arxiv24_based_figure2/configs.py, zoology/data/utils.py) never mixes settings
// inside a batch and never shuffles: each epoch runs every batch of the first setting, then the
// next, an easy-to-hard pass repeated each epoch. Both orders are offered here:
//   order: random     each step draws one setting with probability weight / sum of weights;
//   order: in_order   steps run in cycles of `cycle_steps`; each cycle gives every setting, in
//                     list order, a run of consecutive steps in proportion to its weight.
// A setting is the task's keys with the setting's keys written over them. Evaluation, validation
// and metrics use the task's own keys (outside `mixture:`); evaluating other settings is done
// with eval variants that set `task.*` keys (docs/experiments.md).

#include "tasks/mixture.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "hybridlab/error.h"

namespace hybridlab::tasks {
namespace {

// Stream id of the mixture's own draws ("mix" in ASCII), apart from every task's streams.
constexpr uint64_t kMixtureStream = 0x6d6978;

// Each setting's cumulative share of the steps, the last exactly 1. Weights are divided by the
// largest first, so weights near a double's maximum do not sum to infinity (every share 0) and
// the tiniest ones keep their share.
std::vector<double> cumulative_shares(const std::vector<double>& weights) {
  const double largest = *std::max_element(weights.begin(), weights.end());
  double total = 0;
  for (double w : weights) total += w / largest;
  std::vector<double> out;
  double cum = 0;
  for (double w : weights) {
    cum += w / largest;
    out.push_back(cum / total);
  }
  out.back() = 1.0;
  return out;
}

// The position in an in-order cycle of `cycle` steps as a share in (0, 1): the step's midpoint.
double cycle_share(int64_t pos, int64_t cycle) {
  return (static_cast<double>(pos) + 0.5) / static_cast<double>(cycle);
}

// How many of a cycle's positions fall below the cumulative share `c`, by the comparison
// setting_at makes (the closed form ceil(c*cycle - 0.5), corrected where rounding differs).
int64_t positions_below(double c, int64_t cycle) {
  int64_t k = std::clamp<int64_t>(
      static_cast<int64_t>(std::ceil(c * static_cast<double>(cycle) - 0.5)), 0, cycle);
  while (k > 0 && !(cycle_share(k - 1, cycle) < c)) --k;
  while (k < cycle && cycle_share(k, cycle) < c) ++k;
  return k;
}

// The first setting an in-order cycle of `cycle` steps gives no step, or -1 when each has one.
int64_t setting_without_steps(const std::vector<double>& cumulative, int64_t cycle) {
  int64_t before = 0;
  for (size_t i = 0; i < cumulative.size(); ++i) {
    const int64_t upto = i + 1 == cumulative.size() ? cycle : positions_below(cumulative[i], cycle);
    if (upto == before) return static_cast<int64_t>(i);
    before = upto;
  }
  return -1;
}

class MixtureTask : public Task {
 public:
  MixtureTask(std::shared_ptr<Task> base, std::vector<MixtureSetting> settings, MixtureOptions opts)
      : base_(std::move(base)), settings_(std::move(settings)), opts_(opts) {
    std::vector<double> weights;
    for (const MixtureSetting& s : settings_) weights.push_back(s.weight);
    cumulative_ = cumulative_shares(weights);
  }

  std::string name() const override { return base_->name(); }
  int64_t vocab_size() const override { return base_->vocab_size(); }
  int64_t seq_len() const override { return base_->seq_len(); }
  std::vector<int64_t> train_lengths() const override {
    std::vector<int64_t> out;
    for (const MixtureSetting& s : settings_) out.push_back(s.task->seq_len());
    return out;
  }
  std::string length_problem(int64_t length) const override {
    return base_->length_problem(length);
  }
  void prepare(const std::vector<int64_t>& eval_lengths) override {
    base_->prepare(eval_lengths);
    for (const MixtureSetting& s : settings_) s.task->prepare({s.task->seq_len()});
  }
  Batch train_batch(int64_t step, int64_t batch_size, uint64_t seed) override {
    const size_t i = setting_at(step, seed);
    // Each setting draws from its own stream, so two settings never share examples.
    return settings_[i].task->train_batch(step, batch_size,
                                          derive_seed(seed, kMixtureStream, i + 1));
  }
  Batch eval_set(int64_t length, int64_t wanted, uint64_t seed) override {
    return base_->eval_set(length, wanted, seed);
  }
  Batch validation_set(int64_t length, int64_t wanted, uint64_t seed,
                       const std::vector<int64_t>& eval_lengths, int64_t eval_examples) override {
    return base_->validation_set(length, wanted, seed, eval_lengths, eval_examples);
  }
  std::map<std::string, double> metrics(const ScoreSums& sums) const override {
    return base_->metrics(sums);
  }
  std::string primary_metric() const override { return base_->primary_metric(); }
  bool higher_is_better() const override { return base_->higher_is_better(); }
  bool per_position_curve() const override { return base_->per_position_curve(); }
  bool position_accuracy_curve() const override { return base_->position_accuracy_curve(); }
  bool byte_level() const override { return base_->byte_level(); }
  torch::Tensor token_bytes() const override { return base_->token_bytes(); }
  std::shared_ptr<const tokenizer::BpeTokenizer> text_tokenizer() const override {
    return base_->text_tokenizer();
  }
  bool answer_span() const override { return base_->answer_span(); }
  std::map<std::string, double> chance_levels() const override { return base_->chance_levels(); }
  std::string packed_documents_setting() const override {
    for (const MixtureSetting& s : settings_) {
      std::string where = s.task->packed_documents_setting();
      if (!where.empty()) return where;
    }
    return "";
  }

  size_t setting_at(int64_t step, uint64_t seed) const {
    double u = 0;
    if (opts_.order == MixtureOrder::kRandom) {
      // A uniform draw in [0, 1) from 53 bits of a hash of (seed, step).
      const uint64_t h = derive_seed(seed, kMixtureStream, 0, static_cast<uint64_t>(step));
      u = static_cast<double>(h >> 11) * 0x1.0p-53;
    } else {
      u = cycle_share(step % opts_.cycle_steps, opts_.cycle_steps);
    }
    for (size_t i = 0; i < cumulative_.size(); ++i) {
      if (u < cumulative_[i]) return i;
    }
    return cumulative_.size() - 1;
  }

 private:
  std::shared_ptr<Task> base_;
  std::vector<MixtureSetting> settings_;
  MixtureOptions opts_;
  std::vector<double> cumulative_;  // cumulative weight share after each setting
};

// The settings' node: a non-empty list of maps. Records a problem and returns false otherwise.
bool settings_list_ok(Section& mix, const YAML::Node& list) {
  bool ok = list.IsSequence() && list.size() > 0;
  for (size_t i = 0; ok && i < list.size(); ++i) ok = list[i].IsMap();
  if (!ok) {
    mix.error("settings",
              "expected a non-empty list of settings, each a map of task keys and an optional "
              "weight, e.g. [{seq_len: 64, num_kv_pairs: 4, weight: 4}, {seq_len: 128, "
              "num_kv_pairs: 8}]");
  }
  return ok;
}

// In order, a cycle too short for a setting's share would never train it: refused at
// cycle_steps, naming the setting and the shortest cycle that gives every setting a step.
void check_every_setting_steps(Section& mix, const std::vector<MixtureSetting>& settings,
                               const MixtureOptions& opts) {
  std::vector<double> weights;
  for (const MixtureSetting& s : settings) weights.push_back(s.weight);
  const std::vector<double> cumulative = cumulative_shares(weights);
  const int64_t starved = setting_without_steps(cumulative, opts.cycle_steps);
  if (starved < 0) return;
  // The shortest cycle that serves every setting, searched up to a bound that keeps this quick.
  constexpr int64_t kSearchUpTo = 1 << 20;
  int64_t shortest = -1;
  for (int64_t c = opts.cycle_steps + 1; c <= kSearchUpTo && shortest < 0; ++c) {
    if (setting_without_steps(cumulative, c) < 0) shortest = c;
  }
  mix.error("cycle_steps",
            fmt::format("{} steps per cycle give setting {} (weight {}) no step in order: "
                        "in_order, so it would never be trained; {}",
                        opts.cycle_steps, starved, settings[static_cast<size_t>(starved)].weight,
                        shortest > 0 ? fmt::format("use cycle_steps >= {}", shortest)
                                     : std::string("raise its weight or cycle_steps")));
}

}  // namespace

std::shared_ptr<Task> read_mixture(Section& task, const TaskType& type, const TaskContext& ctx) {
  Section mix = task.child("mixture");
  MixtureOptions opts;
  const std::string order = mix.get<std::string>("order", "random");
  if (order == "in_order") {
    opts.order = MixtureOrder::kInOrder;
  } else if (order != "random") {
    mix.error("order", fmt::format("'{}' is not an order: random (each step draws a setting by "
                                   "weight) or in_order (cycles of cycle_steps, settings in list "
                                   "order, as Zoology's unshuffled epochs)",
                                   order));
  }
  if (opts.order == MixtureOrder::kInOrder) {
    opts.cycle_steps = mix.get<int64_t>("cycle_steps", 0);
    mix.check(opts.cycle_steps >= 1, "cycle_steps",
              "must be >= 1 with order: in_order (the steps of one pass over the settings)");
  } else {
    // Not read here, so the resolved config (config show) does not gain a default that a
    // second read would refuse.
    mix.check(!mix.has("cycle_steps"), "cycle_steps",
              "is read only with order: in_order (random order draws a setting every step)");
  }
  mix.accept("settings");
  const YAML::Node list = mix.has("settings") ? mix.node()["settings"] : YAML::Node();
  if (!mix.has("settings")) mix.error("settings", "required key is missing");
  mix.finish();

  // The task's own keys: the evaluation setting, and what each setting starts from.
  task.accept("mixture");
  YAML::Node own = YAML::Clone(task.node());
  own.remove("mixture");
  std::shared_ptr<Task> base = type.read(task, ctx);
  if (!mix.has("settings") || !settings_list_ok(mix, list)) return nullptr;

  std::vector<MixtureSetting> settings;
  YAML::Node resolved_list(YAML::NodeType::Sequence);
  const std::string list_path = mix.path() + ".settings";
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string path = list_path + "." + std::to_string(i);
    YAML::Node merged = YAML::Clone(own);
    for (const auto& kv : list[i]) merged[kv.first.Scalar()] = YAML::Clone(kv.second);
    Section s = task.config().section_at(path, merged);
    s.accept("name");
    for (const char* key : {"name", "mixture"}) {
      if (list[i][key].IsDefined()) {
        s.error(key, fmt::format("a setting cannot set task.{}: a mixture mixes settings of one "
                                 "task (its keys are written over task's own)",
                                 key));
      }
    }
    const double weight = s.get<double>("weight", 1.0);
    s.check(std::isfinite(weight) && weight > 0, "weight",
            fmt::format("must be a finite number > 0 (the setting's share of the steps), got {}",
                        weight));
    const size_t problems = task.config().errors().size();
    std::shared_ptr<Task> t = type.read(s, ctx);  // reads the task's keys, then finish()
    if (!t) continue;
    // A length the task cannot make, unless its reader already said why.
    if (task.config().errors().size() == problems) {
      if (const std::string p = t->length_problem(t->seq_len()); !p.empty())
        s.error("seq_len", "task " + t->name() + ": " + p);
    }
    if (base && t->vocab_size() != base->vocab_size()) {
      s.error("vocab_size",
              fmt::format("the settings of a mixture share one vocabulary: this one uses {} "
                          "token ids, task's own keys {}",
                          t->vocab_size(), base->vocab_size()));
    }
    settings.push_back({t, weight});
    resolved_list.push_back(
        YAML::Clone(task.config().resolved()["task"]["mixture"]["settings"][std::to_string(i)]));
  }
  // Readers record under "...settings.<i>" as map keys; the resolved config shows the list.
  YAML::Node resolved = task.config().resolved();
  resolved["task"]["mixture"]["settings"] = resolved_list;
  if (!base || settings.size() != list.size()) return nullptr;
  if (opts.order == MixtureOrder::kInOrder) check_every_setting_steps(mix, settings, opts);
  return std::make_shared<MixtureTask>(base, std::move(settings), opts);
}

}  // namespace hybridlab::tasks
