// The recall and memorization tasks of the MAD suite (Poli et al. 2024, "Mechanistic Design and
// Scaling of Hybrid Architectures", arXiv 2403.17844; generators as athms/mad-lab@0f49a45
// mad/data/instances.py; reference/order_and_state.md §5). Selective copying is `selective_copy`.
//
// in_context_recall / noisy_recall (multi-query, as MAD's configs): pairs `k v` with keys from the
// first half of the non-noise vocabulary and values from the second; a key keeps its value within
// a sequence; the last pair is a probe of a key already shown. With probability frac_noise a pair
// slot (all but one) is two uniform noise tokens instead. Training is next-token prediction at
// every position (as MAD's training instances); evaluation scores only the value after each key
// shown before (the probe included), never noise. MAD's sequence of `seq_len` tokens loses its
// last token to the shift; here a row holds all `seq_len` tokens and its last target is unscored.
//
// memorization: one fixed key -> value map for every sequence (keys [0, V'/2), values
// [V'/2, V'), V' = vocab_size - 1; MAD draws it with NumPy's generator at seed 12345, here with
// this library's generator at that seed: another map of the same kind); rows are `key INSERT`
// pairs with keys uniform, and the target at each INSERT (id vocab_size - 1) is the key's value,
// in training and evaluation alike.
//
// Metric: `accuracy` over the scored positions (per token; MAD's torchmetrics MulticlassAccuracy
// defaults to a macro average over classes, which it reports: compare with care).

#include <fmt/format.h>

#include <cmath>
#include <set>

#include "tasks/registry.h"
#include "tasks/synthetic.h"

namespace hybridlab::tasks {
namespace {

struct RecallOptions {
  std::string name;
  int64_t seq_len = 128;
  int64_t vocab_size = 16;  ///< all tokens, noise included
  int64_t noise_vocab_size = 0;
  double frac_noise = 0;
};

class InContextRecallTask : public SyntheticTask {
 public:
  explicit InContextRecallTask(RecallOptions o) : o_(std::move(o)) {}
  std::string name() const override { return o_.name; }
  int64_t vocab_size() const override { return o_.vocab_size; }
  int64_t seq_len() const override { return o_.seq_len; }
  std::string length_problem(int64_t L) const override {
    return short_length_problem(L, 4, "a key-value pair and its probe", true);
  }

  Batch generate(at::Generator& gen, int64_t n, int64_t L, Split split) override {
    const int64_t P = L / 2, half = (o_.vocab_size - o_.noise_vocab_size) / 2;
    const torch::Tensor keys = torch::randint(0, half, {n, P}, gen, torch::kLong);
    const torch::Tensor fresh = torch::randint(half, 2 * half, {n, P}, gen, torch::kLong);
    const torch::Tensor noise_u = torch::rand({n, P}, gen, torch::kDouble);
    const int64_t noise_from = o_.vocab_size - o_.noise_vocab_size;
    const torch::Tensor noise_tok =
        o_.noise_vocab_size > 0
            ? torch::randint(noise_from, o_.vocab_size, {n, 2 * P}, gen, torch::kLong)
            : torch::zeros({n, 2 * P}, torch::kLong);
    const torch::Tensor keep = torch::randint(0, P - 1, {n}, gen, torch::kLong);
    const torch::Tensor probe_u = torch::rand({n}, gen, torch::kDouble);
    torch::Tensor seq = torch::empty({n, L}, torch::kLong);
    torch::Tensor targets = torch::full({n, L}, kIgnoreIndex, torch::kLong);
    const auto ka = keys.accessor<int64_t, 2>(), fa = fresh.accessor<int64_t, 2>();
    const auto na = noise_u.accessor<double, 2>();
    const auto ta = noise_tok.accessor<int64_t, 2>();
    const auto keep_a = keep.accessor<int64_t, 1>();
    const auto probe_a = probe_u.accessor<double, 1>();
    auto sa = seq.accessor<int64_t, 2>(), ga = targets.accessor<int64_t, 2>();
    std::vector<int64_t> value_of(static_cast<size_t>(half));
    std::vector<int64_t> shown;
    for (int64_t b = 0; b < n; ++b) {
      std::fill(value_of.begin(), value_of.end(), -1);
      shown.clear();
      for (int64_t i = 0; i < P; ++i) {
        const bool probe = i == P - 1;
        const bool noise = !probe && i != keep_a[b] && na[b][i] < o_.frac_noise;
        if (noise) {
          sa[b][2 * i] = ta[b][2 * i];
          sa[b][2 * i + 1] = ta[b][2 * i + 1];
          continue;
        }
        int64_t k = ka[b][i];
        if (probe) k = shown[static_cast<size_t>(probe_a[b] * double(shown.size()))];
        const bool seen = value_of[size_t(k)] >= 0;
        if (!seen) {
          value_of[size_t(k)] = fa[b][i];
          shown.push_back(k);
        }
        sa[b][2 * i] = k;
        sa[b][2 * i + 1] = value_of[size_t(k)];
        if (split == Split::kEval && seen) ga[b][2 * i] = value_of[size_t(k)];
      }
    }
    if (split == Split::kTrain) {
      // Next-token targets everywhere but the last position.
      targets.slice(1, 0, L - 1).copy_(seq.slice(1, 1, L));
    }
    return {seq, targets};
  }

  std::map<std::string, double> metrics(const ScoreSums& s) const override {
    return token_metrics(s);
  }
  std::string primary_metric() const override { return "accuracy"; }
  std::map<std::string, double> chance_levels() const override {
    const double values = static_cast<double>((o_.vocab_size - o_.noise_vocab_size) / 2);
    return {{"accuracy", 1.0 / values}, {"sequence_accuracy", 0.0}, {"loss", std::log(values)}};
  }

 private:
  RecallOptions o_;
};

std::shared_ptr<Task> read_recall(Section& s, RecallOptions o) {
  o.seq_len = s.get<int64_t>("seq_len", o.seq_len);
  o.vocab_size = s.get<int64_t>("vocab_size", o.vocab_size);
  o.noise_vocab_size = s.get<int64_t>("noise_vocab_size", o.noise_vocab_size);
  o.frac_noise = s.get<double>("frac_noise", o.frac_noise);
  s.check(o.noise_vocab_size >= 0, "noise_vocab_size", "must be >= 0");
  s.check(o.vocab_size - o.noise_vocab_size >= 4, "vocab_size",
          fmt::format("must leave at least 4 tokens for keys and values besides the "
                      "noise_vocab_size = {} noise tokens",
                      o.noise_vocab_size));
  s.check(o.frac_noise >= 0 && o.frac_noise < 1, "frac_noise", "must be in [0, 1)");
  s.check(o.frac_noise == 0 || o.noise_vocab_size > 0, "frac_noise",
          "needs noise_vocab_size > 0 (the noise tokens)");
  s.check(o.seq_len >= 4 && o.seq_len % 2 == 0, "seq_len",
          "must be even and >= 4 (key-value pairs, the last one a probe)");
  s.finish();
  return std::make_shared<InContextRecallTask>(o);
}

struct MemorizationOptions {
  int64_t seq_len = 32;
  int64_t vocab_size = 256;
};

class MemorizationTask : public SyntheticTask {
 public:
  explicit MemorizationTask(MemorizationOptions o) : o_(o) {
    // The fixed map: keys [0, V'/2) onto a random permutation of values [V'/2, V').
    const int64_t v = o_.vocab_size - 1, keys = v / 2;
    at::Generator gen = make_generator(12345);
    const torch::Tensor perm = torch::randperm(v - keys, gen, torch::kLong) + keys;
    map_ = perm.slice(0, 0, keys).contiguous();
  }
  std::string name() const override { return "memorization"; }
  int64_t vocab_size() const override { return o_.vocab_size; }
  int64_t seq_len() const override { return o_.seq_len; }
  std::string length_problem(int64_t L) const override {
    return short_length_problem(L, 2, "a key and its insert token", true);
  }
  Batch generate(at::Generator& gen, int64_t n, int64_t L, Split) override {
    const int64_t P = L / 2;
    const torch::Tensor k = torch::randint(0, map_.size(0), {n, P}, gen, torch::kLong);
    const torch::Tensor insert = torch::full({n, P}, o_.vocab_size - 1, torch::kLong);
    const torch::Tensor seq = torch::stack({k, insert}, 2).reshape({n, 2 * P});
    const torch::Tensor ignore = torch::full({n, P}, kIgnoreIndex, torch::kLong);
    const torch::Tensor targets = torch::stack({ignore, map_.index({k})}, 2).reshape({n, 2 * P});
    return {seq, targets};
  }
  std::map<std::string, double> metrics(const ScoreSums& s) const override {
    return {{"accuracy", s.tokens ? double(s.correct_tokens) / s.tokens : 0.0},
            {"loss", s.tokens ? s.loss_sum / s.tokens : 0.0}};
  }
  std::string primary_metric() const override { return "accuracy"; }
  std::map<std::string, double> chance_levels() const override {
    const double values = static_cast<double>(map_.size(0));
    return {{"accuracy", 1.0 / values}, {"loss", std::log(values)}};
  }

 private:
  MemorizationOptions o_;
  torch::Tensor map_;
};

}  // namespace

TaskType in_context_recall_task_type() {
  return {"in_context_recall",
          "multi-query in-context recall, MAD defaults (Poli et al. 2024, MAD; mad-lab)",
          [](Section& s, const TaskContext&) {
            RecallOptions o;
            o.name = "in_context_recall";
            return read_recall(s, o);
          }};
}

TaskType noisy_recall_task_type() {
  return {"noisy_recall",
          "in-context recall with noise pairs, MAD defaults (Poli et al. 2024, MAD; mad-lab)",
          [](Section& s, const TaskContext&) {
            RecallOptions o;
            o.name = "noisy_recall";
            o.vocab_size = 32;
            o.noise_vocab_size = 16;
            o.frac_noise = 0.2;
            return read_recall(s, o);
          }};
}

TaskType memorization_task_type() {
  return {"memorization",
          "a fixed key-value map recalled from the weights, MAD defaults (Poli et al. 2024, MAD)",
          [](Section& s, const TaskContext&) -> std::shared_ptr<Task> {
            MemorizationOptions o;
            o.seq_len = s.get<int64_t>("seq_len", o.seq_len);
            o.vocab_size = s.get<int64_t>("vocab_size", o.vocab_size);
            s.check(o.vocab_size >= 4, "vocab_size", "must be >= 4 (a key, a value, insert)");
            s.check(o.seq_len >= 2 && o.seq_len % 2 == 0, "seq_len",
                    "must be even and >= 2 (key-insert pairs)");
            s.finish();
            return std::make_shared<MemorizationTask>(o);
          }};
}

}  // namespace hybridlab::tasks
