// `eval.variants` and `eval --variant`: only settings the trained parameters do not depend on.

#include <catch2/catch.hpp>

#include "hybridlab/error.h"
#include "hybridlab/experiment.h"

using namespace hybridlab;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace eval_variants_test {
namespace {

Experiment read(const std::string& variants) {
  return read_experiment(
      Config::parse("model: {d_model: 16, vocab_size: 64, layers: GA, attention: {n_heads: 2}}\n"
                    "task: {name: mqar, seq_len: 32, vocab_size: 64, num_kv_pairs: 4}\n"
                    "eval:\n  lengths: [32]\n  variants:\n" +
                        variants,
                    "exp.yaml"));
}

}  // namespace

TEST_CASE("eval variants: safe keys, each mixer's declared by its type",
          "[config][eval_variants]") {
  const Config none;  // the default plugin search path: the shipped mixer plugins
  CHECK(eval_safe_key(none, "model.attention.position.rope_scaling"));
  CHECK(eval_safe_key(none, "model.attention.position"));
  CHECK(eval_safe_key(none, "model.position.scheme"));
  CHECK(eval_safe_key(none, "model.attention.window"));
  CHECK(eval_safe_key(none, "model.gated_deltanet.chunk_size"));
  CHECK(eval_safe_key(none, "model.mamba2.chunk_size"));  // a plugin's record declares it
  CHECK(eval_safe_key(none, "model.gated_deltaproduct.chunk_size"));
  CHECK_FALSE(eval_safe_key(none, "model.mamba2.d_state"));
  CHECK_FALSE(eval_safe_key(none, "model.no_such_mixer.chunk_size"));
  CHECK_FALSE(eval_safe_key(none, "model.mlp.chunk_size"));
  CHECK_FALSE(eval_safe_key(none, "model.A.window"));  // a pattern letter is not a section
  CHECK_FALSE(eval_safe_key(none, "model.attention.chunk_size"));
  CHECK(eval_safe_key(none, "model.overrides.3.position.scheme"));
  CHECK(eval_safe_key(none, "model.overrides.-1.window"));
  CHECK(eval_safe_key(none, "eval.stride"));
  CHECK(eval_safe_key(none, "eval.lengths"));
  // The task's settings, but not which task nor what it was trained on.
  CHECK(eval_safe_key(none, "task.num_kv_pairs"));
  CHECK(eval_safe_key(none, "task.seq_len"));
  CHECK(eval_safe_key(none, "task.mixture_weight"));  // a name that only starts like one
  CHECK_FALSE(eval_safe_key(none, "task.name"));
  CHECK_FALSE(eval_safe_key(none, "task.mixture"));
  CHECK_FALSE(eval_safe_key(none, "task.mixture.settings"));
  CHECK_FALSE(eval_safe_key(none, "task"));
  CHECK_FALSE(eval_safe_key(none, "eval.examples"));
  CHECK_FALSE(eval_safe_key(none, "model.d_model"));
  CHECK_FALSE(eval_safe_key(none, "model.attention.n_heads"));
  CHECK_FALSE(eval_safe_key(none, "model.attention.positional"));
  CHECK_FALSE(eval_safe_key(none, "model.overrides.x.window"));
  CHECK_FALSE(eval_safe_key(none, "train.lr"));
}

TEST_CASE("eval variants: read in file order, a shape-changing key is refused at file:line",
          "[config][eval_variants]") {
  const Experiment e = read(
      "    ntk: {model.attention.position.rope_scaling: {type: ntk, factor: 4}}\n"
      "    w16: {model.attention.window: 16, model.gated_deltanet.chunk_size: 8}\n");
  REQUIRE(e.eval.variants.size() == 2u);
  CHECK(e.eval.variants[0].name == "ntk");
  CHECK(eval_variant_text(e.eval.variants[0]) ==
        "model.attention.position.rope_scaling={type: ntk, factor: 4}");
  CHECK(eval_variant_text(e.eval.variants[1]) ==
        "model.attention.window=16, model.gated_deltanet.chunk_size=8");
  CHECK_THROWS_WITH(read("    wide: {model.d_model: 32}\n"),
                    Catch::Contains("exp.yaml:6:12") && Catch::Contains("'model.d_model' cannot "
                                                                        "change after training"));
  CHECK_THROWS_WITH(read("    trained: {model.attention.window: 8}\n"),
                    Catch::Contains("'trained' names the trained setting"));
  CHECK_THROWS_WITH(read("    empty: {}\n"), Catch::Contains("must map to the settings"));
  // A task setting is read as the task reads it, at the variant's line.
  const Experiment k = read("    k8: {task.num_kv_pairs: 8, eval.lengths: [64]}\n");
  CHECK(eval_variant_settings(k.eval.variants[0]) ==
        std::vector<std::pair<std::string, std::string>>{{"task.num_kv_pairs", "8"},
                                                         {"eval.lengths", "[64]"}});
  CHECK_THROWS_WITH(read("    k16: {task.num_kv_pairs: 16}\n"),
                    Catch::Contains("in eval variant 'k16' (exp.yaml:6:5)") &&
                        Catch::Contains("task.seq_len: must be >= 4 * num_kv_pairs = 64"));
  // Values are checked as the reader of the key would.
  CHECK_THROWS_WITH(read("    bad: {model.attention.window: many}\n"),
                    Catch::Contains("in eval variant 'bad'") && Catch::Contains("window"));
}

TEST_CASE("eval --variant: NAME=KEY=VALUE[,KEY=VALUE], commas inside flow values kept",
          "[config][eval_variants]") {
  const EvalVariant v = parse_eval_variant(
      "yarn=model.attention.position.rope_scaling={type: yarn, factor: 4},model.attention."
      "window=64");
  CHECK(v.name == "yarn");
  REQUIRE(v.set.size() == 2u);
  CHECK(v.set[0].first == "model.attention.position.rope_scaling");
  CHECK(v.set[0].second["factor"].as<int>() == 4);
  CHECK(v.set[1].second.as<int>() == 64);
  CHECK_THROWS_AS(parse_eval_variant("model.attention.window"), UserError);
  // Which keys may change is the run's mixers' to say: checked against the run's config.
  const EvalVariant lr = parse_eval_variant("x=train.lr=0.1");
  CHECK_THROWS_WITH(check_eval_variant(Config{}, lr),
                    Catch::Contains("variant 'x': 'train.lr' cannot change after training") &&
                        Catch::Contains("model.attention.window") &&
                        Catch::Contains("model.deltanet.chunk_size") &&
                        Catch::Contains("model.overrides.N.chunk_size"));
  CHECK_NOTHROW(check_eval_variant(Config{}, v));
  CHECK_THROWS_WITH(parse_eval_variant("a b=model.attention.window=8"), Catch::Contains("NAME"));
  CHECK_THROWS_WITH(parse_eval_variant("x=model.attention.window="), Catch::Contains("empty"));
}

}  // namespace eval_variants_test
