// RUN_DIR/analysis/analysis.json: the typed record written and read back, old records included.

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "analysis/write.h"
#include "hybridlab/analysis.h"
#include "support/job_support.h"

using namespace hybridlab;
namespace fs = std::filesystem;

namespace record_test {

TEST_CASE(
    "analysis record: knock-outs read back with their mixer, older records name it in the "
    "label",
    "[analysis]") {
  jobtest::TempDir dir;
  const fs::path run = dir.path / "run";
  fs::create_directories(run / "analysis");
  AnalysisResult res;
  res.task = "parity";
  res.metric = "accuracy";
  res.lengths = {64};
  res.knockouts = {{"mixer", 0, "layer 0 (gated_deltanet)", 0, 64, 1.0, 0.5, 0.5, "gated_deltanet"},
                   {"position", -1, "input (sinusoidal)", 0, 64, 1.0, 0.75, 0.25, ""},
                   {"mixer", 1, "layer 1 (my_mixer)", 0, 64, 1.0, 0.875, 0.125, "deltanet"}};
  analysis::write_record((run / "analysis").string(), res);
  std::optional<AnalysisResult> back = read_analysis(run.string());
  REQUIRE(back);
  REQUIRE(back->knockouts.size() == 3u);
  CHECK(back->knockouts[0].mixer == "gated_deltanet");
  CHECK(back->knockouts[1].mixer.empty());
  CHECK(back->knockouts[2].mixer == "deltanet");  // the field, not the label, is read
  CHECK(back->knockouts[2].damage == 0.125);

  // A record written before the field: the mixer is the label's first word inside the brackets.
  std::ofstream(run / "analysis" / "analysis.json") << R"json({"task": "parity", "knockouts": [
      {"kind": "position", "layer": 3, "target": "layer 3 (attention, rope)", "damage": 0.5},
      {"kind": "mixer", "layer": 0, "target": "layer 0 (gated_deltanet)", "damage": 0.25},
      {"kind": "position", "layer": -1, "target": "input (sinusoidal)", "damage": 0.1}]})json";
  back = read_analysis(run.string());
  REQUIRE(back);
  REQUIRE(back->knockouts.size() == 3u);
  CHECK(back->knockouts[0].mixer == "attention");
  CHECK(back->knockouts[1].mixer == "gated_deltanet");
  CHECK(back->knockouts[2].mixer.empty());
}

}  // namespace record_test
