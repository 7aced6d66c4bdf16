#pragma once
// Rebuilding a trained run from its folder: the one way `eval` and `generate` get the model a run
// trained (its source.yaml through build_run, then its checkpoint's weights).

#include <string>
#include <utility>

#include "hybridlab/config.h"
#include "hybridlab/run_record.h"
#include "run/build.h"

namespace hybridlab {

/// The folder's source config and identity. Throws UserError naming the folder when it holds no
/// source.yaml / run.json (it is not a run folder).
std::pair<Config, RunIdentity> run_folder_config(const RunFolder& folder);

/// The folder's status when it is trained or finished; throws UserError naming its state
/// (running, interrupted, failed, ...) and how to finish it otherwise.
RunStatus require_trained(const RunFolder& folder);

/// Loads the checkpoint of `run_dir` into `model`; throws UserError when the folder holds none.
void load_trained_weights(LanguageModel& model, const std::string& run_dir);

/// The run of `run_dir` as trained: run_folder_config, require_trained, build_run (which throws
/// what the config, the plugin host and the task throw, e.g. a missing plugin) and
/// load_trained_weights. Takes no lock: it reads the folder only.
BuiltRun build_trained_run(const std::string& run_dir);

}  // namespace hybridlab
