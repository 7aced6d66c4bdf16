#pragma once
// train.init_from: another run's trained weights start a run (continued training).

#include <string>

#include "hybridlab/config.h"
#include "hybridlab/experiment.h"
#include "hybridlab/model.h"
#include "hybridlab/run_record.h"

namespace hybridlab {

/// The run folder `train.init_from` names ("" when it is unset): a relative path against
/// `base_dir` (the experiment file's folder), "{seed}" replaced by `train.seed`.
std::string init_from_folder(const TrainOptions& train, const std::string& base_dir);

/// Checks, before anything is written, that the run of `variant_cfg` can start from the folder
/// its train.init_from names: an existing run folder, trained to its last step, with a
/// checkpoint, whose model has every parameter of this run's model at the same shape and no
/// parameter this one lacks (those would be dropped) unless train.init_from_partial is true.
/// Builds both models (this one from `variant_cfg` and `config_dir`, the source from its
/// source.yaml); nothing is trained or loaded. Does nothing when init_from is unset. Throws
/// ConfigError "FILE:LINE:COL: train.init_from: ..." naming both runs and the first parameters
/// that differ.
void check_init_from(const Config& variant_cfg, const std::string& config_dir);

/// Loads the trained weights of run folder `from` into `model` (the run in `to`). Parameters of
/// `from` that `model` lacks are not read (check_init_from refused them unless
/// train.init_from_partial). Throws UserError when `from` is not trained to its last step, holds
/// no checkpoint, or its weights do not fit `model` (load_model_checkpoint: the parameter and
/// both shapes).
void init_weights_from(LanguageModel& model, const std::string& from, const RunFolder& to);

}  // namespace hybridlab
