#pragma once
// Knock-out analysis of a trained run (`hybridlab analyze RUN_DIR`): how much of the trained
// model's depth needs its mixers, its attention's reach and its position information, measured on
// one model by removing a part at evaluation time (ablation at inference; e.g. Michel et al. 2019,
// "Are Sixteen Heads Really Better than One?"; Haviv et al. 2022, "Transformer Language Models
// without Positional Encodings Still Learn Positional Information", §5), plus per-head statistics
// of attention weights and Gated DeltaNet gates. Definitions and how to read the output:
// docs/analysis.md.

#include <cstdint>
#include <string>
#include <vector>

namespace hybridlab {

/// What `hybridlab analyze` measures and where.
struct AnalyzeOptions {
  std::vector<int64_t> lengths;  ///< eval lengths (tokens); empty = the run's eval.lengths
  int64_t examples = 0;          ///< eval examples per length; 0 = the run's eval.examples
  /// Knock-out kinds to run (knockout_kinds()); empty = all of them.
  std::vector<std::string> kinds;
  /// Segment length of the Gated DeltaNet state reset (tokens); 0 = each layer's chunk_size.
  int64_t state_window = 0;
  /// Candidate attention windows of the reach search (tokens, ascending); empty = 16, 64, 256, …
  /// below the longest length.
  std::vector<int64_t> reach_windows;
  /// A window "suffices" when it costs at most this much of the primary metric (metric units).
  double reach_tolerance = 0.01;
  bool head_stats = true;  ///< also attention / gate statistics per head
  bool plots = true;       ///< heatmaps and line plots (needs gnuplot)
  bool quiet = false;      ///< no progress lines on stderr
};

/// The knock-out kinds, in the order they run: "mixer" (a layer's mixer output zeroed),
/// "state_reset" (a Gated DeltaNet layer's state emptied every state_window tokens), "position"
/// (positional hooks removed: per attention layer, the input scheme, and all at once), "reach"
/// (an attention layer restricted to a sliding window).
const std::vector<std::string>& knockout_kinds();

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
};

/// Per-head statistics of one layer at one length (docs/analysis.md gives each definition).
struct HeadStats {
  int64_t layer = 0, head = 0, length = 0;
  std::string mixer;  ///< "attention" or "gated_deltanet"
  // attention: means over query rows (and examples)
  double mean_distance = 0;  ///< Σ_j p_ij·|i − j| (tokens)
  double entropy = 0;        ///< −Σ_j p_ij ln p_ij (nats)
  double sink_mass = 0;      ///< p on the first token (position 0)
  double local_mass = 0;     ///< p on the last 16 tokens (0 <= i − j < 16)
  // gated_deltanet: means over tokens (and examples)
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

/// The plain-language paragraph of `run_dir`'s last analysis (analysis/summary.md), "" when the
/// run was never analysed or the file is unreadable.
std::string analysis_summary(const std::string& run_dir);

}  // namespace hybridlab
