#pragma once
// Reading a task from YAML and looking at its rows, for the task tests.

#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "hybridlab/error.h"
#include "hybridlab/task.h"

namespace hybridlab::test {

/// The task that `yaml`'s task section reads (relative paths from `dir`); throws its ConfigError.
inline std::shared_ptr<Task> make_task(const std::string& yaml, const std::string& dir = "") {
  Config cfg = Config::parse(yaml);
  TaskContext ctx;
  ctx.config_dir = dir;
  auto t = read_task(cfg.section("task"), ctx);
  cfg.raise_errors();
  return t;
}

/// The ConfigError that reading `yaml` (as file exp.yaml) records, "" when it records none.
inline std::string task_error(const std::string& yaml) {
  Config cfg = Config::parse(yaml, "exp.yaml");
  read_task(cfg.section("task"), {});
  try {
    cfg.raise_errors();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

/// A [T] row of byte ids as text.
inline std::string row_text(const torch::Tensor& row) {
  std::string s;
  for (int64_t i = 0; i < row.size(0); ++i) s += static_cast<char>(row[i].item<int64_t>());
  return s;
}

/// A [T] int64 row as a vector.
inline std::vector<int64_t> row_vec(const torch::Tensor& row) {
  const torch::Tensor c = row.contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

}  // namespace hybridlab::test
