// fuzzy_recall: MAD's fuzzy in-context recall (Poli et al. 2024, arXiv 2403.17844; generator as
// athms/mad-lab@0f49a45 mad/data/instances.py, generate_fuzzy_in_context_recall_instance, with
// MAD's multi-query setting; reference/order_and_state.md §5).
//
// Keys and values are motifs: tuples of 1 to k_motif_size (v_motif_size) distinct tokens, keys
// from the first half of the non-pad vocabulary, values from the second; pad = vocab_size - 1.
// A sequence is key-value pairs, a key keeping its value within it; one probe pair is placed at a
// random index and repeated at the end; the whole is left-padded to seq_len + 1 tokens and
// shifted by one. Training keys take random motif sizes and every next token is a target;
// evaluation keys are all of k_motif_size tokens and the targets are the values of keys shown
// before (the final probe's included). Motifs of several sizes run together without separators:
// which tokens form a key is itself to be inferred, the "fuzzy" part.

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "tasks/registry.h"
#include "tasks/synthetic.h"

namespace hybridlab::tasks {
namespace {

struct FuzzyOptions {
  int64_t seq_len = 128;
  int64_t vocab_size = 16;
  int64_t k_motif_size = 3;
  int64_t v_motif_size = 3;
};

using Motif = std::vector<int64_t>;

class FuzzyRecallTask : public SyntheticTask {
 public:
  explicit FuzzyRecallTask(FuzzyOptions o) : o_(o) {}
  std::string name() const override { return "fuzzy_recall"; }
  int64_t vocab_size() const override { return o_.vocab_size; }
  int64_t seq_len() const override { return o_.seq_len; }
  int64_t min_length() const { return 2 * (o_.k_motif_size + o_.v_motif_size) + 1; }
  std::string length_problem(int64_t L) const override {
    return short_length_problem(L, min_length(), "two key-value pairs of the largest motifs");
  }

  Batch generate(at::Generator& gen, int64_t n, int64_t L, Split split) override {
    const int64_t per_example = 4 * L + 64;
    const torch::Tensor block = BlockDraws::block(gen, n, per_example);
    torch::Tensor seq = torch::empty({n, L}, torch::kLong);
    torch::Tensor targets = torch::empty({n, L}, torch::kLong);
    auto sa = seq.accessor<int64_t, 2>(), ta = targets.accessor<int64_t, 2>();
    for (int64_t i = 0; i < n; ++i) {
      BlockDraws d(block.data_ptr<int64_t>() + i * per_example, per_example, gen);
      const auto [in, scored] = example(d, L, split == Split::kTrain);
      // MAD's shift: position t reads token t and predicts token t + 1.
      for (int64_t t = 0; t < L; ++t) {
        const size_t next = static_cast<size_t>(t + 1);
        sa[i][t] = in[static_cast<size_t>(t)];
        ta[i][t] = split == Split::kTrain ? in[next] : scored[next];
      }
    }
    return {seq, targets};
  }

  std::map<std::string, double> metrics(const ScoreSums& s) const override {
    return token_metrics(s);
  }
  std::string primary_metric() const override { return "accuracy"; }
  std::map<std::string, double> chance_levels() const override {
    const double values = static_cast<double>(values_count());
    return {{"accuracy", 1.0 / values}, {"sequence_accuracy", 0.0}, {"loss", std::log(values)}};
  }

 private:
  int64_t keys_count() const { return (o_.vocab_size - 1) / 2; }
  int64_t values_count() const { return (o_.vocab_size - 1) - keys_count(); }

  // `size` distinct tokens of [from, from + count) in random order.
  static Motif motif(BlockDraws& d, int64_t from, int64_t count, int64_t size) {
    std::vector<int64_t> pool(static_cast<size_t>(count));
    for (int64_t j = 0; j < count; ++j) pool[static_cast<size_t>(j)] = from + j;
    for (int64_t j = 0; j < size; ++j)
      std::swap(pool[static_cast<size_t>(j)], pool[static_cast<size_t>(d.next(j, count - 1))]);
    return Motif(pool.begin(), pool.begin() + size);
  }

  // One row of seq_len + 1 tokens and, per token, the target it is scored against when it is
  // predicted in evaluation (kIgnoreIndex where none).
  std::pair<Motif, Motif> example(BlockDraws& d, int64_t L, bool training) const {
    const int64_t K = o_.k_motif_size, V = o_.v_motif_size;
    const auto key_size = [&] { return training ? d.next(1, K) : K; };
    const auto new_key = [&](int64_t size) { return motif(d, 0, keys_count(), size); };
    const auto new_value = [&] { return motif(d, keys_count(), values_count(), d.next(1, V)); };
    const Motif k_probe = new_key(key_size()), v_probe = new_value();
    const int64_t probe_size = static_cast<int64_t>(k_probe.size() + v_probe.size());
    const int64_t probe_at = d.next(0, L - 2 * probe_size - 1);
    Motif in, scored;
    std::map<Motif, Motif> value_of;
    bool probe_added = false;
    const auto put = [&](const Motif& k, const Motif& v, bool score) {
      in.insert(in.end(), k.begin(), k.end());
      scored.insert(scored.end(), k.size(), kIgnoreIndex);
      in.insert(in.end(), v.begin(), v.end());
      if (score)
        scored.insert(scored.end(), v.begin(), v.end());
      else
        scored.insert(scored.end(), v.size(), kIgnoreIndex);
    };
    while (static_cast<int64_t>(in.size()) < L - probe_size - (K + V)) {
      if (static_cast<int64_t>(in.size()) >= probe_at && !probe_added) {
        put(k_probe, v_probe, false);
        value_of[k_probe] = v_probe;
        probe_added = true;
        continue;
      }
      const Motif k = new_key(key_size());
      const bool shown = value_of.count(k) > 0;
      Motif v;
      if (k == k_probe) {
        v = v_probe;
        probe_added = true;
      } else {
        v = shown ? value_of[k] : new_value();
      }
      put(k, v, shown);
      value_of[k] = v;
    }
    put(k_probe, v_probe, true);
    // Left-padded to L + 1 tokens (the shift takes one).
    const size_t pad = static_cast<size_t>(L + 1) - in.size();
    in.insert(in.begin(), pad, o_.vocab_size - 1);
    scored.insert(scored.begin(), pad, kIgnoreIndex);
    return {in, scored};
  }

  FuzzyOptions o_;
};

}  // namespace

TaskType fuzzy_recall_task_type() {
  return {"fuzzy_recall",
          "fuzzy in-context recall: keys and values of several tokens, MAD defaults (Poli et al. "
          "2024, MAD; mad-lab)",
          [](Section& s, const TaskContext&) -> std::shared_ptr<Task> {
            FuzzyOptions o;
            o.seq_len = s.get<int64_t>("seq_len", o.seq_len);
            o.vocab_size = s.get<int64_t>("vocab_size", o.vocab_size);
            o.k_motif_size = s.get<int64_t>("k_motif_size", o.k_motif_size);
            o.v_motif_size = s.get<int64_t>("v_motif_size", o.v_motif_size);
            s.check(o.k_motif_size >= 1, "k_motif_size", "must be >= 1");
            s.check(o.v_motif_size >= 1, "v_motif_size", "must be >= 1");
            const int64_t keys = (o.vocab_size - 1) / 2, values = o.vocab_size - 1 - keys;
            s.check(keys >= o.k_motif_size && values >= o.v_motif_size, "vocab_size",
                    fmt::format("must hold a pad token and keys of {} and values of {} distinct "
                                "tokens in its two halves (at least {})",
                                o.k_motif_size, o.v_motif_size,
                                2 * std::max(o.k_motif_size, o.v_motif_size) + 1));
            auto task = std::make_shared<FuzzyRecallTask>(o);
            s.check(o.seq_len >= task->min_length(), "seq_len",
                    fmt::format("must be >= {} (two key-value pairs of the largest motifs)",
                                task->min_length()));
            s.finish();
            return task;
          }};
}

}  // namespace hybridlab::tasks
