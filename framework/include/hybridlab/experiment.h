#pragma once
// An experiment file read strictly: model + task + train + eval + runtime + plugins (+ sweep).
//
// read_experiment() is the one place that reads every top-level section. It records every
// problem in the config and throws one ConfigError listing them all (file:line:col, key, what
// was expected, nearest valid key). Sweep variants are validated too: each variant's config is
// read in full, so a sweep key that is not a config key is reported with a suggestion.
// Expanding a sweep is the layer below (sweep.h); running one is the layer above (run.h).

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "hybridlab/analysis_options.h"
#include "hybridlab/config.h"
#include "hybridlab/model.h"
#include "hybridlab/runtime.h"
#include "hybridlab/sweep.h"
#include "hybridlab/task.h"

namespace hybridlab {

struct ModelOptions;

/// `train:` — AdamW (Loshchilov & Hutter 2019) with linear warmup then cosine decay to
/// lr * min_lr_ratio, global-norm gradient clipping.
struct TrainOptions {
  int64_t steps = 200;
  int64_t batch_size = 16;
  double lr = 1e-3;
  double min_lr_ratio = 0.1;  ///< final lr = lr * min_lr_ratio
  int64_t warmup_steps = 20;
  double weight_decay = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double grad_clip = 1.0;         ///< max global L2 norm of the gradients; 0 = off
  int64_t seed = 0;               ///< model init and data order; `sweep.seeds` sets it
  int64_t eval_every = 0;         ///< steps between evals at seq_len during training; 0 = none
  int64_t checkpoint_every = 50;  ///< steps between checkpoints; 0 = only at the end / Ctrl-C
  int64_t log_every = 10;         ///< steps between plain log lines (no terminal)
  /// A trained or finished run folder whose trained weights start this run ("" = random init):
  /// continued training, e.g. fine-tuning at a longer length after a RoPE rescaling (Chen et al.
  /// 2023). Relative paths are against the experiment file's folder; "{seed}" stands for
  /// train.seed (each seed continues its own run). The optimizer starts fresh.
  std::string init_from;
  /// Whether init_from may name a run whose model has parameters this one lacks (e.g. GA -> G, a
  /// learned position table into a RoPE model): they are dropped. Refused when false, so that
  /// no trained weight is lost without being asked for.
  bool init_from_partial = false;
};

/// One `eval.variants` entry: the trained weights evaluated with some settings changed (e.g. a
/// RoPE scaling applied only at inference, Chen et al. 2023, Peng et al. 2023).
struct EvalVariant {
  std::string name;                                     ///< a safe folder name, not "trained"
  std::vector<std::pair<std::string, YAML::Node>> set;  ///< dotted key -> value, in file order
  Location where;                                       ///< where the variant is written
};

/// How eval examples are scored. kTeacherForced: one forward pass over the whole example, each
/// scored position's argmax against its target. kGenerated: the answer span is greedily decoded
/// from the tokens before it and compared with the reference (exact match), as passkey and RULER
/// are scored in the literature (Mohtashami & Jaggi 2023; Hsieh et al. 2024).
enum class EvalScoring { kTeacherForced, kGenerated };

/// The `eval.scoring` spelling of `s` ("teacher_forced", "generated").
const char* eval_scoring_name(EvalScoring s);

/// `eval:` — the lengths to test and the fixed eval set at each.
struct EvalOptions {
  std::vector<int64_t> lengths;  ///< tokens; default [task.seq_len]
  int64_t examples = 128;        ///< examples per length (text: windows, capped by the corpus)
  int64_t batch_size = 16;
  int64_t max_batch_tokens = 32768;       ///< batch shrinks at long lengths to stay under this
  int64_t seed = 1234;                    ///< eval set seed (the same for every run of a sweep)
  int64_t examples_during_training = 32;  ///< examples per eval at `train.eval_every`
  /// Sliding-window evaluation (language modelling only): each eval window of L tokens scores
  /// only its last `stride` tokens, so every scored token sees at least L - stride tokens of
  /// context; stride 1 gives each exactly L - 1 (Press et al. 2022, "Train Short, Test Long",
  /// §4 and App. B). 0 (default): non-overlapping evaluation, every token of the window scored.
  int64_t stride = 0;
  /// `eval.scoring`: teacher_forced (default) or generated (tasks with Task::answer_span() only).
  EvalScoring scoring = EvalScoring::kTeacherForced;
  std::vector<EvalVariant> variants;  ///< `eval.variants`, in file order

  /// Rows per evaluation batch at `length` tokens for a model with `vocab_size` outputs:
  /// batch_size, shrunk so that rows × length <= max_batch_tokens and the fp32 logits of one
  /// batch, [rows, length, vocab_size], stay within 256 MiB (with GPT-2's 50,257 tokens that is
  /// 1,335 tokens a batch; scoring holds the logits and their log-softmax at once). At least 1.
  int64_t batch_rows(int64_t length, int64_t vocab_size) const;
};

/// Whether `dotted_key` may change at evaluation (an eval variant's key): the input scheme's
/// settings (`model.position[.KEY]`); a key of a mixer's section that the mixer type declares
/// (`model.NAME.KEY[...]`: attention's `position` subtree and `window`, Gated DeltaNet's
/// `chunk_size`, what a mixer plugin's record lists); the same keys in a layer's override
/// (`model.overrides.N.KEY[...]`, any key some mixer type declares: the layer's own reader then
/// refuses one its mixer lacks); the task's keys other than `name` and `mixture` (e.g. MQAR's
/// `num_kv_pairs`: recall of more pairs than trained), `eval.lengths`, `eval.stride`
/// (sliding-window scoring) and `eval.scoring` (teacher-forced or generated answers).
/// Nothing else: other keys change parameter shapes or training. (A scheme with parameters of its
/// own, e.g. a learned table, is refused later, when the variant's parameters are matched against
/// the trained ones.) `cfg` gives the plugin search path (`plugins.paths`), searched only for a
/// key no built-in mixer type decides. Throws nothing.
bool eval_safe_key(const Config& cfg, const std::string& dotted_key);

/// The keys eval_safe_key(cfg, ·) accepts, as one line for messages and docs.
std::string eval_safe_keys_text(const Config& cfg);

/// Throws UserError naming the variant, the key and eval_safe_keys_text(cfg) when a key of `v` is
/// not eval_safe_key(cfg, ·). For variants from the command line (parse_eval_variant), checked
/// against the run's configuration.
void check_eval_variant(const Config& cfg, const EvalVariant& v);

/// Reads `eval.variants` (a map name -> {dotted.key: value}); records problems in the config
/// (bad names, empty variants, keys eval_safe_key() refuses, at file:line) for the caller to raise.
std::vector<EvalVariant> read_eval_variants(Section s);

/// `base` with the settings of `v` applied (their locations point at the variant).
Config eval_variant_config(const Config& base, const EvalVariant& v);

/// The settings of `v` one by one: dotted key -> value in YAML flow style ("16", "[256]").
std::vector<std::pair<std::string, std::string>> eval_variant_settings(const EvalVariant& v);

/// The settings of `v` as one line, "key=value, key=value" (values in YAML flow style).
std::string eval_variant_text(const EvalVariant& v);

/// Parses the command-line form `NAME=KEY=VALUE[,KEY=VALUE...]` (a comma inside [] or {}
/// belongs to its value; values are YAML, e.g. `ntk=model.attention.position.rope_scaling={type:
/// ntk, factor: 4}`), each value read as a file's value is (Config::apply_override: no tags, no
/// duplicate keys). Throws UserError for a malformed text, an unsafe name or a key given twice;
/// ConfigError for a value a file would refuse. Which keys may change depends on the run's mixers:
/// check_eval_variant() with the run's configuration.
EvalVariant parse_eval_variant(const std::string& text);

/// One plot the report draws because the experiment asks for it (`report.plots`): `metric` of
/// every variant against `x`, one line per combination of the `series` labels, 95% error bars
/// over seeds.
struct PlotRequest {
  /// A swept key (dotted, "model.gated_deltanet.head_dim", or its label, "head_dim"), a key set
  /// by eval variants ("task.num_kv_pairs"), or a model quantity (model_quantities()).
  std::string x;
  std::string metric;  ///< "" = the task's primary metric
  /// Eval length (tokens); 0 = each variant's training length, or the one length a variant was
  /// scored at when it has none there (an eval variant with eval.lengths of its own).
  int64_t length = 0;
  /// Label keys whose combinations make the lines; empty = every label but x's (and `eval`
  /// when x is set by eval variants).
  std::vector<std::string> series;
};

/// `report:` — what the report draws and measures besides its defaults.
struct ReportRequests {
  std::vector<PlotRequest> plots;  ///< `report.plots`
  /// `report.analysis`: knock-outs of every finished run (docs/analysis.md), run after the sweep
  /// and summarised per variant in the report (how much of the damage each layer carries).
  bool analysis = false;
  AnalyzeOptions analyze;  ///< its options (plots, heads and quiet are the report's own)
  /// `report.best_of_seeds`: beside each task's table of means, the best single seed of each
  /// variant, for comparison with sources that report the best of n runs (Grazzi et al. 2025,
  /// arXiv 2411.12537, Table 3 and Fig. 4: best of 3). Claims still judge the means.
  bool best_of_seeds = false;
  bool empty() const { return plots.empty() && !analysis && !best_of_seeds; }
};

/// The names under which a report can plot against a run's model (PlotRequest::x): "params",
/// "layers", "attention_share", "position_share", "recurrent_state_floats" and
/// "kv_floats_per_token", as `hybridlab model summary` counts them.
const std::vector<std::string>& model_quantities();

struct Experiment {
  std::string name;  ///< `name:`, default: the file stem; always a safe folder name
  std::string description;
  std::shared_ptr<ModelOptions> model;
  std::shared_ptr<Task> task;
  TrainOptions train;
  EvalOptions eval;
  RuntimeOptions runtime;
  SweepOptions sweep;
  /// `expect:` — claims about the report's cells, as written (grammar: hybridlab/claims.h; checked
  /// against the variants, metrics and lengths when the sweep is validated).
  std::vector<std::string> expect;
  /// `report:` — plots the report draws besides its defaults (checked against the sweep, the
  /// eval variants and the task's metrics when the experiment is read) and the analysis of every
  /// run.
  ReportRequests report;
  Config config;  ///< the config read (its resolved() is what the run used)
};

/// Reads and validates every section of `cfg`; throws one ConfigError listing every problem.
/// `validate_sweep` also reads every sweep variant (off when reading one variant of a sweep).
/// `config_dir` is the folder relative data paths start from ("" = the folder of cfg.file());
/// a run folder's source.yaml passes its experiment file's folder.
Experiment read_experiment(Config cfg, bool validate_sweep = true,
                           const std::string& config_dir = "");

/// The lengths the model must serve: task.seq_len for training, the longest of it and
/// eval.lengths as the maximum (tokens). `exp.task` must be set.
ModelBuildContext model_build_context(const Experiment& exp);

/// Why one sequence of `length` tokens cannot be evaluated (or generated) with `exp`'s model on
/// this machine: "length L needs at least X GiB to evaluate one sequence, this machine has Y" from
/// a lower bound on weights and activations; "" when it fits or the memory is unknown.
std::string length_memory_problem(const Experiment& exp, int64_t length);

/// The experiment name for a file: `name:` if set, else the file stem ("quickstart") through
/// folder_name() (sweep.h). An explicit `name:` must already be a safe folder name (read_experiment
/// refuses others with file:line), since it names runs/<name>/.
std::string experiment_name(const Config& cfg);

}  // namespace hybridlab
