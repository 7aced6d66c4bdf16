// plan_run: the one rule every entry point applies to an existing run folder.

#include <catch2/catch.hpp>

#include "hybridlab/run.h"

using namespace hybridlab;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace plan_test {
namespace {

RunRecord folder(RunState state, const char* source) {
  RunRecord r;
  r.dir = "runs/exp/main";
  r.status.state = state;
  if (source) r.source = source;
  return r;
}

}  // namespace

TEST_CASE("run plan: finished and trained runs are final", "[runs][plan]") {
  for (bool train_only : {false, true}) {
    INFO("train_only " << train_only);
    CHECK(plan_run(folder(RunState::kFinished, "a"), "a", train_only).action == RunAction::kSkip);
    const RunPlan changed = plan_run(folder(RunState::kFinished, "a"), "b", train_only);
    CHECK(changed.action == RunAction::kRefuse);
    CHECK_THAT(changed.message,
               Catch::Contains("runs/exp/main") && Catch::Contains("not overwritten"));
    CHECK(plan_run(folder(RunState::kTrained, "a"), "b", train_only).action == RunAction::kRefuse);
  }
  // A trained run is skipped by `train` and evaluated by `run`.
  CHECK(plan_run(folder(RunState::kTrained, "a"), "a", true).action == RunAction::kSkip);
  CHECK(plan_run(folder(RunState::kTrained, "a"), "a", false).action == RunAction::kResume);
}

TEST_CASE("run plan: unfinished runs resume, or restart when their config changed",
          "[runs][plan]") {
  for (RunState s :
       {RunState::kInterrupted, RunState::kFailed, RunState::kRunning, RunState::kNew}) {
    INFO(run_state_name(s));
    for (bool train_only : {false, true}) {
      CHECK(plan_run(folder(s, "a"), "a", train_only).action == RunAction::kResume);
      const RunPlan changed = plan_run(folder(s, "a"), "b", train_only);
      CHECK(changed.action == RunAction::kFresh);
      CHECK_THAT(changed.message, Catch::Contains("configuration changed"));
    }
  }
  CHECK(plan_run(folder(RunState::kNew, nullptr), "a", false).action == RunAction::kFresh);
  CHECK(plan_run(folder(RunState::kNew, nullptr), "a", false).message.empty());
}

TEST_CASE("run plan: eval variants never retrain, a finished run gets the ones it lacks",
          "[runs][plan]") {
  const char* trained = "train: {lr: 0.01}\neval: {lengths: [32]}\n";
  const std::string with =
      "train: {lr: 0.01}\neval: {lengths: [32], variants: {w8: {model.attention.window: 8}}}\n";
  RunRecord rec = folder(RunState::kFinished, trained);
  rec.results = RunResults{};
  const RunPlan add = plan_run(rec, with, false);
  CHECK(add.action == RunAction::kResume);
  CHECK_THAT(add.message, Catch::Contains("eval variants w8"));
  CHECK(plan_run(rec, with, true).action == RunAction::kSkip);  // train never evaluates
  // Evaluated already (same name and settings): skipped; other settings: evaluated again.
  rec.results->variants.push_back({"w8", "model.attention.window=8", {}, {}});
  CHECK(plan_run(rec, with, false).action == RunAction::kSkip);
  rec.results->variants[0].set = "model.attention.window=16";
  CHECK(plan_run(rec, with, false).action == RunAction::kResume);
  // Dropping the variants changes nothing; a training change is still refused.
  CHECK(plan_run(folder(RunState::kFinished, with.c_str()), trained, false).action ==
        RunAction::kSkip);
  CHECK(plan_run(rec, "train: {lr: 0.02}\n" + with.substr(with.find("eval")), false).action ==
        RunAction::kRefuse);
  // An interrupted run resumes whatever its variants.
  CHECK(plan_run(folder(RunState::kInterrupted, trained), with, false).action ==
        RunAction::kResume);
}

}  // namespace plan_test
