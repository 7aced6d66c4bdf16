#pragma once
// Base of the synthetic generators: split-by-hash sampling on top of a raw generator.

#include <ATen/core/Generator.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "hybridlab/task.h"

namespace hybridlab::tasks {

/// A CPU generator seeded with `seed`.
at::Generator make_generator(uint64_t seed);

/// A synthetic task: subclasses implement generate(); this class keeps train rows out of the eval
/// bucket and eval rows inside it (see split_bucket), so the splits are disjoint.
class SyntheticTask : public Task {
 public:
  /// Throws ConfigError for the first length length_problem() refuses.
  void prepare(const std::vector<int64_t>& lengths) override;
  Batch train_batch(int64_t step, int64_t batch_size, uint64_t seed) override;
  Batch eval_set(int64_t length, int64_t wanted, uint64_t seed) override;
  /// Eval-like examples (generate(..., Split::kEval)) from the train buckets, with their own
  /// stream: disjoint from every eval set by the split hash.
  Batch validation_set(int64_t length, int64_t wanted, uint64_t seed,
                       const std::vector<int64_t>& eval_lengths, int64_t eval_examples) override;
  /// `n` raw examples of `length` tokens (before split filtering), drawn from `gen`; `split` lets
  /// a task draw eval examples differently (copy: longer strings).
  virtual Batch generate(at::Generator& gen, int64_t n, int64_t length, Split split) = 0;

 protected:
  /// `n` rows generated for `split`, kept from the eval bucket (`eval_bucket`) or the train ones.
  Batch draw(at::Generator& gen, int64_t n, int64_t length, Split split, bool eval_bucket);
};

/// The repeated distractor sentence of the passkey test (Mohtashami & Jaggi 2023, arXiv
/// 2305.16300, Appendix), which the needle-in-a-haystack task reuses as its haystack.
inline constexpr const char* kHaystackFiller =
    "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. ";

/// Bytes of `text` as a [len] int64 tensor.
torch::Tensor bytes_tensor(const std::string& text);

/// Byte-level examples: `texts` (each exactly `length` bytes) and, per text, the byte range
/// [answer_begin, length) that is scored (predicted from the position before each byte).
Batch byte_examples(const std::vector<std::string>& texts,
                    const std::vector<int64_t>& answer_begin);

/// Metrics of a retrieval task scored on its answer bytes (passkey, niah): `accuracy` (whole
/// answer exact), `digit_accuracy` (per answer byte) and `loss` (mean over answer bytes, nats).
std::map<std::string, double> retrieval_metrics(const ScoreSums& s);

/// Uniform integers for one example from a block of `size` draws in [0, 2^31) made in one
/// generator call (a call per draw costs more than a training step's 5% at small widths; the
/// byte-level RULER tasks draw dozens per example); past the block, from `gen`. The modulo's
/// bias is below range / 2^31.
class BlockDraws {
 public:
  BlockDraws(const int64_t* block, int64_t size, at::Generator& gen)
      : p_(block), left_(size), gen_(gen) {}
  /// A uniform integer in [lo, hi].
  int64_t next(int64_t lo, int64_t hi);
  /// `n` blocks of `per_row` draws: row i starts at data_ptr() + i * per_row.
  static torch::Tensor block(at::Generator& gen, int64_t n, int64_t per_row);

 private:
  const int64_t* p_;
  int64_t left_;
  at::Generator& gen_;
};

/// Metrics of a byte-level task scored on a text answer (the RULER tasks): `accuracy` (whole
/// answer exact), `byte_accuracy` (per answer byte) and `loss` (mean over answer bytes, nats).
std::map<std::string, double> answer_metrics(const ScoreSums& s);

/// `count` distinct words of `letters` random lowercase letters (or capitals with `capitals`).
std::vector<std::string> distinct_words(BlockDraws& d, int64_t count, int64_t letters,
                                        bool capitals = false);

/// Metrics of a task scored per token: `accuracy` (scored tokens right), `sequence_accuracy` (rows
/// whose every scored token is right) and `loss` (mean over scored tokens, nats).
std::map<std::string, double> token_metrics(const ScoreSums& s);

/// Chance levels of retrieval_metrics: a uniform guess of each decimal digit (1/10, loss ln 10);
/// a whole key of 5 or more digits is guessed with probability <= 1e-5, i.e. 0.
std::map<std::string, double> retrieval_chance();

/// A uniform integer in [lo, hi] drawn from `gen`.
int64_t uniform_int(at::Generator& gen, int64_t lo, int64_t hi);

/// "" if `length` >= `min_length` (and, if `even`, even), else the problem: "length 3 is too
/// short: <why> (at least N tokens)".
std::string short_length_problem(int64_t length, int64_t min_length, const std::string& why,
                                 bool even = false);

}  // namespace hybridlab::tasks
