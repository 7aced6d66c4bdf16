// Executing a run folder: the reported figures do not depend on interruptions; finished is
// final; eval adds results without touching the training summary.

#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <numeric>

#include "hybridlab/run.h"
#include "hybridlab/trainer.h"
#include "runs_support.h"

using namespace hybridlab;
namespace fs = std::filesystem;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace execute_test {
namespace {

const std::string kTrain =
    "train: {steps: 12, batch_size: 4, lr: 0.01, warmup_steps: 2, checkpoint_every: 4, "
    "log_every: 5, seed: 3}\n";

ExecuteOptions quiet(int64_t stop_after = 0) {
  ExecuteOptions o;
  o.quiet = true;
  o.stop_after = stop_after;
  return o;
}

// The losses of steps 1..N from metrics.jsonl, read independently of the trainer.
std::vector<double> losses(const RunFolder& f) {
  std::ifstream in(f.metrics_path());
  std::vector<double> out;
  std::string line;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("loss")) out.push_back(j["loss"].get<double>());
  }
  return out;
}

}  // namespace

TEST_CASE("execute: final_loss of a run interrupted at any step equals the uninterrupted one",
          "[runs][execute]") {
  runstest::TempDir whole;
  const RunFolder full = runstest::prepare_main(whole.path, runstest::tiny_yaml(kTrain));
  execute_run_folder(full, quiet());
  const RunResults ref = *full.results();
  REQUIRE(ref.train);
  REQUIRE(ref.train->steps == 12);
  // The mean of the last log_every (5) losses, computed here from the log.
  const std::vector<double> l = losses(full);
  REQUIRE(l.size() == 12u);
  const double expected = std::accumulate(l.end() - 5, l.end(), 0.0) / 5.0;
  CHECK(ref.train->final_loss == expected);

  // Stops at 3 and 7 (inside a log window and off the checkpoint grid), then resumed.
  for (int64_t k : {3, 7}) {
    INFO("interrupted at step " << k);
    runstest::TempDir part;
    const RunFolder f = runstest::prepare_main(part.path, runstest::tiny_yaml(kTrain));
    REQUIRE_THROWS_AS(execute_run_folder(f, quiet(k)), Interrupted);
    CHECK(f.status().state == RunState::kInterrupted);
    execute_run_folder(f, quiet());
    const RunResults r = *f.results();
    CHECK(r.train->resumed_from == k);
    CHECK(losses(f) == l);
    CHECK(r.train->final_loss == ref.train->final_loss);  // bit-identical
    CHECK(r.eval.at(1).metrics.at("loss") == ref.eval.at(1).metrics.at("loss"));
    CHECK(f.status().state == RunState::kFinished);
  }
}

TEST_CASE("execute: a trained run is final for train, evaluated by run, extended by eval",
          "[runs][execute]") {
  runstest::TempDir tmp;
  const std::string yaml = runstest::tiny_yaml(kTrain);
  RunFolder f = runstest::prepare_main(tmp.path, yaml, /*train_only=*/true);
  ExecuteOptions train_only = quiet();
  train_only.train_only = true;
  execute_run_folder(f, train_only);
  CHECK(f.status().state == RunState::kTrained);
  REQUIRE(f.results()->train);
  CHECK(f.results()->eval.empty());
  const std::string trained_results = runstest::slurp(fs::path(f.dir()) / "results.json");
  const double final_loss = f.results()->train->final_loss;

  // `train` again: skipped, nothing rewritten.
  {
    RunLock lock(f.dir());
    const auto src = f.source();
    const RunPlan p = prepare_run_folder(f, *src, *f.identity(), true);
    CHECK(p.action == RunAction::kSkip);
  }
  CHECK(runstest::slurp(fs::path(f.dir()) / "results.json") == trained_results);

  // `eval` adds the evaluation; the training summary stays.
  eval_run_folder(f.dir());
  CHECK(f.status().state == RunState::kFinished);
  RunResults r = *f.results();
  CHECK(r.train->final_loss == final_loss);
  CHECK(r.train->steps == 12);
  REQUIRE(r.eval.size() == 2u);
  const double loss48 = r.eval[1].metrics.at("loss");

  // Eval at another length adds it and keeps the others.
  eval_run_folder(f.dir(), {64});
  r = *f.results();
  REQUIRE(r.eval.size() == 3u);
  CHECK(r.eval[0].length == 32);
  CHECK(r.eval[1].metrics.at("loss") == loss48);
  CHECK(r.eval[2].length == 64);
  CHECK(r.train->final_loss == final_loss);

  // A finished run is never overwritten: the same config skips, a changed one is refused.
  {
    RunLock lock(f.dir());
    CHECK(prepare_run_folder(f, *f.source(), *f.identity(), true).action == RunAction::kSkip);
    CHECK(prepare_run_folder(f, *f.source() + "description: changed\n", *f.identity(), false)
              .action == RunAction::kRefuse);
  }
  CHECK(f.results()->eval.size() == 3u);
  CHECK(f.status().state == RunState::kFinished);
}

TEST_CASE("execute: eval refuses a run that is not trained to its end", "[runs][execute]") {
  runstest::TempDir tmp;
  const RunFolder f = runstest::prepare_main(tmp.path, runstest::tiny_yaml(kTrain));
  REQUIRE_THROWS_AS(execute_run_folder(f, quiet(4)), Interrupted);
  CHECK_THROWS_WITH(eval_run_folder(f.dir()),
                    Catch::Contains("is interrupted") && Catch::Contains("only a run trained"));
  CHECK(f.status().state == RunState::kInterrupted);
  CHECK_THROWS_WITH(eval_run_folder(tmp.str()), Catch::Contains("is not a run folder"));
}

TEST_CASE("execute: a changed config restarts an interrupted run instead of resuming it",
          "[runs][execute]") {
  runstest::TempDir tmp;
  const RunFolder f = runstest::prepare_main(tmp.path, runstest::tiny_yaml(kTrain));
  REQUIRE_THROWS_AS(execute_run_folder(f, quiet(5)), Interrupted);
  REQUIRE(fs::exists(f.checkpoint_path()));
  // d_model changed: resuming would load a checkpoint of another shape.
  std::string changed = runstest::tiny_yaml(kTrain);
  changed.replace(changed.find("d_model: 16"), 11, "d_model: 24");
  const RunFolder g = runstest::prepare_main(tmp.path, changed);
  REQUIRE(g.dir() == f.dir());
  CHECK(!fs::exists(f.checkpoint_path()));
  CHECK(!fs::exists(f.metrics_path()));
  execute_run_folder(g, quiet());
  CHECK(g.results()->train->resumed_from == 0);
  CHECK(g.status().state == RunState::kFinished);
  CHECK_THAT(runstest::slurp(fs::path(g.dir()) / "config.yaml"), Catch::Contains("d_model: 24"));
}

TEST_CASE("execute: train.init_from starts a run from another run's trained weights",
          "[runs][execute]") {
  runstest::TempDir a_dir, b_dir, c_dir;
  const RunFolder a = runstest::prepare_main(a_dir.path, runstest::tiny_yaml(kTrain));
  // Before `a` is trained, a run continuing from it is refused.
  const std::string from =
      "train: {steps: 1, batch_size: 4, lr: 1.0e-12, warmup_steps: 0, "
      "weight_decay: 0, init_from: '" +
      a.dir() + "'}\n";
  const RunFolder b = runstest::prepare_main(b_dir.path, runstest::tiny_yaml(from));
  CHECK_THROWS_WITH(execute_run_folder(b, quiet()),
                    Catch::Contains("train.init_from") && Catch::Contains("not a trained run"));
  execute_run_folder(a, quiet());
  const RunFolder b2 = runstest::prepare_main(b_dir.path, runstest::tiny_yaml(from));
  execute_run_folder(b2, quiet());
  // One step at lr 1e-12 leaves a's weights: b scores what a scored.
  const RunResults ra = *a.results(), rb = *b2.results();
  for (size_t i = 0; i < ra.eval.size(); ++i) {
    CHECK(rb.eval[i].metrics.at("loss") == Approx(ra.eval[i].metrics.at("loss")).epsilon(1e-6));
  }
  // A model of another shape does not fit.
  std::string wide = runstest::tiny_yaml(from);
  wide.replace(wide.find("d_model: 16"), 11, "d_model: 32");
  const RunFolder c = runstest::prepare_main(c_dir.path, wide);
  CHECK_THROWS_WITH(execute_run_folder(c, quiet()),
                    Catch::Contains("does not fit the model built from") &&
                        Catch::Contains("main/source.yaml (train.init_from)"));
}

}  // namespace execute_test
