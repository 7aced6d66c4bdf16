#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "hybridlab/sweep.h"
#include "util/atomic_file.h"

namespace hybridlab {
namespace fs = std::filesystem;
using json = nlohmann::json;

std::string run_state_name(RunState s) {
  switch (s) {
    case RunState::kNew:
      return "new";
    case RunState::kRunning:
      return "running";
    case RunState::kFinished:
      return "finished";
    case RunState::kFailed:
      return "failed";
    case RunState::kInterrupted:
      return "interrupted";
  }
  return "new";
}

RunState run_state(const std::string& run_dir) {
  const fs::path p = fs::path(run_dir) / "status.json";
  std::ifstream in(p);
  if (!in) return RunState::kNew;
  try {
    const std::string s = json::parse(in).value("state", "new");
    for (RunState r :
         {RunState::kRunning, RunState::kFinished, RunState::kFailed, RunState::kInterrupted}) {
      if (run_state_name(r) == s) return r;
    }
  } catch (const std::exception&) {
  }
  return RunState::kNew;
}

void write_run_status(const std::string& run_dir, RunState state, const std::string& error,
                      double wall_s) {
  json j = {{"state", run_state_name(state)}};
  if (!error.empty()) j["error"] = error;
  if (wall_s > 0) j["wall_s"] = wall_s;
  write_file_atomic((fs::path(run_dir) / "status.json").string(), j.dump(2) + "\n");
}

}  // namespace hybridlab
