#pragma once
// The files of RUN_DIR/analysis/ and the plain-language summary.

#include <cstdint>
#include <string>
#include <vector>

#include "hybridlab/analysis.h"

namespace hybridlab::analysis {

/// The reach of one attention layer at one length: the smallest tried window whose damage is at
/// most the tolerance, or the length itself when none is (the layer needs the whole context).
struct Reach {
  int64_t layer = 0;
  std::string target;
  int64_t length = 0;
  int64_t window = 0;
  bool whole_context = false;
};

/// One Reach per attention layer and length, from the "reach" knock-outs of `res`.
std::vector<Reach> reaches(const AnalysisResult& res, double tolerance);

/// The plain-language paragraph: which layers carry the metric, what position information costs,
/// what a state reset costs, how far each attention layer reaches. `tolerance` is the reach
/// tolerance (metric units); damages below it are called negligible.
std::string summarize(const AnalysisResult& res, double tolerance);

/// Writes knockouts.csv, reach.csv, heads_attention.csv, heads_<mixer>.csv for each gated
/// recurrent mixer type (heads_gated_deltanet.csv, ...), state_norms.csv, summary.md and (when
/// `plots` and gnuplot is installed) the PNGs into `dir`. Returns the paths written. Throws
/// UserError when the folder cannot be written.
std::vector<std::string> write_analysis(const std::string& dir, const AnalysisResult& res,
                                        double tolerance, bool plots);

/// Writes `dir`/analysis.json, the typed record read back by read_analysis() (hybridlab/
/// analysis.h). Returns its path. Throws UserError when it cannot be written.
std::string write_record(const std::string& dir, const AnalysisResult& res);

}  // namespace hybridlab::analysis
