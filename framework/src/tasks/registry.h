#pragma once
// The one registration function of the task registry (one line per task).

#include <vector>

#include "hybridlab/task.h"
#include "util/registry.h"

namespace hybridlab::tasks {

TaskType mqar_task_type();
TaskType passkey_task_type();
TaskType copy_task_type();
TaskType selective_copy_task_type();
TaskType niah_task_type();
TaskType text_task_type();
TaskType flip_flop_task_type();
TaskType word_problem_task_type();
TaskType algorithmic_task_type();
TaskType in_context_recall_task_type();
TaskType noisy_recall_task_type();
TaskType memorization_task_type();
TaskType fuzzy_recall_task_type();
TaskType compression_task_type();
TaskType ruler_vt_task_type();
TaskType ruler_cwe_task_type();
TaskType ruler_fwe_task_type();

/// Every built-in task. Adding a task: one file defining `<name>_task_type()` and one line here.
std::vector<TaskType> register_builtin_tasks();

/// The task registry (filled once from register_builtin_tasks()).
const Registry<TaskType>& task_registry();

}  // namespace hybridlab::tasks
