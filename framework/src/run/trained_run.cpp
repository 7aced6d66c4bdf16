// Rebuilding a trained run from its folder.

#include "run/trained_run.h"

#include <fmt/format.h>

#include <filesystem>

#include "hybridlab/error.h"
#include "hybridlab/trainer.h"

namespace hybridlab {
namespace fs = std::filesystem;

std::pair<Config, RunIdentity> run_folder_config(const RunFolder& folder) {
  const auto source = folder.source();
  const auto id = folder.identity();
  if (!source || !id) {
    throw UserError(fmt::format(
        "'{}' is not a run folder (no source.yaml / run.json); give runs/<experiment>/<run>",
        folder.dir()));
  }
  return {Config::parse(*source, (fs::path(folder.dir()) / "source.yaml").string()), *id};
}

RunStatus require_trained(const RunFolder& folder) {
  const RunStatus st = folder.status();
  if (st.state != RunState::kTrained && st.state != RunState::kFinished) {
    throw UserError(fmt::format(
        "'{}' is {}: only a run trained to its last step can be used; `hybridlab run` (or "
        "`train`) with its experiment resumes it",
        folder.dir(), run_state_name(st.state)));
  }
  return st;
}

void load_trained_weights(LanguageModel& model, const std::string& run_dir) {
  if (load_model_checkpoint(model, run_dir) < 0) {
    throw UserError(
        fmt::format("'{}' holds no checkpoint; train it first (hybridlab run / train)", run_dir));
  }
}

BuiltRun build_trained_run(const std::string& run_dir) {
  const RunFolder folder(run_dir);
  auto [cfg, id] = run_folder_config(folder);
  require_trained(folder);
  BuiltRun b = build_run(cfg, id.config_dir);
  load_trained_weights(*b.model, run_dir);
  return b;
}

}  // namespace hybridlab
