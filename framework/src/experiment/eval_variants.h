#pragma once
// Reading `eval.variants` (the public side is in hybridlab/experiment.h).

#include <vector>

#include "hybridlab/experiment.h"

namespace hybridlab {

/// Reads `eval.variants` (a map name -> {dotted.key: value}); records problems in the config
/// (bad names, empty variants, keys eval_safe_key() refuses) for the caller to raise.
std::vector<EvalVariant> read_eval_variants(Section s);

}  // namespace hybridlab
