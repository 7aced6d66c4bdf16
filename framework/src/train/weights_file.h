#pragma once
// The weights of a trained run without its optimizer: run_dir/checkpoint/weights.safetensors,
// written when training ends beside checkpoint/state.pt. Reading it streams each parameter into
// the model, so evaluating, analysing or exporting a run costs about the model's size, where the
// LibTorch archive (with Adam's two moments) is read whole, about three times it. The tensors keep
// hybridlab's parameter names; the metadata holds the step.

#include <cstdint>
#include <functional>
#include <string>

#include "hybridlab/error.h"
#include "hybridlab/model.h"

namespace hybridlab {

/// run_dir/checkpoint/weights.safetensors.
std::string weights_path(const std::string& run_dir);

/// Writes every parameter of `model` and the metadata {"step": step} to weights_path(run_dir),
/// atomically and one tensor at a time. Throws UserError when the file cannot be written.
void save_weights(LanguageModel& model, int64_t step, const std::string& run_dir);

/// Loads the weights file at `path` into `model` and returns its step. A file whose parameters are
/// not the model's (one missing or extra, another shape) throws `unfit(why)`; a damaged file the
/// DataError of the safetensors reader (naming the file).
int64_t load_weights(LanguageModel& model, const std::string& path,
                     const std::function<UserError(const std::string&)>& unfit);

}  // namespace hybridlab
