#pragma once
// Task mixtures (`task.mixture`): training batches drawn from several settings of one task.

#include <cstdint>
#include <memory>

#include "hybridlab/task.h"

namespace hybridlab::tasks {

enum class MixtureOrder {
  kRandom,   ///< each step draws one setting with probability weight / total weight
  kInOrder,  ///< cycles of cycle_steps steps; each setting a consecutive share, in list order
};

/// `task.mixture` besides its settings.
struct MixtureOptions {
  MixtureOrder order = MixtureOrder::kRandom;
  int64_t cycle_steps = 0;  ///< kInOrder: steps of one pass over the settings
};

/// One setting: the task with the setting's keys written over the task's own.
struct MixtureSetting {
  std::shared_ptr<Task> task;
  double weight = 1;  ///< > 0, finite: share of the steps
};

/// Reads `task.mixture` ({order, cycle_steps, settings: [{KEY: VALUE, ..., weight}, ...]}) of
/// the task section `task` whose type is `type`: the task's own keys (outside `mixture`) are
/// the evaluation setting; each listed setting is those keys with its own written over them.
/// Problems (a setting naming another task, settings that disagree on the vocabulary, a weight
/// <= 0 or non-finite, a key the task does not take, a length the task cannot make) are recorded
/// in the config at the setting's file:line:key; returns nullptr when any setting is unusable.
std::shared_ptr<Task> read_mixture(Section& task, const TaskType& type, const TaskContext& ctx);

}  // namespace hybridlab::tasks
