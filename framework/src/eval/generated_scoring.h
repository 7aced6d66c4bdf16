#pragma once
// Generation-scored evaluation (`eval.scoring: generated`): each example's answer span is decoded
// greedily from the tokens before it and compared with the reference.

#include <cstdint>

#include "hybridlab/model.h"
#include "hybridlab/task.h"

namespace hybridlab {

/// Adds the examples of `set` (tokens [N,L] int64, targets [N,L]) to `sums`, scored by greedy
/// decoding: for an example whose first scored position is p and whose span holds n positions,
/// the tokens [0, p] are prefilled and n tokens decoded, each fed back; decoded token j is
/// compared with targets[p + j]. Fills tokens, correct_tokens, examples, correct_examples (exact
/// match of the whole answer) and example_accuracy_sum; loss_sum stays 0 (no teacher-forced
/// likelihood is computed). Examples with the same (p, n) are decoded together, at most
/// `batch_size` at a time. Throws UserError for an example whose scored positions are not one
/// contiguous span.
void score_generated(LanguageModel& model, const Batch& set, int64_t batch_size, ScoreSums& sums);

}  // namespace hybridlab
