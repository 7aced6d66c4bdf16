// plan_run: the one rule every entry point applies to an existing run folder.

#include <catch2/catch.hpp>

#include "hybridlab/run.h"

using namespace hybridlab;

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
