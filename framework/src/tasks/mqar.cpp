// mqar: multi-query associative recall (Arora et al. 2023, "Zoology", arXiv 2312.04927).
// Matches HazyResearch/zoology@d88d6f5 zoology/data/multiquery_ar.py (num_passes = 1):
// keys from [1, V/2), values from [V/2, V), distinct within an example; the first 2k tokens are
// `key value ...`; each key is queried once at position 2k + 2g, the gap g drawn without
// replacement with probability proportional to (g+1)^(a-1); the target at the query position is
// its value, and only those k positions are scored. The value never appears after its query in
// the input (Zoology puts it in the labels only): the slot after a query is filler like every
// other non-query position. Filler is 0 or uniformly random tokens.

#include <fmt/format.h>

#include <cmath>

#include "tasks/registry.h"
#include "tasks/synthetic.h"

namespace hybridlab::tasks {
namespace {

struct MqarOptions {
  int64_t seq_len = 256;
  int64_t vocab_size = 8192;
  int64_t num_kv_pairs = 16;
  double power_a = 0.01;
  bool random_non_queries = true;
};

class MqarTask : public SyntheticTask {
 public:
  explicit MqarTask(MqarOptions o) : o_(o) {}
  std::string name() const override { return "mqar"; }
  int64_t vocab_size() const override { return o_.vocab_size; }
  int64_t seq_len() const override { return o_.seq_len; }
  std::string length_problem(int64_t L) const override {
    return short_length_problem(
        L, 4 * o_.num_kv_pairs,
        fmt::format("{} key-value pairs need 2k tokens of pairs and 2k of queries",
                    o_.num_kv_pairs),
        true);
  }

  Batch generate(at::Generator& gen, int64_t n, int64_t L, Split) override {
    using torch::indexing::Slice;
    const int64_t k = o_.num_kv_pairs, V = o_.vocab_size, half = V / 2;
    // k distinct keys in [1, half) and k distinct values in [half, V) per row.
    const torch::Tensor keys =
        torch::rand({n, half - 1}, gen).argsort(int64_t{1}).index({Slice(), Slice(0, k)}) + 1;
    const torch::Tensor values =
        torch::rand({n, V - half}, gen).argsort(int64_t{1}).index({Slice(), Slice(0, k)}) + half;
    const torch::Tensor kvs = torch::stack({keys, values}, 2).reshape({n, 2 * k});
    const int64_t G = (L - 2 * k) / 2;
    const torch::Tensor g = torch::arange(G, torch::kDouble);
    const torch::Tensor p = torch::pow(g + 1, o_.power_a - 1).to(torch::kFloat);
    const torch::Tensor gaps = torch::multinomial(p.unsqueeze(0).expand({n, G}), k, false, gen);
    const torch::Tensor qpos = 2 * k + 2 * gaps;  // [n,k]
    torch::Tensor seq = torch::zeros({n, L}, torch::kLong);
    seq.index_put_({Slice(), Slice(0, 2 * k)}, kvs);
    seq.scatter_(1, qpos, keys);
    // No value after the query: echoed answers would let a model that cannot bind keys to values
    // still rule out the values already asked for (expected accuracy (1/k + ... + 1/1)/k, 0.52
    // for k = 4) instead of guessing among all k (1/k).
    if (o_.random_non_queries) {
      const torch::Tensor noise = torch::randint(0, V, {n, L}, gen, torch::kLong);
      seq = torch::where(seq == 0, noise, seq);
    }
    torch::Tensor targets = torch::full({n, L}, kIgnoreIndex, torch::kLong);
    targets.scatter_(1, qpos, values);
    return {seq, targets};
  }

  std::map<std::string, double> metrics(const ScoreSums& s) const override {
    // Zoology's compute_metrics: mean over examples of the per-example accuracy.
    return {{"accuracy", s.examples ? s.example_accuracy_sum / s.examples : 0.0},
            {"loss", s.tokens ? s.loss_sum / s.tokens : 0.0}};
  }
  std::string primary_metric() const override { return "accuracy"; }
  std::map<std::string, double> chance_levels() const override {
    // A query's value is one of the V/2 value tokens [V/2, V).
    const double values = static_cast<double>(o_.vocab_size / 2);
    return {{"accuracy", 1.0 / values}, {"loss", std::log(values)}};
  }

 private:
  MqarOptions o_;
};

}  // namespace

TaskType mqar_task_type() {
  return {"mqar", "multi-query associative recall (Arora et al. 2023, Zoology)",
          [](Section& s, const TaskContext&) -> std::shared_ptr<Task> {
            MqarOptions o;
            o.seq_len = s.get<int64_t>("seq_len", o.seq_len);
            o.vocab_size = s.get<int64_t>("vocab_size", o.vocab_size);
            o.num_kv_pairs = s.get<int64_t>("num_kv_pairs", o.num_kv_pairs);
            o.power_a = s.get<double>("power_a", o.power_a);
            o.random_non_queries = s.get<bool>("random_non_queries", o.random_non_queries);
            s.check(o.num_kv_pairs >= 1, "num_kv_pairs", "must be >= 1");
            s.check(o.vocab_size / 2 - 1 >= o.num_kv_pairs, "vocab_size",
                    fmt::format("must leave num_kv_pairs ({}) distinct keys in [1, vocab_size/2)",
                                o.num_kv_pairs));
            s.check(o.seq_len % 2 == 0, "seq_len", "must be even (key/value pairs)");
            s.check(o.seq_len >= 4 * o.num_kv_pairs, "seq_len",
                    fmt::format("must be >= 4 * num_kv_pairs = {}", 4 * o.num_kv_pairs));
            s.check(o.power_a > 0, "power_a", "must be > 0 (0.01 in Zoology; 1 = uniform gaps)");
            s.finish();
            return std::make_shared<MqarTask>(o);
          }};
}

}  // namespace hybridlab::tasks
