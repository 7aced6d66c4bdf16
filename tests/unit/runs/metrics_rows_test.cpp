// read_metrics: metrics.jsonl as typed rows, as the trainer (resume, final figures) and the report
// (loss curves) read it.

#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "hybridlab/run_record.h"

namespace metrics_rows_test {

TEST_CASE("metrics rows: steps, losses (null is NaN), rates, broken lines skipped", "[runs]") {
  namespace fs = std::filesystem;
  const fs::path file = fs::temp_directory_path() / "hybridlab_metrics_rows_test.jsonl";
  std::ofstream(file) << "{\"step\": 1, \"loss\": 4.5, \"tokens_per_s\": 1000}\n"
                         "\n"
                         "{\"step\": 2, \"loss\": null, \"tokens_per_s\": 500}\n"
                         "7\n"
                         "{\"step\": 3, \"eval\": true}\n"
                         "{\"step\": 4, \"loss\": 3.2";  // a half-written last line
  const std::vector<hybridlab::MetricsRow> rows = hybridlab::read_metrics(file.string());
  REQUIRE(rows.size() == 3);
  CHECK(rows[0].step == 1);
  CHECK(rows[0].has_loss);
  CHECK(rows[0].loss == 4.5);
  CHECK(rows[0].tokens_per_s == 1000);
  CHECK(rows[0].line == "{\"step\": 1, \"loss\": 4.5, \"tokens_per_s\": 1000}");
  CHECK(rows[1].has_loss);
  CHECK(std::isnan(rows[1].loss));
  CHECK(rows[2].step == 3);
  CHECK_FALSE(rows[2].has_loss);
  CHECK(rows[2].tokens_per_s == 0);
  fs::remove(file);
  CHECK(hybridlab::read_metrics(file.string()).empty());
}

}  // namespace metrics_rows_test
