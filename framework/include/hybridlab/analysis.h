#pragma once
// Knock-out analysis of a trained run (`hybridlab analyze RUN_DIR`): how much of the trained
// model's depth needs its mixers, its attention's reach and its position information, measured on
// one model by removing a part at evaluation time (ablation at inference; e.g. Michel et al. 2019,
// "Are Sixteen Heads Really Better than One?"; Haviv et al. 2022, "Transformer Language Models
// without Positional Encodings Still Learn Positional Information", §5), plus per-head statistics
// of attention weights and Gated DeltaNet gates. Definitions and how to read the output:
// docs/analysis.md.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hybridlab/analysis_options.h"

namespace hybridlab {

/// One measurement: the run's primary metric with one knock-out applied, at one length.
struct KnockoutResult {
  std::string kind;     ///< a knockout_kinds() entry
  int64_t layer = -1;   ///< layer index; -1 = the input scheme, -2 = every positional hook
  std::string target;   ///< "layer 3 (attention, rope)", "input (sinusoidal)", "all positions"
  int64_t setting = 0;  ///< reach: the window; state_reset: the segment length; else 0
  int64_t length = 0;   ///< eval length (tokens)
  double baseline = 0;  ///< the metric without knock-out (same examples)
  double value = 0;     ///< the metric with it
  /// How much worse the knock-out is, in metric units: baseline − value when higher is better,
  /// value − baseline else (negative: it helped).
  double damage = 0;
  /// The knocked-out layer's mixer type name ("attention", "gated_deltanet", a plugin's); ""
  /// for the input scheme and for every positional hook at once.
  std::string mixer;
};

/// Per-head statistics of one layer at one length (docs/analysis.md gives each definition).
/// Which observer a head's statistics come from (MixerProbes).
enum class HeadStatsKind {
  kAttentionWeights,  ///< the softmax weights of a pairwise mixer
  kGates,             ///< the decay and writing gates of a gated recurrent mixer
};

struct HeadStats {
  int64_t layer = 0, head = 0, length = 0;
  std::string mixer;  ///< the layer's mixer type name ("attention", "gated_deltanet", ...)
  HeadStatsKind kind = HeadStatsKind::kAttentionWeights;
  // attention: means over query rows (and examples)
  double mean_distance = 0;  ///< Σ_j p_ij·|i − j| (tokens)
  double entropy = 0;        ///< −Σ_j p_ij ln p_ij (nats)
  double sink_mass = 0;      ///< p on the first token (position 0)
  double local_mass = 0;     ///< p on the last 16 tokens (0 <= i − j < 16)
  // gates: means over tokens (and examples)
  double mean_alpha = 0;  ///< decay α = exp(g) per token
  double memory_length =
      0;  ///< 1 / (1 − mean α): the decay's time constant in tokens (α^t ≈ e^(−t(1−α)))
  double mean_beta = 0;  ///< writing strength β
  /// Frobenius norm of the head's state [d_k, d_v] after each eighth of the sequence
  /// (positions in state_positions).
  std::vector<double> state_norms;
  std::vector<int64_t> state_positions;
};

/// Everything `analyze` measured, as written to RUN_DIR/analysis/.
struct AnalysisResult {
  AnalyzeOptions options;    ///< as asked for (empty lengths: the run's own)
  std::string run;           ///< run folder
  std::string task, metric;  ///< task and its primary metric
  bool higher_is_better = true;
  int64_t train_length = 0;
  std::vector<int64_t> lengths;
  std::vector<KnockoutResult> knockouts;
  std::vector<HeadStats> heads;
  std::string summary;             ///< the plain-language paragraph (also analysis/summary.md)
  std::vector<std::string> files;  ///< files written
  double seconds = 0;
};

/// Analyses the finished (or trained) run in `run_dir` under its lock and writes
/// `run_dir/analysis/`: knockouts.csv, reach.csv, heads_attention.csv, heads_gated_deltanet.csv,
/// state_norms.csv, summary.md, and PNG heatmaps (layer × length, colour = damage) when `plots`
/// and gnuplot is installed. Every file is replaced atomically. Throws UserError (exit 2) for a
/// folder that is not a run, a run not trained to its end, a missing checkpoint or plugin, an
/// unknown kind (naming the nearest valid one) and a bad length.
AnalysisResult analyze_run(const std::string& run_dir, const AnalyzeOptions& opts = {});

/// The plain-language paragraph of `run_dir`'s last analysis (analysis/analysis.json), "" when
/// the run was never analysed or the file is unreadable.
std::string analysis_summary(const std::string& run_dir);

/// RUN_DIR/analysis/analysis.json, the typed record of the last analysis: its options, task,
/// metric, lengths, knock-outs and summary (no head statistics, no files); nullopt when the run
/// was never analysed or the file is unreadable.
std::optional<AnalysisResult> read_analysis(const std::string& run_dir);

/// Whether `a` and `b` ask for the same measurements (kinds, lengths, examples, state window,
/// windows, tolerance): an analysis made with `a` answers a request for `b`.
bool same_measurements(const AnalyzeOptions& a, const AnalyzeOptions& b);

/// What analyze_experiment did.
struct ExperimentAnalysis {
  int64_t analysed = 0;     ///< runs analysed now
  int64_t up_to_date = 0;   ///< runs already analysed with the same measurements
  int64_t not_trained = 0;  ///< runs not (yet) finished: nothing to analyse
  std::vector<std::pair<std::string, std::string>> failures;  ///< run -> why
};

/// Analyses every finished run of the experiment folder `experiment_dir` (runs/<experiment>)
/// whose analysis is missing or made with other measurements (same_measurements), `jobs` at a
/// time, each in a child process `exe analyze RUN ...` (its output in RUN/analysis/log.txt), with
/// `opts` (head statistics and plots as `opts` says). Progress lines on stdout unless
/// `opts.quiet`. Stops starting runs when a stop is requested (Ctrl-C), after forwarding it to
/// those running. Throws UserError when the folder holds no runs.
ExperimentAnalysis analyze_experiment(const std::string& experiment_dir, const AnalyzeOptions& opts,
                                      int64_t jobs, const std::string& exe);

}  // namespace hybridlab
