#pragma once
// The run folder as a typed record: the one reader and the one writer of its files.
//
// runs/<experiment>/<run>/ holds
//   source.yaml    the run's config as given (extends merged, overrides and sweep applied, no
//                  `sweep:` section, plugin paths absolute): what the run executes
//   run.json       who the run is: experiment, run name, labels, the experiment file's folder
//   config.yaml    the resolved config with every default (written when the run starts)
//   status.json    state, error, wall time, pid of the last writer
//   results.json   the train summary and every metric at every eval length
//   metrics.jsonl  per-step training log (written by the trainer)
//   checkpoint/    state.pt (written by the trainer)
//   lock           the per-run lock (flock), holding the pid of its holder
//   fault.txt      where a crashed child was ("in layer 2 (...)"), written by its signal handler
//                  and removed by the parent once read into status.json
// Every file is written atomically (temp file + rename). No other code reads or writes
// status.json, run.json, source.yaml or results.json.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hybridlab/error.h"
#include "hybridlab/evaluator.h"
#include "hybridlab/experiment.h"

namespace hybridlab {

/// The life of a run. `trained`: training reached train.steps, not evaluated yet (`hybridlab
/// train`); `finished`: trained and evaluated, final.
enum class RunState { kNew, kRunning, kTrained, kFinished, kFailed, kInterrupted };

/// "new", "running", "trained", "finished", "failed", "interrupted".
std::string run_state_name(RunState s);

/// status.json.
struct RunStatus {
  RunState state = RunState::kNew;
  std::string error;  ///< why it failed or stopped ("" otherwise)
  double wall_s = 0;  ///< seconds of the last execution (0 = unknown)
  int64_t pid = 0;    ///< process that wrote the status (0 = unknown)
};

/// run.json: who the run is, written by whoever prepares the folder.
struct RunIdentity {
  std::string experiment;                                   ///< experiment name
  std::string run;                                          ///< variant name (= folder name)
  std::vector<std::pair<std::string, std::string>> labels;  ///< short key -> value text
  std::string config_dir;  ///< absolute folder of the experiment file (relative data paths)
  /// Label keys set by `sweep.tune` -> the value labels of that key's grid, in file order; a run
  /// with any is also scored on the task's validation split.
  std::vector<std::pair<std::string, std::vector<std::string>>> tuned;
};

/// The `train` part of results.json. final_loss and tokens_per_s are computed from
/// metrics.jsonl, so they depend on the config alone, not on where a run was interrupted.
struct TrainRecord {
  int64_t steps = 0;
  int64_t resumed_from = 0;  ///< step of the checkpoint the last execution resumed from
  double final_loss = 0;     ///< mean train loss of the last train.log_every steps (nats/token)
  double tokens_per_s = 0;   ///< training tokens per second over all logged steps
  double wall_s = 0;         ///< seconds of the last execution's training
  double model_s = 0;        ///< seconds in forward + backward of the last execution
};

/// The trained weights evaluated with some settings changed (`eval.variants`, `eval --variant`).
struct EvalVariantResult {
  std::string name;
  std::string set;                 ///< its settings, "key=value, ..." (eval_variant_text)
  std::vector<LengthResult> eval;  ///< ascending length
  /// The same settings one by one: dotted key -> value as YAML flow text ("16", "[256]"), so that
  /// a report can plot against a setting (e.g. task.num_kv_pairs).
  std::vector<std::pair<std::string, std::string>> settings;
};

/// What `model summary` counts of a run's model (ModelSummary at the training length), kept so
/// that reports can plot a metric against the model's make-up, e.g. recall against recurrent
/// state size (Based, Arora et al. 2024, Fig. 2) or against the share of attention layers.
struct ModelRecord {
  int64_t layers = 0;
  double attention_share = 0;          ///< share of layers with pairwise attention
  double position_share = 0;           ///< ModelSummary::position_share
  int64_t recurrent_state_floats = 0;  ///< fixed decoding state per sequence (recurrent + conv)
  int64_t kv_floats_per_token = 0;     ///< KV cache floats per cached token per sequence
};

/// The value of model quantity `name` (model_quantities()) for a run with `params` parameters and
/// model record `m`; NaN for an unknown name.
double model_quantity(const std::string& name, int64_t params, const ModelRecord& m);

/// results.json.
struct RunResults {
  RunIdentity id;  ///< experiment, run, labels (config_dir is not stored here)
  std::string task;
  std::string primary_metric;
  bool higher_is_better = true;
  int64_t train_length = 0;  ///< tokens: task.seq_len, or the longest setting of a task mixture
  int64_t params = 0;
  std::optional<ModelRecord> model;  ///< absent in results written before it was recorded
  std::optional<TrainRecord> train;
  std::vector<LengthResult> eval;  ///< ascending length
  /// Chance level per metric (Task::chance_levels), for the report's `at chance` flag.
  std::map<std::string, double> chance;
  std::vector<std::pair<std::string, std::vector<std::string>>> tuned;  ///< as RunIdentity::tuned
  /// Tuned runs only: the validation-split score at the training length (evaluate_validation).
  std::vector<LengthResult> validation;
  std::vector<EvalVariantResult> variants;  ///< evaluation variants, in the order evaluated
};

/// Result of reading a run folder. `results_error` says why a results.json present on disk could
/// not be read (the report lists it) and `results` is then empty.
struct RunRecord {
  std::string dir;
  RunStatus status;
  std::optional<std::string> source;  ///< source.yaml text
  std::optional<RunIdentity> identity;
  std::optional<RunResults> results;
  std::string results_error;
};

/// One run folder: the one reader and writer of its records. Cheap to construct; reads the disk
/// on every call. Writers throw UserError (path, system error, free space) when the disk fails.
class RunFolder {
 public:
  explicit RunFolder(std::string dir);
  const std::string& dir() const { return dir_; }
  /// The whole record; missing files are empty fields, a damaged status.json reads as `new`.
  /// Every reader below throws UserError naming the file when a symbolic link, a folder or a
  /// special file stands in its place (require_plain_file, util/atomic_file.h).
  RunRecord read() const;
  /// status.json; absent or unparseable (a crashed write) reads as `new`.
  RunStatus status() const;
  /// source.yaml as written; nullopt when absent.
  std::optional<std::string> source() const;
  /// source.yaml as source() reads it, after checking it against the SHA-1 digest run.json
  /// recorded when it was written (folders written before the digest existed are not checked).
  /// Throws UserError naming the file when it was edited since.
  std::optional<std::string> verified_source() const;
  /// config.yaml: the resolved config the run used (absent before the run started).
  std::optional<std::string> resolved_config() const;
  /// run.json; nullopt when absent or unparseable.
  std::optional<RunIdentity> identity() const;
  /// results.json; throws UserError naming the file when it exists but cannot be parsed.
  std::optional<RunResults> results() const;

  void write_status(const RunStatus& s) const;
  /// Writes status.json with this process's pid.
  void write_status(RunState state, const std::string& error = "", double wall_s = 0) const;
  void write_source(const std::string& source_yaml, const RunIdentity& id) const;
  void write_config(const std::string& resolved_yaml) const;
  void write_results(const RunResults& r) const;
  /// Removes what a fresh start must not see: checkpoint/, metrics.jsonl, results.json.
  void clear_training() const;

  std::string metrics_path() const;
  std::string checkpoint_path() const;  ///< checkpoint/state.pt
  std::string fault_note_path() const;  ///< fault.txt (see the file list above)

 private:
  std::string dir_;
};

/// One line of metrics.jsonl: a training step's figures, or an evaluation during training
/// (train.eval_every). metrics_line() writes it and read_metrics() reads it: the one place its
/// keys are named.
struct MetricsRow {
  int64_t step = 0;             ///< steps done when the line was written (from 1)
  bool has_loss = false;        ///< a training step's line (it has a `loss` key)
  double loss = 0;              ///< train loss (nats/token); NaN when logged as null (diverged)
  double lr = 0;                ///< the step's learning rate
  double grad_norm = 0;         ///< the gradient norm before clipping
  double tokens_per_s = 0;      ///< the step's throughput; 0 when not logged
  double time_s = 0;            ///< seconds since training (re)started
  int64_t ranks = 0;            ///< data parallel: the number of ranks (0: one process)
  double allreduce_wait_s = 0;  ///< data parallel: seconds the step waited for the all-reduce
  int64_t eval_length = 0;      ///< an evaluation's line: the length it scored (tokens), else 0
  std::map<std::string, double> eval;  ///< its metrics by name (the `eval_<name>` keys)
  std::string line;  ///< the line as read (kept when the file is rewritten); "" when built
};

/// The JSON object of `row` on one line (no newline, keys sorted): `step`, then `loss`, `lr`,
/// `grad_norm`, `tokens_per_s`, `time_s` (and `ranks`, `allreduce_wait_s` when ranks > 0) for a
/// training step (has_loss), or `eval_length` and `eval_<metric>` for an evaluation. A NaN loss
/// is written as null. Throws nothing.
std::string metrics_line(const MetricsRow& row);

/// Every well-formed line of a metrics.jsonl at `path`, in file order: a half-written last line
/// (a killed run) or a line that is not a JSON object is skipped; a missing file has no rows.
/// Throws nothing for malformed lines; what the caller's require_plain_file refuses is its own.
std::vector<MetricsRow> read_metrics(const std::string& path);

/// runs/<experiment>/expect.yaml: the experiment's claims (`expect:`) as written, a YAML list of
/// strings. Kept beside the runs rather than in each source.yaml, so that editing a claim never
/// makes a finished run "changed"; every `hybridlab run` of the experiment rewrites it (removes it
/// when there are none). Throws UserError when the write fails.
void write_expectations(const std::string& experiment_dir, const std::vector<std::string>& claims);

/// The claims of write_expectations; none when the file is absent. Throws UserError naming the
/// file when it is not a YAML list of strings.
std::vector<std::string> read_expectations(const std::string& experiment_dir);

/// runs/<experiment>/report.yaml: what the experiment asks its report for (`report:`: plots,
/// the analysis of every run), kept beside the runs like expect.yaml, so that editing it reruns
/// nothing; every `hybridlab run` rewrites it (removes it when there is nothing). Throws
/// UserError when the write fails.
void write_report_requests(const std::string& experiment_dir, const ReportRequests& r);

/// The requests of write_report_requests; none when the file is absent. Throws UserError naming
/// the file when it cannot be read as such.
ReportRequests read_report_requests(const std::string& experiment_dir);

/// Thrown when another live process holds a run folder's lock.
class RunBusy : public UserError {
 public:
  using UserError::UserError;
  ~RunBusy() override;
};

/// The per-run lock: flock(LOCK_EX) on <run_dir>/lock, which then holds the holder's pid. The
/// kernel drops the lock when the holder dies, so a lock left by a killed process is taken over
/// without any staleness check. The descriptor is close-on-exec except for the one child a
/// scheduler hands it to (inherit_into_child), so the lock lives exactly as long as that child.
class RunLock {
 public:
  /// Takes the lock (creating the folder). Throws RunBusy naming the holder's pid and the lock
  /// file when another process holds it, UserError when the lock file cannot be created.
  explicit RunLock(const std::string& run_dir);
  /// Adopts descriptor `fd`, inherited from the parent, that must already hold the lock of
  /// `run_dir`; records this process's pid. Throws UserError when it does not.
  static RunLock adopt(int fd, const std::string& run_dir);
  RunLock(RunLock&& o) noexcept;
  RunLock& operator=(RunLock&&) = delete;
  RunLock(const RunLock&) = delete;
  ~RunLock();  ///< closes the descriptor (the lock stays with any child that inherited it)
  int fd() const { return fd_; }
  /// In a forked child before exec: keeps the descriptor open across exec.
  void inherit_into_child() const;
  /// The pid recorded in <run_dir>/lock (0 when unknown).
  static int64_t holder(const std::string& run_dir);

 private:
  RunLock(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  void record_pid() const;
  int fd_ = -1;
  std::string path_;
};

}  // namespace hybridlab
