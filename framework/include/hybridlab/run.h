#pragma once
// Running experiments: the run folder is the unit.
//
// The parent expands the sweep (sweep.h), writes each run's source config into its folder under
// the run's lock, and hands the folder to a child process (`hybridlab run-folder DIR`), which
// executes that folder and nothing else: it never reads the experiment file again. `run`,
// `train`, `run --only`, `eval` and the report all go through the same record (run_record.h) and
// the same rule for an existing folder (plan_run). "Same" compares source configs without their
// `eval.variants`, which are evaluated on the trained weights and never retrain a run:
//   finished          -> skipped when its source is the same (`run` first evaluates the eval
//                        variants it has no results for; its training results stay untouched),
//                        refused (never overwritten) else;
//   trained           -> the same, except that `run` evaluates it;
//   interrupted, failed, running with a dead writer
//                     -> resumed from its checkpoint when its source is the same, started afresh
//                        (checkpoint, metrics, results removed) when the configuration changed;
//   locked by a live process -> refused, naming that process.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "hybridlab/config.h"
#include "hybridlab/experiment.h"
#include "hybridlab/run_record.h"
#include "hybridlab/sweep.h"

namespace hybridlab {

class ProcessGroup;

struct RunRequest {
  std::string experiment_file;
  std::vector<std::string> overrides;  ///< command-line key=value, applied before the sweep
  std::string runs_dir = "runs";
  int64_t jobs = 1;
  int64_t shard_index = 0, shard_count = 1;
  std::string only;         ///< run just this variant, in this process
  std::string self_exe;     ///< the CLI binary, for child processes ("" = /proc/self/exe)
  bool in_process = false;  ///< run variants in this process (no crash isolation)
  bool quiet = false;
  bool train_only = false;  ///< `hybridlab train`: no final eval; runs end `trained`
};

struct SweepOutcome {
  int64_t finished = 0, skipped = 0, failed = 0, interrupted = 0;
  std::string experiment_dir;
  std::vector<std::pair<std::string, std::string>> failures;  ///< run name -> error
};

/// Runs (train + eval) every variant of this shard (or just `only`) that is not final, each in a
/// child process (`--jobs N` at a time, threads split between them) unless `in_process` or
/// `only`; records failures and goes on. Before any folder is written, every distinct model is
/// built once in a forked process: a bad config is one UserError (exit 2), a build that crashes
/// (a plugin factory's segfault) is recorded as that variant's failure, naming its schemes.
/// Started as one rank of a data-parallel job (read_distributed_env(): torchrun's variables),
/// every variant runs in this process on all ranks together (see train()); rank 0 checks,
/// claims, writes and evaluates, the config must be the same on every rank (UserError on the
/// rank that differs), `jobs` must be 1, and the first failing run ends the sweep.
/// Ctrl-C / SIGTERM are forwarded to the children, which checkpoint and stop; a child dies with
/// its parent (PR_SET_PDEATHSIG). Throws UserError for bad input and an unknown `only`.
SweepOutcome run_experiment(const RunRequest& req);

/// The checks `run` makes of a file before it writes anything, for the commands that only read
/// an experiment (`config show`, `sweep list|expand`, `model summary`), so that each refuses what
/// `run` refuses, at the same file:line: the whole file read strictly, then every variant of the
/// sweep built with its eval variants and its task prepared (a corpus opened) in the pre-flight
/// child (run_experiment). What depends on this machine's state is left to `run`: models are
/// built on the CPU whatever runtime.device says, and a train.init_from source need not exist
/// yet (a two-stage experiment is read before its first stage runs). `experiment_file` locates
/// relative paths. Writes nothing. Throws the first
/// ConfigError / DataError / UserError, and PluginError ("run 'NAME': crashed while building its
/// model: ...") when a variant's plugin code crashed in its supervised child.
void check_experiment(const Config& cfg, const std::string& experiment_file);

/// Throws ConfigError (naming file:line of train.batch_size and the run) unless `world_size`
/// divides every variant's train.batch_size: a data-parallel job splits the global batch evenly.
void check_batch_split(const Config& cfg, const std::vector<Variant>& variants,
                       const SweepOptions& sweep, int64_t world_size);

/// The checks a launcher makes before it starts `world_size` ranks of `req` (nothing written):
/// `jobs` == 1, check_batch_split and the pre-flight build of every requested variant (see
/// run_experiment). Returns the experiment's folder under the runs folder (where rank 0 writes).
/// Throws what they throw (ConfigError, PluginError, DataError, UserError).
std::string check_data_parallel(const RunRequest& req, int64_t world_size);

/// How `hybridlab run --nproc-per-node N` starts the ranks of a data-parallel job on this host.
struct LaunchOptions {
  int64_t nproc_per_node = 1;  ///< ranks on this host (LOCAL_WORLD_SIZE)
  int64_t nnodes = 1;          ///< hosts; WORLD_SIZE = nnodes * nproc_per_node
  int64_t node_rank = 0;       ///< this host's index; RANK = node_rank * nproc_per_node + local
  std::string master_addr = "127.0.0.1";  ///< host of rank 0 (MASTER_ADDR)
  int master_port = 0;  ///< MASTER_PORT; 0 = a free port on a single host, 29500 on several
  std::vector<std::string> command;  ///< what every rank runs (rank_command)
  /// The experiment's folder under the runs folder ("" = unknown): when rank 0 dies by a signal,
  /// the runs it was writing (status `running` with its pid) are recorded `failed` naming it.
  std::string experiment_dir;
};

/// Starts the ranks of this host as child processes with torchrun's variables (RANK, WORLD_SIZE,
/// LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT; OMP/OpenBLAS threads split between
/// the local ranks unless set) and waits for them. Ctrl-C / SIGTERM are forwarded once to every
/// rank (they stop after the same step, rank 0 checkpoints). When a rank fails or dies, the
/// launcher names it and stops the others (SIGTERM, SIGKILL after 30 s; a rank killed so is not
/// the cause). Returns the exit code: 0 when every rank succeeded, else the likeliest cause's
/// (128 + signal for a killed rank, 2 bad input, 1 a lost peer; 130 when they were interrupted).
/// Throws UserError when a process cannot be started or, on node 0, when the master port is in
/// use (at once, before any rank starts).
int launch_ranks(const LaunchOptions& o);

/// `argv` without the launcher's options (--nproc-per-node, --nnodes, --node-rank,
/// --master-addr, --master-port; "--opt value" and "--opt=value" forms): the command each rank
/// runs.
std::vector<std::string> rank_command(const std::vector<std::string>& argv);

/// What plan_run decided for one folder.
enum class RunAction { kSkip, kRefuse, kFresh, kResume };
struct RunPlan {
  RunAction action = RunAction::kFresh;
  std::string message;  ///< for the user: why skipped / refused / restarted ("" when plain)
};

/// The one rule for an existing run folder (see the top of this file), for a run whose source
/// config is `source` (run_source_yaml). Pure: reads nothing but `rec`.
RunPlan plan_run(const RunRecord& rec, const std::string& source, bool train_only);

/// Applies plan_run to `folder` (the caller holds its lock): for kFresh clears the old training
/// files; for kFresh and kResume writes source.yaml and run.json. Returns the plan.
RunPlan prepare_run_folder(const RunFolder& folder, const std::string& source,
                           const RunIdentity& id, bool train_only);

/// The text of a run's source.yaml: `variant_cfg`'s tree without `sweep:`, with relative
/// `plugins.paths` made absolute (against the experiment file's folder).
std::string run_source_yaml(const Config& variant_cfg);

struct ExecuteOptions {
  bool train_only = false;  ///< stop after training: state `trained`
  bool quiet = false;
  int64_t threads = 0;     ///< >0: overrides runtime.threads (a scheduler's split), not recorded
  int64_t stop_after = 0;  ///< stop after this many steps in this process (tests); 0 = none
  /// One rank of a data-parallel job (see train()): rank 0 executes the folder as usual; the
  /// other ranks only train with it and write nothing.
  ProcessGroup* group = nullptr;
};

/// Executes one prepared run folder in this process (the caller holds its lock): builds the run
/// from source.yaml + run.json, trains (resuming from its checkpoint), evaluates, and writes
/// config.yaml, results.json and status.json, then evaluates every `eval.variants` entry. A
/// folder already `finished` only gets the eval variants it has no results for (its status and
/// training results stay). Throws what training throws (Interrupted, TrainingDiverged,
/// UserError, ...) after recording it in status.json.
void execute_run_folder(const RunFolder& folder, const ExecuteOptions& opts = {});

/// `hybridlab eval`: evaluates a trained or finished run again (under its lock), optionally at
/// other lengths (tokens). Eval results are added to results.json (a length evaluated again is
/// replaced); the training summary is kept; the run ends `finished`. With `variants`, only those
/// evaluation variants are evaluated (added beside the others, a variant of the same name
/// replaced) and the trained setting's results are left as they are. Throws UserError for a
/// folder that is not a run, not trained to the end, or locked by another process, and for a
/// variant that changes the model's parameters (naming the parameter).
void eval_run_folder(const std::string& run_dir, const std::vector<int64_t>& lengths = {},
                     const std::vector<EvalVariant>& variants = {});

/// The grace a run's child process allows itself after a stop request or its parent's death:
/// HYBRIDLAB_STOP_GRACE (seconds, a number in (0, 86400], read as the config reads numbers), else
/// 120, which covers a training step and a checkpoint write at the sizes this project trains.
/// Throws UserError for a malformed or out-of-range value.
double stop_grace_seconds();

/// Starts a thread that ends this process `grace_s` seconds after a stop request
/// (stop_requested()) or the death of its parent, if it is still running then: a step that never
/// ends (a hung plugin or library) would otherwise keep it alive, holding its run's lock, with
/// nothing left to stop it but SIGKILL. It records `interrupted` in `run_dir`'s status.json,
/// naming the grace, and exits with code 130; the lock goes with the process, and a rerun resumes
/// from the last checkpoint. The parent's death also counts as a stop request when its signal
/// (PR_SET_PDEATHSIG) was lost. For the child `run` starts per run (`run-folder`).
void end_after_stop_grace(const std::string& run_dir, double grace_s);

/// Loads `path` (following `extends:`) and applies `key=value` overrides in order. Throws
/// ConfigError located at the sweep's line for an override of a key the sweep varies (a grid, zip
/// or tune key, a key inside or holding one, or train.seed beside `seeds:`): every variant would
/// set it again and the override would be discarded unseen.
Config load_experiment_config(const std::string& path, const std::vector<std::string>& overrides);

/// What export_run wrote.
struct ExportedRun {
  std::string out_dir;
  int64_t tensors = 0;
  int64_t bytes = 0;  ///< of model.safetensors
};

/// `hybridlab export RUN_DIR --format hf-fla OUT_DIR`: the model of a trained or finished run as
/// `config.json` + `model.safetensors` in flash-linear-attention's `gated_deltanet` layout
/// (export_hf_fla, hybridlab/interop.h), with max_position_embeddings the run's longest train or
/// eval length. The files are written into a temporary sibling folder, renamed to `out_dir` when
/// complete; `out_dir` must not exist or be an empty folder. Throws UserError (nothing written)
/// for an unknown format, an `out_dir` that holds files, a folder that is not a trained run, and
/// what export_hf_fla refuses.
ExportedRun export_run(const std::string& run_dir, const std::string& format,
                       const std::string& out_dir);

}  // namespace hybridlab
