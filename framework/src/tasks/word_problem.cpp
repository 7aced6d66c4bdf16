// word_problem: the word problem of a finite group, i.e. state tracking (Merrill, Petty &
// Sabharwal 2024, "The Illusion of State in State-Space Models", arXiv 2404.08819, §6;
// jopetty/word-problem@8f910f9; Grazzi et al. 2025, arXiv 2411.12537, §5.2 and App. E;
// reference/order_and_state.md §2).
//
// An example is `BOS x_1 ... x_n` with the x_t uniform over the group's elements; the label at
// x_t is the running product "x_1, then x_2, ..., then x_t" (for permutations, x_t ∘ ... ∘ x_1).
// `supervision: every` scores every position (Merrill's token tagging, the default);
// `supervision: final` scores only the last element's position (Grazzi's parity setting), and
// trains on words of every length in [2, seq_len - 1], padded after the word, as Grazzi's
// training lengths 3-40 do; evaluation words fill the eval length.
//
// Token ids: elements 0 .. |G|-1 (0 is the identity; permutations in lexicographic order of their
// one-line notation), then BOS = |G| and PAD = |G| + 1. Labels are element ids.
// Metrics: `final_accuracy`, the accuracy of the state after the whole word (at an eval length
// past training, the question of length generalisation; Grazzi's parity metric), `accuracy` over
// every scored position, and `sequence_accuracy`, the fraction of words whose every scored
// position is right (Merrill's full-sequence accuracy).

#include <fmt/format.h>

#include <cmath>

#include "tasks/finite_group.h"
#include "tasks/registry.h"
#include "tasks/synthetic.h"

namespace hybridlab::tasks {
namespace {

struct WordProblemOptions {
  int64_t seq_len = 64;      ///< tokens: BOS and up to seq_len - 1 elements
  std::string group = "S3";  ///< make_group's names
  bool final_only = false;   ///< supervision: final
};

class WordProblemTask : public SyntheticTask {
 public:
  explicit WordProblemTask(WordProblemOptions o) : o_(std::move(o)), g_(make_group(o_.group)) {}
  std::string name() const override { return "word_problem"; }
  int64_t vocab_size() const override { return g_.order + 2; }
  int64_t seq_len() const override { return o_.seq_len; }
  bool position_accuracy_curve() const override { return true; }
  std::string length_problem(int64_t L) const override {
    return short_length_problem(L, 3, "BOS and a word of at least two elements");
  }

  Batch generate(at::Generator& gen, int64_t n, int64_t L, Split split) override {
    const int64_t G = g_.order, bos = G, pad = G + 1;
    torch::Tensor seq = torch::randint(0, G, {n, L}, gen, torch::kLong);
    seq.select(1, 0).fill_(bos);
    // Word lengths: the whole row, except final-only training rows (uniform in [2, L-1]).
    torch::Tensor len = torch::full({n}, L - 1, torch::kLong);
    if (o_.final_only && split == Split::kTrain && L > 3)
      len = torch::randint(2, L, {n}, gen, torch::kLong);
    torch::Tensor targets = torch::full({n, L}, kIgnoreIndex, torch::kLong);
    int64_t* sp = seq.data_ptr<int64_t>();
    int64_t* tp = targets.data_ptr<int64_t>();
    const int64_t* lp = len.data_ptr<int64_t>();
    for (int64_t b = 0; b < n; ++b) {
      int32_t state = 0;
      const int64_t word = lp[b];
      for (int64_t t = 1; t < L; ++t) {
        int64_t& x = sp[b * L + t];
        if (t > word) {
          x = pad;
          continue;
        }
        state = g_.then(state, static_cast<int32_t>(x));
        if (!o_.final_only || t == word) tp[b * L + t] = state;
      }
    }
    return {seq, targets};
  }

  std::map<std::string, double> metrics(const ScoreSums& s) const override {
    // The last position of the eval words (every row fills the length) holds the whole product.
    double final_acc = 0;
    for (size_t t = s.position_count.size(); t-- > 0;) {
      if (s.position_count[t] > 0) {
        final_acc = double(s.position_correct[t]) / double(s.position_count[t]);
        break;
      }
    }
    return {{"final_accuracy", final_acc},
            {"accuracy", s.tokens ? double(s.correct_tokens) / s.tokens : 0.0},
            {"sequence_accuracy", s.examples ? double(s.correct_examples) / s.examples : 0.0},
            {"loss", s.tokens ? s.loss_sum / s.tokens : 0.0}};
  }
  std::string primary_metric() const override { return "final_accuracy"; }
  std::map<std::string, double> chance_levels() const override {
    // The running product of uniform elements is uniform over the group.
    const double G = static_cast<double>(g_.order);
    return {{"final_accuracy", 1.0 / G}, {"accuracy", 1.0 / G}, {"loss", std::log(G)}};
  }

 private:
  WordProblemOptions o_;
  FiniteGroup g_;
};

}  // namespace

TaskType word_problem_task_type() {
  return {"word_problem",
          "state tracking: running products of group elements (Merrill et al. 2024; Grazzi et al. "
          "2025)",
          [](Section& s, const TaskContext&) -> std::shared_ptr<Task> {
            WordProblemOptions o;
            o.seq_len = s.get<int64_t>("seq_len", o.seq_len);
            o.group = s.get<std::string>("group", o.group);
            const std::string sup = s.get<std::string>("supervision", "every");
            s.check(sup == "every" || sup == "final", "supervision",
                    fmt::format("'{}' is not a supervision: every (the running product at every "
                                "position) or final (only after the whole word)",
                                sup));
            o.final_only = sup == "final";
            s.check(make_group(o.group).order > 0, "group",
                    fmt::format("'{}' is not a group: {}", o.group, group_names_text()));
            s.check(o.seq_len >= 3, "seq_len", "must be >= 3 (BOS and a word of two elements)");
            s.finish();
            return std::make_shared<WordProblemTask>(o);
          }};
}

}  // namespace hybridlab::tasks
