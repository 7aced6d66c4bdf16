// Evaluation variants on run folders: the trained weights evaluated with settings changed, beside
// the run's own results and never in place of them.

#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <string>

#include "hybridlab/run.h"
#include "run/preflight.h"
#include "runs_support.h"

using namespace hybridlab;
namespace fs = std::filesystem;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace variant_eval_test {
namespace {

// A tiny RoPE hybrid trained at 32 and evaluated at 32 and 64; `variants` is the flow map of
// eval.variants ("" for none).
std::string yaml(const std::string& variants = "") {
  return std::string(
             "model: {d_model: 16, vocab_size: 64, layers: GA,\n"
             "        attention: {n_heads: 2, position: {scheme: rope}},\n"
             "        gated_deltanet: {n_heads: 2, expand_v: 1, chunk_size: 16}}\n"
             "task: {name: mqar, seq_len: 32, vocab_size: 64, num_kv_pairs: 4}\n"
             "train: {steps: 6, batch_size: 4, lr: 0.01, warmup_steps: 1, seed: 3}\n"
             "runtime: {threads: 1}\n"
             "plugins: {paths: ['" HYBRIDLAB_TEST_PLUGIN_DIR
             "']}\n"
             "eval: {lengths: [32, 64], examples: 8") +
         (variants.empty() ? "" : ", variants: " + variants) + "}\n";
}

ExecuteOptions quiet() {
  ExecuteOptions o;
  o.quiet = true;
  return o;
}

const EvalVariantResult& variant(const RunResults& r, const std::string& name) {
  for (const auto& v : r.variants) {
    if (v.name == name) return v;
  }
  FAIL("no eval variant " << name);
  throw;
}

}  // namespace

TEST_CASE(
    "eval variants: repeating the trained setting is bit for bit, dynamic NTK changes only "
    "lengths past the training length",
    "[runs][eval_variants]") {
  runstest::TempDir tmp;
  const RunFolder f = runstest::prepare_main(
      tmp.path, yaml("{same: {model.attention.position.rope_theta: 10000}, "
                     "dyn: {model.attention.position.rope_scaling: {type: dynamic, factor: 4}}, "
                     "lin: {model.attention.position.rope_scaling: {type: linear, factor: 4}}}"));
  execute_run_folder(f, quiet());
  REQUIRE(f.status().state == RunState::kFinished);
  const RunResults r = *f.results();
  REQUIRE(r.eval.size() == 2u);
  REQUIRE(r.variants.size() == 3u);
  const auto& same = variant(r, "same");
  CHECK(same.set == "model.attention.position.rope_theta=10000");
  for (size_t i = 0; i < 2; ++i) {
    CHECK(same.eval[i].length == r.eval[i].length);
    CHECK(same.eval[i].metrics == r.eval[i].metrics);  // exact
  }
  // Dynamic NTK rescales only once the sequence is longer than the original length (32).
  const auto& dyn = variant(r, "dyn");
  CHECK(dyn.eval[0].metrics == r.eval[0].metrics);
  CHECK(dyn.eval[1].metrics.at("loss") != r.eval[1].metrics.at("loss"));
  // Linear interpolation changes every length, the training length included.
  const auto& lin = variant(r, "lin");
  CHECK(lin.eval[0].metrics.at("loss") != r.eval[0].metrics.at("loss"));
}

TEST_CASE(
    "eval variants: task settings and lengths change what is scored, never the model (its "
    "training length stays)",
    "[runs][eval_variants]") {
  runstest::TempDir tmp;
  // Dynamic NTK rescales past the training length (32): a variant whose task.seq_len (64) were
  // taken for the training length would score 64 tokens without the rescaling.
  std::string y = yaml(
      "{long: {task.seq_len: 64, eval.lengths: [64]}, "
      "k8: {task.num_kv_pairs: 8, task.seq_len: 64, eval.lengths: [64]}}");
  y.replace(y.find("position: {scheme: rope}"), 24,
            "position: {scheme: rope, rope_scaling: {type: dynamic, factor: 4}}");
  const RunFolder f = runstest::prepare_main(tmp.path, y);
  execute_run_folder(f, quiet());
  const RunResults r = *f.results();
  REQUIRE(r.train_length == 32);
  const auto& lng = variant(r, "long");
  REQUIRE(lng.eval.size() == 1u);
  CHECK(lng.eval[0].length == 64);
  CHECK(lng.eval[0].metrics == r.eval[1].metrics);  // the trained row at 64, exactly
  auto settings = lng.settings;
  std::sort(settings.begin(), settings.end());
  CHECK(settings == std::vector<std::pair<std::string, std::string>>{{"eval.lengths", "[64]"},
                                                                     {"task.seq_len", "64"}});
  // Twice the pairs: another eval set, scored by the same model.
  const auto& k8 = variant(r, "k8");
  CHECK(k8.eval[0].metrics.at("loss") != r.eval[1].metrics.at("loss"));
  // What `model summary` counts is kept for plots: 1 of 2 layers is attention.
  REQUIRE(r.model);
  CHECK(r.model->layers == 2);
  CHECK(r.model->attention_share == 0.5);
  CHECK(r.model->recurrent_state_floats > 0);
}

TEST_CASE("eval variants: added to a finished run, they are evaluated and its results stay",
          "[runs][eval_variants]") {
  runstest::TempDir tmp;
  const RunFolder f = runstest::prepare_main(tmp.path, yaml());
  execute_run_folder(f, quiet());
  const RunResults before = *f.results();
  const auto metrics_size = fs::file_size(f.metrics_path());

  // The same experiment with a variant: the run is not retrained, only the variant evaluated.
  const std::string with = yaml(
      "{ntk: {model.attention.position.rope_scaling: "
      "{type: ntk, factor: 2}}}");
  {
    std::ofstream(tmp.path / "exp.yaml") << with;
    const Config cfg = load_experiment_config((tmp.path / "exp.yaml").string(), {});
    const RunPlan plan = plan_run(f.read(), run_source_yaml(cfg), false);
    CHECK(plan.action == RunAction::kResume);
    CHECK_THAT(plan.message, Catch::Contains("eval variants ntk"));
  }
  runstest::prepare_main(tmp.path, with);
  execute_run_folder(f, quiet());
  const RunResults after = *f.results();
  CHECK(f.status().state == RunState::kFinished);
  CHECK(fs::file_size(f.metrics_path()) == metrics_size);
  REQUIRE(after.train);
  CHECK(after.train->final_loss == before.train->final_loss);
  REQUIRE(after.eval.size() == before.eval.size());
  for (size_t i = 0; i < after.eval.size(); ++i)
    CHECK(after.eval[i].metrics == before.eval[i].metrics);
  REQUIRE(after.variants.size() == 1u);
  CHECK(after.variants[0].name == "ntk");

  // Now nothing is missing: skipped. A change of training is still refused.
  const Config cfg = load_experiment_config((tmp.path / "exp.yaml").string(), {});
  CHECK(plan_run(f.read(), run_source_yaml(cfg), false).action == RunAction::kSkip);
  Config other = cfg.clone();
  other.apply_override("train.lr=0.02");
  CHECK(plan_run(f.read(), run_source_yaml(other), false).action == RunAction::kRefuse);
}

TEST_CASE(
    "eval variants: one that changes the parameters is refused naming the parameter, and "
    "the run stays finished",
    "[runs][eval_variants]") {
  runstest::TempDir tmp;
  const RunFolder f =
      runstest::prepare_main(tmp.path, yaml("{t5: {model.attention.position: {scheme: t5}}}"));
  CHECK_THROWS_WITH(execute_run_folder(f, quiet()),
                    Catch::Contains("eval variant 't5'") && Catch::Contains("adds the parameter"));
  CHECK(f.status().state == RunState::kFinished);
  CHECK(f.results()->eval.size() == 2u);
  CHECK(f.results()->variants.empty());
}

TEST_CASE("eval --variant: an ad-hoc variant on a finished run is stored beside its results",
          "[runs][eval_variants]") {
  runstest::TempDir tmp;
  const RunFolder f = runstest::prepare_main(tmp.path, yaml());
  execute_run_folder(f, quiet());
  const RunResults before = *f.results();
  eval_run_folder(f.dir(), {},
                  {parse_eval_variant("w8=model.attention.window=8"),
                   parse_eval_variant("yarn=model.attention.position.rope_scaling={type: yarn, "
                                      "factor: 2}")});
  const RunResults after = *f.results();
  REQUIRE(after.variants.size() == 2u);
  CHECK(after.variants[0].name == "w8");
  CHECK(after.variants[0].set == "model.attention.window=8");
  CHECK(after.variants[1].set == "model.attention.position.rope_scaling={type: yarn, factor: 2}");
  for (size_t i = 0; i < after.eval.size(); ++i)
    CHECK(after.eval[i].metrics == before.eval[i].metrics);
  // A window of 8 changes attention at 32 tokens.
  CHECK(after.variants[0].eval[0].metrics.at("loss") != before.eval[0].metrics.at("loss"));
}

TEST_CASE("eval --lengths --variant: a variant's lengths accumulate like the trained setting's",
          "[runs][eval_variants]") {
  runstest::TempDir tmp;
  const RunFolder f = runstest::prepare_main(tmp.path, yaml());
  execute_run_folder(f, quiet());
  const EvalVariant w8 = parse_eval_variant("w8=model.attention.window=8");
  eval_run_folder(f.dir(), {}, {w8});
  const EvalVariantResult first = variant(*f.results(), "w8");
  REQUIRE(first.eval.size() == 2u);
  eval_run_folder(f.dir(), {48}, {w8});
  const EvalVariantResult both = variant(*f.results(), "w8");
  REQUIRE(both.eval.size() == 3u);
  CHECK(both.eval[0].length == 32);
  CHECK(both.eval[1].length == 48);
  CHECK(both.eval[2].length == 64);
  CHECK(both.eval[0].metrics == first.eval[0].metrics);
  CHECK(both.eval[2].metrics == first.eval[1].metrics);
  // The same name with other settings measures something else: its old lengths go.
  eval_run_folder(f.dir(), {48}, {parse_eval_variant("w8=model.attention.window=4")});
  const EvalVariantResult changed = variant(*f.results(), "w8");
  REQUIRE(changed.eval.size() == 1u);
  CHECK(changed.eval[0].length == 48);
}

TEST_CASE("eval variants: the pre-flight check builds them, before anything trains",
          "[runs][eval_variants]") {
  runstest::TempDir tmp;
  const auto check = [&](const std::string& variants) {
    std::ofstream(tmp.path / "exp.yaml") << yaml(variants);
    const Config cfg = load_experiment_config((tmp.path / "exp.yaml").string(), {});
    const Experiment exp = read_experiment(cfg);
    preflight_variants(cfg, expand_sweep(exp.sweep), exp.sweep, tmp.str());
  };
  CHECK_NOTHROW(check("{ntk: {model.attention.position.rope_scaling: {type: ntk, factor: 2}}}"));
  // A scheme's own keys are read when its plugin is built.
  CHECK_THROWS_WITH(check("{bad: {model.attention.position: {scheme: rope, rope_thet: 5}}}"),
                    Catch::Contains("in eval variant 'bad'") && Catch::Contains("rope_thet"));
  CHECK_THROWS_WITH(check("{t5: {model.attention.position: {scheme: t5}}}"),
                    Catch::Contains("eval variant 't5'") && Catch::Contains("adds the parameter"));
}

}  // namespace variant_eval_test
