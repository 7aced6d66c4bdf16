// ruler_vt: RULER's variable tracking (Hsieh et al. 2024, arXiv 2404.06654; NVIDIA/RULER
// scripts/data/synthetic/variable_tracking.py), byte level. A chain "VAR X0 = v" then
// "VAR X{j+1} = VAR Xj" for `num_hops` hops, variable names of 5 random capitals and v a 5-digit
// number in [10000, 99999]; `num_chains` - 1 further chains with their own values are
// distractors. Every statement goes, each chain in its own order, at a sorted uniformly random
// depth of the repeated grass filler (RULER's noise haystack). The query asks for every variable
// assigned the first chain's value; the answer lists the chain's names in order, and its bytes
// are the scored span. RULER prepends a one-shot example and scores generated text with
// string_match_all; a model trained from scratch needs neither: `accuracy` is the whole answer
// right, `byte_accuracy` its bytes (reference/order_and_state.md §4, byte-level adaptation).

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "tasks/registry.h"
#include "tasks/synthetic.h"

namespace hybridlab::tasks {
namespace {

constexpr int64_t kNameLetters = 5;

struct VtOptions {
  int64_t seq_len = 512;
  int64_t num_chains = 1;
  int64_t num_hops = 4;
};

class RulerVtTask : public SyntheticTask {
 public:
  explicit RulerVtTask(VtOptions o) : o_(o) {}
  std::string name() const override { return "ruler_vt"; }
  int64_t vocab_size() const override { return 256; }
  int64_t seq_len() const override { return o_.seq_len; }
  bool byte_level() const override { return true; }
  bool answer_span() const override { return true; }

  int64_t names_per_chain() const { return o_.num_hops + 1; }
  // "A B C D E": the names of one chain, space separated.
  int64_t answer_bytes() const { return names_per_chain() * (kNameLetters + 1) - 1; }
  static std::string first_statement(const std::string& name, int64_t value) {
    return fmt::format("VAR {} = {}. ", name, value);
  }
  static std::string hop_statement(const std::string& name, const std::string& from) {
    return fmt::format("VAR {} = VAR {}. ", name, from);
  }
  std::string question(int64_t value) const {
    return fmt::format(
        "\nQuestion: Find all variables that are assigned the value {0} in the text above. "
        "Answer: According to the chain(s) of variables assignment in the text above, {1} "
        "variables are assigned the value {0}, they are: ",
        value, names_per_chain());
  }
  // Every byte besides the filler, at its longest.
  int64_t fixed_bytes() const {
    const std::string name(kNameLetters, 'X');
    const int64_t chain = static_cast<int64_t>(first_statement(name, 99999).size()) +
                          o_.num_hops * static_cast<int64_t>(hop_statement(name, name).size());
    return o_.num_chains * chain + static_cast<int64_t>(question(99999).size()) + answer_bytes();
  }
  std::string length_problem(int64_t L) const override {
    return short_length_problem(L, fixed_bytes(),
                                fmt::format("{} chain(s) of {} hops and the question take {} bytes",
                                            o_.num_chains, o_.num_hops, fixed_bytes()));
  }

  Batch generate(at::Generator& gen, int64_t n, int64_t L, Split) override {
    std::string filler;
    while (static_cast<int64_t>(filler.size()) < L) filler += kHaystackFiller;
    std::vector<std::string> texts(n);
    std::vector<int64_t> begin(n, L - answer_bytes());
    // Letters, values, the interleaving and the depths, with room for a few redraws.
    const int64_t statements = o_.num_chains * names_per_chain();
    const int64_t per_example = statements * (kNameLetters + 2) + o_.num_chains + 16;
    const torch::Tensor block = BlockDraws::block(gen, n, per_example);
    for (int64_t i = 0; i < n; ++i) {
      BlockDraws d(block.data_ptr<int64_t>() + i * per_example, per_example, gen);
      texts[i] = example(d, L, filler);
    }
    return byte_examples(texts, begin);
  }

  std::map<std::string, double> metrics(const ScoreSums& s) const override {
    return answer_metrics(s);
  }
  std::string primary_metric() const override { return "accuracy"; }
  // A uniform guess of each name's letter: the spaces between names are part of the answer but
  // follow from the count the question states, so a letter is the unit guessed.
  std::map<std::string, double> chance_levels() const override {
    return {{"accuracy", 0.0}, {"byte_accuracy", 1.0 / 26}, {"loss", std::log(26.0)}};
  }

 private:
  std::string example(BlockDraws& d, int64_t L, const std::string& filler) const {
    const int64_t chains = o_.num_chains, per = names_per_chain();
    const std::vector<std::string> names =
        distinct_words(d, chains * per, kNameLetters, /*capitals=*/true);
    std::vector<int64_t> values;
    while (static_cast<int64_t>(values.size()) < chains) {
      const int64_t v = d.next(10000, 99998);
      if (std::find(values.begin(), values.end(), v) == values.end()) values.push_back(v);
    }
    // Each chain's statements in order; the chains interleaved at random (a shuffled multiset
    // of chain ids, one entry per statement).
    std::vector<int64_t> order;
    for (int64_t c = 0; c < chains; ++c) order.insert(order.end(), per, c);
    for (int64_t k = static_cast<int64_t>(order.size()) - 1; k > 0; --k)
      std::swap(order[k], order[d.next(0, k)]);
    std::vector<int64_t> next(chains, 0);
    std::vector<std::string> statements;
    int64_t used = 0;
    for (int64_t c : order) {
      const int64_t j = next[c]++;
      const std::string& name = names[c * per + j];
      statements.push_back(j == 0 ? first_statement(name, values[c])
                                  : hop_statement(name, names[c * per + j - 1]));
      used += static_cast<int64_t>(statements.back().size());
    }
    std::string answer;
    for (int64_t j = 0; j < per; ++j) answer += (j ? " " : "") + names[j];
    const std::string tail = question(values[0]) + answer;
    const int64_t budget = L - used - static_cast<int64_t>(tail.size());
    std::vector<int64_t> cut(statements.size());
    for (int64_t& c : cut) c = d.next(0, budget);
    std::sort(cut.begin(), cut.end());
    std::string t;
    int64_t at = 0;
    for (size_t k = 0; k < statements.size(); ++k) {
      t += filler.substr(static_cast<size_t>(at), static_cast<size_t>(cut[k] - at)) + statements[k];
      at = cut[k];
    }
    return t + filler.substr(static_cast<size_t>(at), static_cast<size_t>(budget - at)) + tail;
  }

  VtOptions o_;
};

}  // namespace

TaskType ruler_vt_task_type() {
  return {"ruler_vt",
          "RULER variable tracking: chains of VAR assignments in filler (Hsieh et al. 2024)",
          [](Section& s, const TaskContext&) -> std::shared_ptr<Task> {
            VtOptions o;
            o.seq_len = s.get<int64_t>("seq_len", o.seq_len);
            o.num_chains = s.get<int64_t>("num_chains", o.num_chains);
            o.num_hops = s.get<int64_t>("num_hops", o.num_hops);
            // 26^5 names and 89,999 values: far more than any chain count asks.
            s.check(o.num_chains >= 1 && o.num_chains <= 64, "num_chains", "must be in [1, 64]");
            s.check(o.num_hops >= 1 && o.num_hops <= 64, "num_hops", "must be in [1, 64]");
            auto task = std::make_shared<RulerVtTask>(o);
            s.check(o.seq_len >= task->fixed_bytes(), "seq_len",
                    fmt::format("must be >= {} bytes ({} chain(s) of {} hops and the question)",
                                task->fixed_bytes(), o.num_chains, o.num_hops));
            s.finish();
            return task;
          }};
}

}  // namespace hybridlab::tasks
