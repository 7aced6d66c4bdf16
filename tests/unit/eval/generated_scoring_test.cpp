// Generation-scored evaluation (`eval.scoring: generated`) against teacher forcing, on oracle
// models whose every answer is known: one predicts the reference next token everywhere, the other
// gets the first answer digit wrong, which teacher forcing forgives and generation does not.

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "hybridlab/error.h"
#include "hybridlab/evaluator.h"
#include "hybridlab/experiment.h"
#include "hybridlab/model.h"
#include "support/job_support.h"

using namespace hybridlab;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace generated_scoring_test {
namespace {

struct OracleCache : DecodeCache {
  torch::Tensor seq;  // [B,t] every token seen so far
};

// Predicts, at each position, the next token of the reference row sharing the longest prefix with
// the input (0 once the input has left every reference row). `wrong_first_digit`: at the first
// scored position of a row, the next decimal digit instead of the reference one.
class OracleModel : public LanguageModel {
 public:
  OracleModel(const Batch& ref, bool wrong_first_digit)
      : ref_(ref.tokens.contiguous()), wrong_(wrong_first_digit) {
    const auto t = ref.targets.accessor<int64_t, 2>();
    for (int64_t i = 0; i < t.size(0); ++i) {
      int64_t first = -1;
      for (int64_t j = 0; j < t.size(1) && first < 0; ++j) {
        if (t[i][j] != kIgnoreIndex) first = j;
      }
      first_.push_back(first);
    }
  }
  torch::Tensor forward(const torch::Tensor& tokens) override { return predict(tokens); }
  torch::Tensor forward(const torch::Tensor& tokens, DecodeCache& cache) override {
    auto& c = static_cast<OracleCache&>(cache);
    c.seq = c.seq.defined() ? torch::cat({c.seq, tokens}, 1) : tokens;
    c.length += tokens.size(1);
    return predict(c.seq).narrow(1, c.seq.size(1) - tokens.size(1), tokens.size(1));
  }
  torch::Tensor forward_packed(const torch::Tensor&, const torch::Tensor&) override {
    throw std::logic_error("OracleModel: no packed documents");
  }
  std::unique_ptr<DecodeCache> new_cache() const override {
    return std::make_unique<OracleCache>();
  }
  ModelSummary summary(int64_t) const override { return {}; }
  int64_t vocab_size() const override { return 256; }
  int64_t d_model() const override { return 1; }

 private:
  torch::Tensor predict(const torch::Tensor& seq) const {
    const int64_t B = seq.size(0), T = seq.size(1), L = ref_.size(1);
    const int64_t m = std::min(T, L);
    torch::Tensor logits = torch::zeros({B, T, 256});
    auto lg = logits.accessor<float, 3>();
    const auto ref = ref_.accessor<int64_t, 2>();
    for (int64_t b = 0; b < B; ++b) {
      const torch::Tensor lcp = ref_.narrow(1, 0, m)
                                    .eq(seq[b].narrow(0, 0, m).unsqueeze(0))
                                    .to(torch::kLong)
                                    .cumprod(1)
                                    .sum(1);  // [N] common prefix with each reference row
      const int64_t r = lcp.argmax().item<int64_t>();
      const int64_t n = lcp[r].item<int64_t>();
      for (int64_t t = 0; t < T; ++t) {
        int64_t next = t < n && t + 1 < L ? ref[r][t + 1] : 0;
        if (wrong_ && t == first_[r] && t < n) next = '0' + (next - '0' + 1) % 10;
        lg[b][t][next] = 10.0f;
      }
    }
    return logits;
  }

  torch::Tensor ref_;  // [N,L]
  bool wrong_;
  std::vector<int64_t> first_;  // first scored position of each reference row
};

Experiment byte_experiment(const std::string& task_yaml, const std::string& eval_yaml) {
  return read_experiment(
      Config::parse("model: {d_model: 16, vocab_size: 256, layers: GA, attention: {n_heads: 2},\n"
                    "        gated_deltanet: {n_heads: 2, expand_v: 1, chunk_size: 16}}\n"
                    "task: " +
                        task_yaml + "\nplugins: {paths: [" + HYBRIDLAB_TEST_PLUGIN_DIR +
                        "]}\nruntime: {threads: 1}\neval: " + eval_yaml + "\n",
                    "exp.yaml"));
}

// Scored positions of `set` and how many examples score any.
std::pair<int64_t, int64_t> scored_counts(const Batch& set) {
  const torch::Tensor scored = set.targets.ne(kIgnoreIndex);
  return {scored.sum().item<int64_t>(), scored.any(1).sum().item<int64_t>()};
}

}  // namespace

TEST_CASE("generated scoring: passkey, exact oracle and first-digit-wrong oracle",
          "[job][eval][generate]") {
  const Experiment e = byte_experiment("{name: passkey, seq_len: 160, intro: false}",
                                       "{lengths: [160], examples: 12, batch_size: 5}");
  REQUIRE(e.eval.scoring == EvalScoring::kTeacherForced);
  e.task->prepare({160});
  const Batch set = e.task->eval_set(160, 12, static_cast<uint64_t>(e.eval.seed));
  const auto [digits, examples] = scored_counts(set);
  REQUIRE(examples == 12);
  EvalOptions generated = e.eval;
  generated.scoring = EvalScoring::kGenerated;

  OracleModel exact(set, false);
  const LengthResult tf = evaluate_length(exact, *e.task, e.eval, 160, 12);
  CHECK(tf.scoring == "teacher_forced");
  CHECK(tf.metrics.at("accuracy") == 1.0);
  CHECK(tf.metrics.at("digit_accuracy") == 1.0);
  const LengthResult gen = evaluate_length(exact, *e.task, generated, 160, 12);
  CHECK(gen.scoring == "generated");
  CHECK(gen.metrics.at("accuracy") == 1.0);
  CHECK(gen.metrics.at("digit_accuracy") == 1.0);
  CHECK(gen.metrics.count("loss") == 0);  // no teacher-forced likelihood was computed

  // First digit wrong: teacher forcing still scores the other digits of each key right, so the
  // digit accuracy is (digits - examples) / digits; generation derails after the wrong digit.
  OracleModel wrong(set, true);
  const LengthResult tf_wrong = evaluate_length(wrong, *e.task, e.eval, 160, 12);
  CHECK(tf_wrong.metrics.at("accuracy") == 0.0);
  CHECK(tf_wrong.metrics.at("digit_accuracy") ==
        Approx(double(digits - examples) / double(digits)));
  CHECK(digits > examples);  // some keys have several digits: the two scorings must differ
  const LengthResult gen_wrong = evaluate_length(wrong, *e.task, generated, 160, 12);
  CHECK(gen_wrong.metrics.at("accuracy") == 0.0);
  CHECK(gen_wrong.metrics.at("digit_accuracy") == 0.0);
}

TEST_CASE("generated scoring: niah's 7-digit values, teacher forced 6/7 and generated 0",
          "[job][eval][generate]") {
  const Experiment e = byte_experiment("{name: niah, seq_len: 512, intro: false}",
                                       "{lengths: [512], examples: 6, scoring: generated}");
  REQUIRE(e.eval.scoring == EvalScoring::kGenerated);
  e.task->prepare({512});
  const Batch set = e.task->eval_set(512, 6, static_cast<uint64_t>(e.eval.seed));
  OracleModel wrong(set, true);
  EvalOptions tf = e.eval;
  tf.scoring = EvalScoring::kTeacherForced;
  CHECK(evaluate_length(wrong, *e.task, tf, 512, 6).metrics.at("digit_accuracy") ==
        Approx(6.0 / 7.0));
  const LengthResult gen = evaluate_length(wrong, *e.task, e.eval, 512, 6);
  CHECK(gen.metrics.at("accuracy") == 0.0);
  CHECK(gen.metrics.at("digit_accuracy") == 0.0);
  OracleModel exact(set, false);
  CHECK(evaluate_length(exact, *e.task, e.eval, 512, 6).metrics.at("accuracy") == 1.0);
}

TEST_CASE("eval.scoring: generated refused for tasks without one answer span, with file:line",
          "[job][eval][generate]") {
  const auto mqar = [](const std::string& eval_yaml) {
    return read_experiment(Config::parse(
        jobtest::tiny_experiment("{name: mqar, seq_len: 32, vocab_size: 64, num_kv_pairs: 4}",
                                 "eval: " + eval_yaml + "\n"),
        "exp.yaml"));
  };
  CHECK_THROWS_WITH(mqar("{scoring: generated}"),
                    Catch::Contains("exp.yaml:6") && Catch::Contains("eval.scoring") &&
                        Catch::Contains("task mqar") && Catch::Contains("separate positions"));
  CHECK_THROWS_WITH(mqar("{scoring: greedy}"), Catch::Contains("exp.yaml:6") &&
                                                   Catch::Contains("teacher_forced") &&
                                                   Catch::Contains("'greedy'"));
  // As an eval variant: the variant's config is read like any other and refused the same way.
  CHECK_THROWS_WITH(mqar("{variants: {gen: {eval.scoring: generated}}}"),
                    Catch::Contains("eval variant 'gen'") && Catch::Contains("task mqar"));
  CHECK(mqar("{}").eval.scoring == EvalScoring::kTeacherForced);
  // An eval-safe key: passkey evaluates both ways from one trained model.
  const Experiment p = byte_experiment("{name: passkey, seq_len: 160, intro: false}",
                                       "{variants: {generated: {eval.scoring: generated}}}");
  REQUIRE(p.eval.variants.size() == 1);
  CHECK(eval_variant_text(p.eval.variants[0]) == "eval.scoring=generated");
  CHECK(eval_safe_key(Config{}, "eval.scoring"));
}

}  // namespace generated_scoring_test
