#include "tasks/registry.h"

namespace hybridlab::tasks {

std::vector<TaskType> register_builtin_tasks() {
  return {mqar_task_type(),         passkey_task_type(),
          copy_task_type(),         selective_copy_task_type(),
          niah_task_type(),         text_task_type(),
          flip_flop_task_type(),    word_problem_task_type(),
          algorithmic_task_type(),  in_context_recall_task_type(),
          noisy_recall_task_type(), memorization_task_type(),
          ruler_vt_task_type(),     ruler_cwe_task_type(),
          ruler_fwe_task_type(),    fuzzy_recall_task_type(),
          compression_task_type()};
}

const Registry<TaskType>& task_registry() {
  static const Registry<TaskType> registry = [] {
    Registry<TaskType> r("task");
    for (TaskType& t : register_builtin_tasks()) {
      const std::string name = t.name;
      r.add(name, std::move(t), "built in");
    }
    return r;
  }();
  return registry;
}

}  // namespace hybridlab::tasks
