#pragma once
// The knock-outs of one trained model: which part each removes, as a ModelAblation.

#include <cstdint>
#include <string>
#include <vector>

#include "hybridlab/analysis.h"
#include "hybridlab/model.h"

namespace hybridlab::analysis {

/// One knock-out: a KnockoutResult's identity plus the ablation that realises it.
struct Knockout {
  std::string kind;    ///< a knockout_kinds() entry
  int64_t layer = -1;  ///< as KnockoutResult::layer
  std::string target;
  int64_t setting = 0;  ///< reach window / state_reset segment (tokens), else 0
  ModelAblation ablation;
  std::string mixer;  ///< as KnockoutResult::mixer
};

/// Every knock-out of `model` of the given kinds (all when `kinds` is empty), in this order:
/// mixer (each layer), state_reset (each recurrent layer; segment = opts.state_window or the
/// layer's chunk_size), position (each pairwise layer that carries_position(): a scheme with
/// hooks, or PaTH's transforms; the input scheme; then all at once when there is more than one),
/// reach (each attention layer × each window of `windows`). Throws std::invalid_argument for an
/// unknown kind.
std::vector<Knockout> plan_knockouts(const LanguageModel& model,
                                     const std::vector<std::string>& kinds, int64_t state_window,
                                     const std::vector<int64_t>& windows);

/// "layer 3 (attention, rope)" / "layer 1 (attention, path+fox)" / "layer 0 (gated_deltanet)":
/// the mixer type and its MixerInfo::position.
std::string layer_label(const LanguageModel& model, size_t layer);

}  // namespace hybridlab::analysis
