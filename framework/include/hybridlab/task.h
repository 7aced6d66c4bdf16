#pragma once
// Benchmark tasks: generators of token sequences with next-token targets on the scored positions.
//
// Every task is deterministic by seed: a batch is a pure function of (seed, split, step or index,
// length), so a resumed run sees exactly the batches an uninterrupted one would. Train and eval
// splits are disjoint by construction: synthetic examples are assigned to a split by a hash of the
// whole example (split_bucket below; the train stream rejects eval-bucket rows and vice versa),
// the text task splits its corpus by document. Sources of each task are in its .cpp file and in
// docs/experiments.md.

#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "hybridlab/config.h"

namespace hybridlab {

namespace tokenizer {
class BpeTokenizer;  // tokenizer/bpe.h
}  // namespace tokenizer

/// Target value of positions that are not scored (as in PyTorch's cross_entropy ignore_index).
constexpr int64_t kIgnoreIndex = -100;

enum class Split { kTrain, kEval };

/// One batch: inputs and next-token targets.
struct Batch {
  Batch() = default;
  Batch(torch::Tensor tokens_in, torch::Tensor targets_in, torch::Tensor starts_in = {})
      : tokens(std::move(tokens_in)),
        targets(std::move(targets_in)),
        document_starts(std::move(starts_in)) {}
  torch::Tensor tokens;  ///< [B,T] int64, model inputs
  torch::Tensor
      targets;  ///< [B,T] int64, the token expected after each input, kIgnoreIndex = not scored
  /// [B,T] bool, true at the first token of each document inside a packed row (text with
  /// `task.packing: documents`): the model must model every document alone
  /// (LanguageModel::forward_packed). Undefined when each row is one piece of one sequence.
  torch::Tensor document_starts;
};

/// Sums over scored positions, accumulated over eval batches (see score_batch).
struct ScoreSums {
  double loss_sum = 0;         ///< sum of cross-entropy (nats) over scored positions
  int64_t tokens = 0;          ///< scored positions
  int64_t correct_tokens = 0;  ///< scored positions whose argmax equals the target
  /// Bytes of text the scored targets stand for (Task::token_bytes); 0 when the task has none.
  int64_t target_bytes = 0;
  int64_t examples = 0;                   ///< sequences with at least one scored position
  int64_t correct_examples = 0;           ///< sequences whose every scored position is correct
  double example_accuracy_sum = 0;        ///< sum over sequences of their own token accuracy
  std::vector<double> position_loss_sum;  ///< [T] loss summed per position (text task)
  std::vector<int64_t> position_count;    ///< [T] scored positions per position
  std::vector<int64_t> position_correct;  ///< [T] scored positions whose argmax is right
};

/// Adds one batch to `sums`. logits [B,T,V] float, targets [B,T] int64 (kIgnoreIndex skipped).
/// `per_position` also fills the per-position sums (loss, count, correct). `token_bytes` ([V']
/// int64, V' >= every target id; Task::token_bytes), when defined, adds the bytes of the scored
/// targets to ScoreSums::target_bytes. Runs under the caller's grad mode.
void score_batch(const torch::Tensor& logits, const torch::Tensor& targets, ScoreSums& sums,
                 bool per_position, const torch::Tensor& token_bytes = {});

/// Where relative data paths are resolved and which lengths the model must serve.
struct TaskContext {
  std::string config_dir;  ///< folder of the experiment file ("" = current folder)
};

/// A benchmark task. Constructed cheaply by its reader (options only); prepare() loads data.
class Task {
 public:
  virtual ~Task();
  /// Registered name ("mqar", "text", ...).
  virtual std::string name() const = 0;
  /// Token ids used are in [0, vocab_size()); the model's vocab_size must be at least this.
  virtual int64_t vocab_size() const = 0;
  /// The training length (task.seq_len), in tokens.
  virtual int64_t seq_len() const = 0;
  /// Every length training batches take (tokens): seq_len(), or each setting's of a mixture
  /// (`task.mixture`), which trains at several. The model is built for the longest.
  virtual std::vector<int64_t> train_lengths() const { return {seq_len()}; }
  /// Why the task cannot make examples of `length` tokens, without loading any data ("" when it
  /// can). read_experiment reports it at task.seq_len / eval.lengths. Default: every length.
  virtual std::string length_problem(int64_t length) const {
    (void)length;
    return "";
  }
  /// Loads data and checks that every length in `eval_lengths` can be supplied. Throws DataError
  /// naming the limit (e.g. "longest validation document is 14,713 bytes") or ConfigError when a
  /// length is too short for the task's layout. Idempotent.
  virtual void prepare(const std::vector<int64_t>& eval_lengths) = 0;
  /// Training batch number `step` ([batch_size, seq_len()]), a pure function of (seed, step).
  virtual Batch train_batch(int64_t step, int64_t batch_size, uint64_t seed) = 0;
  /// The fixed eval set at `length`: `wanted` examples (text: fewer when the corpus has fewer
  /// windows), a pure function of (seed, length, wanted) and disjoint from every train batch.
  virtual Batch eval_set(int64_t length, int64_t wanted, uint64_t seed) = 0;
  /// The validation set used to tune hyperparameters (`sweep.tune`) at `length`: `wanted`
  /// examples (text: fewer when the corpus has fewer), a pure function of its arguments, and
  /// disjoint from eval_set(L, eval_examples, seed) for every L in `eval_lengths`, so choosing on
  /// it does not peek at the reported numbers. Synthetic tasks draw from the train hash buckets
  /// with their own stream; text takes validation-document windows that no eval window touches.
  /// Throws DataError when nothing is left (text: eval.examples uses every window).
  virtual Batch validation_set(int64_t length, int64_t wanted, uint64_t seed,
                               const std::vector<int64_t>& eval_lengths, int64_t eval_examples);
  /// Task metrics from accumulated sums, e.g. {"accuracy": 0.93, "loss": 0.21}.
  virtual std::map<std::string, double> metrics(const ScoreSums& sums) const = 0;
  /// The metric reports plot and rank by ("accuracy", "bits_per_byte", ...).
  virtual std::string primary_metric() const = 0;
  virtual bool higher_is_better() const { return true; }
  /// Whether every position is a target (language modelling: text): eval then keeps a
  /// per-position loss curve and may score sliding windows (`eval.stride`).
  virtual bool per_position_curve() const { return false; }
  /// Whether eval keeps the accuracy at each position (ScoreSums::position_correct; reported as
  /// LengthResult::position_accuracy and plotted): tasks that score a state at every position
  /// (word_problem), where accuracy against position shows how far past training a model holds.
  virtual bool position_accuracy_curve() const { return false; }
  /// Whether token ids are bytes (vocab 256 holding text: text, passkey, niah, copy), so a prompt
  /// and a continuation can be shown as text (`hybridlab generate`). Default: opaque token ids.
  virtual bool byte_level() const { return false; }
  /// When token ids are subword units of text (text with a BPE `task.tokenizer`): the bytes each
  /// id stands for, [vocab_size()] int64, so that eval sums the bytes its scored targets cover
  /// (ScoreSums::target_bytes) and reports per-byte metrics that compare across tokenizers.
  /// Undefined (the default) when a token is a byte or not text.
  virtual torch::Tensor token_bytes() const { return {}; }
  /// The tokenizer that maps text to this task's ids and back (text with a BPE
  /// `task.tokenizer`), so `hybridlab generate` takes and prints text. Null (the default) when a
  /// token is a byte (byte_level()) or an opaque id.
  virtual std::shared_ptr<const tokenizer::BpeTokenizer> text_tokenizer() const { return nullptr; }
  /// Whether the scored positions of every example are one contiguous answer span (passkey's key,
  /// niah's value, a copied string), so the answer can be decoded instead of teacher forced
  /// (`eval.scoring: generated`). Tasks scoring interleaved positions (MQAR queries) or every
  /// position (text) return false. Default: false.
  virtual bool answer_span() const { return false; }
  /// Whether the task scores a sequence autoencoder rather than a causal language model (MAD's
  /// compression): the model must be built with `model.head: autoencoder` (its last position
  /// pools the row, an MLP decodes every position from it), and a model with that head serves no
  /// other task. read_experiment refuses a mismatch at model.head. Default: false.
  virtual bool autoencoder() const { return false; }
  /// Where training batches carry Batch::document_starts that the model must honour (text with
  /// `task.packing: documents`): "file:line:col: task.packing", for messages; "" otherwise.
  virtual std::string packed_documents_setting() const { return ""; }
  /// Chance level of each metric: what a model that ignores the context scores (e.g. MQAR
  /// accuracy 1/(V/2), copy token accuracy 1/alphabet, text bits per byte = the unigram entropy
  /// of the training bytes). Metrics left out have no stated chance level. Valid after prepare().
  virtual std::map<std::string, double> chance_levels() const { return {}; }
};

/// One entry of the task registry.
struct TaskType {
  std::string name;
  std::string description;  ///< one line, with the source paper
  /// Reads the task's keys from `task:` (all but `name`), calls finish(), and returns the task.
  /// Problems are recorded in the config (Config::raise_errors throws them).
  std::function<std::shared_ptr<Task>(Section&, const TaskContext&)> read;
};

/// The longest of `task`'s training lengths (Task::train_lengths), in tokens: what the model is
/// built for and what reports call the training length.
int64_t longest_train_length(const Task& task);

/// The registered tasks, sorted by name (mqar, passkey, copy, selective_copy, niah, text).
const std::vector<TaskType>& task_types();

/// Reads `task:` (name + the task's keys, and `mixture:` when training mixes several settings
/// of the task: tasks/mixture.cpp, docs/experiments.md). An unknown name records an error listing
/// the valid names and returns nullptr.
std::shared_ptr<Task> read_task(Section s, const TaskContext& ctx);

// ---- helpers shared by the generators (exposed for tests)

/// A 64-bit seed derived from `seed` and up to three stream ids (splitmix64 mixing).
uint64_t derive_seed(uint64_t seed, uint64_t a, uint64_t b = 0, uint64_t c = 0);

/// Number of hash buckets; bucket 0 is the eval split, the rest the train split (1/16 held out).
constexpr int64_t kSplitBuckets = 16;

/// The split bucket of each row of `tokens` [B,T] (int64 [B], in [0, kSplitBuckets)): a hash of
/// the whole row, so equal examples always land in the same split.
torch::Tensor split_bucket(const torch::Tensor& tokens);

}  // namespace hybridlab
