#pragma once
// What a knock-out analysis measures (`hybridlab analyze`, `report.analysis` of an experiment):
// the options alone, so that an experiment can ask for an analysis without depending on the
// analysis itself (hybridlab/analysis.h).

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
inline const std::vector<std::string>& knockout_kinds() {
  static const std::vector<std::string> kinds = {"mixer", "state_reset", "position", "reach"};
  return kinds;
}

}  // namespace hybridlab
