// Sliding-window evaluation (`eval.stride`): each window scores only its last `stride` tokens.

#include <catch2/catch.hpp>

#include <cmath>

#include "hybridlab/error.h"
#include "hybridlab/evaluator.h"
#include "hybridlab/experiment.h"
#include "hybridlab/model.h"
#include "hybridlab/plugin_host.h"
#include "support/job_support.h"

using namespace hybridlab;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace sliding_eval_test {
namespace {

Experiment text_experiment(const std::string& eval_yaml) {
  const std::string corpus = std::string(HYBRIDLAB_SOURCE_DIR) + "/tests/fixtures/text_corpus";
  return read_experiment(
      Config::parse("model: {d_model: 16, vocab_size: 256, layers: GA, attention: {n_heads: 2},\n"
                    "        gated_deltanet: {n_heads: 2, expand_v: 1, chunk_size: 16}}\n"
                    "task: {name: text, seq_len: 32, path: '" +
                    corpus + "'}\nplugins: {paths: [" + HYBRIDLAB_TEST_PLUGIN_DIR +
                    "]}\nruntime: {threads: 1}\neval: " + eval_yaml + "\n"));
}

}  // namespace

TEST_CASE("sliding-window eval: the loss of the last `stride` tokens of each window",
          "[job][eval]") {
  const Experiment e = text_experiment("{lengths: [64], examples: 6, batch_size: 4, stride: 5}");
  REQUIRE(e.eval.stride == 5);
  auto host = make_plugin_host(e.config);
  torch::manual_seed(3);
  auto model = build_model(*e.model, *host, ModelBuildContext{32, 64});
  e.task->prepare({64});
  const LengthResult sliding = evaluate_length(*model, *e.task, e.eval, 64, 6);

  // Independently: one forward of the whole set, cross-entropy of positions 59..63 only.
  const Batch set = e.task->eval_set(64, 6, static_cast<uint64_t>(e.eval.seed));
  REQUIRE(set.tokens.size(0) >= 2);
  torch::NoGradGuard no_grad;
  model->eval();
  const torch::Tensor logp = torch::log_softmax(model->forward(set.tokens).to(torch::kDouble), -1);
  const torch::Tensor nll =
      -logp.gather(-1, set.targets.clamp_min(0).unsqueeze(-1)).squeeze(-1);  // [B,64]
  const double expected = nll.slice(1, 59, 64).mean().item<double>();
  CHECK(sliding.metrics.at("loss") == Approx(expected).epsilon(1e-5));
  CHECK(sliding.metrics.at("bits_per_byte") == Approx(expected / std::log(2.0)).epsilon(1e-5));
  const double all = nll.mean().item<double>();
  CHECK(std::abs(all - expected) > 1e-4);  // the two modes differ on this model

  // A stride as long as the window is non-overlapping evaluation, bit for bit.
  EvalOptions whole = e.eval;
  whole.stride = 64;
  EvalOptions none = e.eval;
  none.stride = 0;
  CHECK(evaluate_length(*model, *e.task, whole, 64, 6).metrics.at("loss") ==
        evaluate_length(*model, *e.task, none, 64, 6).metrics.at("loss"));
  CHECK(evaluate_length(*model, *e.task, none, 64, 6).metrics.at("loss") ==
        Approx(all).epsilon(1e-5));
}

TEST_CASE("sliding-window eval: refused for tasks that score their own positions, and < 0",
          "[job][eval]") {
  const auto mqar = [](const std::string& eval_yaml) {
    return read_experiment(Config::parse(
        jobtest::tiny_experiment("{name: mqar, seq_len: 32, vocab_size: 64, num_kv_pairs: 4}",
                                 "eval: " + eval_yaml + "\n"),
        "exp.yaml"));
  };
  CHECK_THROWS_WITH(mqar("{stride: 8}"), Catch::Contains("exp.yaml:6") &&
                                             Catch::Contains("eval.stride") &&
                                             Catch::Contains("task mqar"));
  CHECK_THROWS_WITH(text_experiment("{stride: -1}"), Catch::Contains("must be >= 0"));
}

TEST_CASE("eval batches: rows shrink with the length and with the vocabulary's logits",
          "[job][eval]") {
  hybridlab::EvalOptions e;  // batch_size 16, max_batch_tokens 32768
  CHECK(e.batch_rows(512, 256) == 16);
  CHECK(e.batch_rows(4096, 256) == 8);  // 32768 tokens
  // GPT-2's 50,257 outputs: 256 MiB of fp32 logits are 67,108,864 / 50,257 = 1,335 tokens.
  CHECK(e.batch_rows(64, 50257) == 16);
  CHECK(e.batch_rows(256, 50257) == 5);
  CHECK(e.batch_rows(1024, 50257) == 1);
  CHECK(e.batch_rows(4096, 50257) == 1);  // never fewer than one row
  e.batch_size = 4;
  CHECK(e.batch_rows(64, 50257) == 4);
}

}  // namespace sliding_eval_test
