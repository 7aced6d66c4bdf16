#pragma once
// Which eval variants a run still owes: the one rule shared by plan_run and the executor.

#include <optional>
#include <vector>

#include "hybridlab/experiment.h"
#include "hybridlab/run_record.h"

namespace hybridlab {

/// The entries of `listed` that `done` holds no results for; a result counts only with the same
/// name and the same settings (eval_variant_text), so a changed variant is evaluated again.
std::vector<EvalVariant> variants_without_results(const std::vector<EvalVariant>& listed,
                                                  const std::optional<RunResults>& done);

}  // namespace hybridlab
