#pragma once
// Building a run from its config: experiment, plugin host, model on its device, prepared task.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "hybridlab/config.h"
#include "hybridlab/experiment.h"
#include "hybridlab/plugin_host.h"
#include "hybridlab/run_record.h"

namespace hybridlab {

struct BuiltRun {
  Experiment exp;
  std::unique_ptr<PluginHost> host;  ///< declared before the model: outlives it
  std::shared_ptr<LanguageModel> model;
  int64_t params = 0;
};

/// Reads `cfg` (no sweep validation), applies its runtime (`threads` > 0 overrides
/// runtime.threads), seeds, builds the model and prepares the task at every length.
/// `config_dir` resolves relative data paths ("" = the config file's folder). Throws what
/// read_experiment, the plugin host and the task throw; a LibTorch failure becomes a UserError.
BuiltRun build_run(const Config& cfg, const std::string& config_dir = "", int64_t threads = 0);

/// The model of eval variant `v` of the trained run `trained` (built from `trained_cfg`), with
/// the trained parameters copied in (adopt_trained_weights). It is built for the trained run's
/// training length (so a variant that sets task.seq_len or eval.lengths changes what is scored,
/// never the model; Task::train_lengths) and for its longest eval length or the variant's,
/// whichever is longer. Throws what build_run and adopt_trained_weights throw.
BuiltRun build_eval_variant(const BuiltRun& trained, const Config& trained_cfg,
                            const EvalVariant& v, const std::string& config_dir = "");

/// Copies every parameter of `trained` into `variant` (the model of eval variant `v`), which
/// must have the same parameter names and shapes: an evaluation variant may change how the
/// weights are used, never which exist. Buffers are not copied: they hold what the variant's own
/// settings compute (e.g. rotary tables). Throws UserError naming `v` and the first parameter
/// added, dropped or reshaped.
void adopt_trained_weights(LanguageModel& trained, LanguageModel& variant, const EvalVariant& v);

/// Runs `check` for eval variant `v`: a ConfigError, PluginError or other UserError it throws is
/// thrown again, of the same type, as "in eval variant 'NAME' (file:line:col): MESSAGE".
void in_eval_variant(const EvalVariant& v, const std::function<void()>& check);

/// Builds the model of every variant in `variants` with `build` (given the variant's config,
/// eval_variant_config of `cfg`) and checks it takes the parameters of `trained`
/// (adopt_trained_weights), so that `config show` and `model summary` refuse what a run would.
/// Throws as in_eval_variant, for the first variant that fails.
void check_eval_variant_models(
    const Config& cfg, const std::vector<EvalVariant>& variants, LanguageModel& trained,
    const std::function<std::shared_ptr<LanguageModel>(const Config&)>& build);

/// The source config and identity of a prepared run folder. Throws UserError when the folder has
/// no source.yaml / run.json (it is not a run).
std::pair<Config, RunIdentity> folder_config(const RunFolder& folder);

/// A trained run rebuilt from its folder, its checkpoint loaded.
struct TrainedRun {
  Config cfg;  ///< source.yaml (with `lengths` as eval.lengths when given)
  RunIdentity id;
  RunState state = RunState::kTrained;  ///< kTrained or kFinished
  BuiltRun built;
};

/// Rebuilds the run in `folder` the one way every command does (source.yaml, build_run) and
/// loads its checkpoint; non-empty `lengths` (tokens) replace eval.lengths and `examples` > 0
/// eval.examples, both read (and refused) as the file's values would be. The caller holds the
/// run's lock. Throws UserError when the folder is not a run, is not trained to its last step
/// (naming its state), or holds no checkpoint; and what build_run throws (e.g. a plugin that is
/// gone); a ConfigError or DataError is prefixed "`lengths_option` L1,L2: " when `lengths` were
/// given (the command-line option that gave them).
TrainedRun load_trained_run(const RunFolder& folder, const std::vector<int64_t>& lengths = {},
                            int64_t examples = 0, const std::string& lengths_option = "--lengths");

}  // namespace hybridlab
