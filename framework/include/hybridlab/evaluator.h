#pragma once
// Evaluation at each `eval.lengths` entry on the task's fixed eval set, under InferenceMode.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "hybridlab/distributed.h"
#include "hybridlab/experiment.h"
#include "hybridlab/model.h"

namespace hybridlab {

struct LengthResult {
  int64_t length = 0;
  int64_t examples = 0;
  std::map<std::string, double> metrics;
  std::vector<double> position_loss;  ///< text: mean loss per position bucket (64 buckets at most)
  /// Tasks with Task::position_accuracy_curve (word_problem): accuracy per position bucket of
  /// equal width (64 buckets at most; 0 for a bucket with no scored position).
  std::vector<double> position_accuracy = {};  // initialised: aggregate inits may omit it
  /// How the examples were scored: eval_scoring_name(EvalOptions::scoring).
  std::string scoring = "teacher_forced";
};

/// Evaluates `model` on `task` at `length` on `examples` examples (batches shrink so that
/// batch*length <= eval.max_batch_tokens), without autograd. eval.scoring selects teacher-forced
/// scoring (one forward) or generated scoring (each answer span greedily decoded, exact match;
/// the task's "loss" metric is then left out). Throws UserError when generated scoring meets an
/// example whose scored positions are not one contiguous span.
/// With `group` (W > 1 ranks, every rank calling with the same arguments), rank r scores the
/// examples [r·n/W, (r+1)·n/W) and the sums are all-reduced: every rank returns the result of the
/// whole set (equal to one process's up to the order of fp64 sums). Throws RankLost.
LengthResult evaluate_length(LanguageModel& model, Task& task, const EvalOptions& eval,
                             int64_t length, int64_t examples, ProcessGroup* group = nullptr);

/// The tuning score set: `exp.eval.examples` examples of Task::validation_set at the training
/// length (disjoint from every eval set of exp.eval.lengths), scored like evaluate_length.
/// Throws DataError when the task has no validation examples left. `group`: as evaluate_length.
LengthResult evaluate_validation(LanguageModel& model, Task& task, const Experiment& exp,
                                 ProcessGroup* group = nullptr);

/// Every length of exp.eval.lengths; results in length order. `group`: as evaluate_length.
std::vector<LengthResult> evaluate(LanguageModel& model, Task& task, const Experiment& exp,
                                   ProcessGroup* group = nullptr);

}  // namespace hybridlab
