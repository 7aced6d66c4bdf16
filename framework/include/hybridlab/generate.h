#pragma once
// Autoregressive generation (decoding) with a LanguageModel's DecodeCache: the prompt is prefilled
// in one forward, then one token per step. Greedy (temperature 0) or sampled from the softmax of
// logits / temperature, optionally restricted to the top_k logits (Fan et al. 2018, "Hierarchical
// Neural Story Generation", §5.4), with a seeded generator so a seed fixes the output.

#include <torch/types.h>

#include <cstdint>
#include <string>

#include "hybridlab/model.h"

namespace hybridlab {

/// How to pick each new token.
struct GenerateOptions {
  int64_t max_new_tokens = 64;  ///< tokens generated after the prompt (>= 1)
  double temperature = 0;       ///< 0 = greedy (argmax); > 0 = sample from softmax(logits / T)
  int64_t top_k = 0;            ///< sample among the k highest logits only; 0 = all
  uint64_t seed = 0;            ///< seed of the sampling generator (unused when greedy)
};

/// What generate() returns.
struct Generation {
  torch::Tensor tokens;       ///< [B, max_new_tokens] int64 on the CPU: the new token ids
  int64_t prompt_tokens = 0;  ///< prompt length T (tokens per sequence)
  double prefill_s = 0;       ///< seconds of the prompt's forward (includes the first token)
  double decode_s = 0;        ///< seconds of the one-token steps after it
  /// Tokens per second of the one-token steps (B * (max_new_tokens - 1) / decode_s); 0 when
  /// there was no step (max_new_tokens 1).
  double decode_tokens_per_s() const;
  /// Tokens per second over the whole call (B * max_new_tokens / (prefill_s + decode_s)).
  double tokens_per_s() const;
};

/// The longest sequence `model` can process, in tokens: the smallest PositionScheme::max_length()
/// among its positional schemes (a learned table that does not clamp), 0 when unbounded. `scheme`
/// receives the name of the limiting scheme ("" when unbounded).
int64_t max_positions(torch::nn::Module& model, std::string* scheme = nullptr);

/// Continues every row of `prompt` ([B,T] int64, T >= 1, ids in [0, vocab_size)) by
/// opts.max_new_tokens tokens, on the model's device, without autograd (NoGradGuard), with the
/// model in eval mode (its training flag is restored). Greedy decoding takes the argmax at each
/// step (ties: the lowest id); sampling draws with torch::multinomial from a CPU generator seeded
/// by opts.seed, so the same seed gives the same tokens on any device. Throws UserError for a bad
/// option, an empty prompt, an id out of range, or T + max_new_tokens past max_positions(model)
/// (naming the scheme and its limit).
Generation generate(LanguageModel& model, const torch::Tensor& prompt, const GenerateOptions& opts);

}  // namespace hybridlab
