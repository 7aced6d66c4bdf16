#include "tasks/registry.h"

namespace hybridlab::tasks {

std::vector<TaskType> register_builtin_tasks() {
  return {mqar_task_type(),           passkey_task_type(), copy_task_type(),
          selective_copy_task_type(), niah_task_type(),    text_task_type()};
}

}  // namespace hybridlab::tasks
