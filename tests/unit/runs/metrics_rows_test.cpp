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

TEST_CASE("metrics rows: the line metrics_line writes is the line read_metrics reads", "[runs]") {
  using hybridlab::MetricsRow;
  MetricsRow step;
  step.step = 7;
  step.has_loss = true;
  step.loss = 2.5;
  step.lr = 0.001;
  step.grad_norm = 0.75;
  step.tokens_per_s = 4096;
  step.time_s = 1.5;
  // Keys sorted, as the trainer has always written them; no ranks for one process.
  CHECK(hybridlab::metrics_line(step) ==
        R"({"grad_norm":0.75,"loss":2.5,"lr":0.001,"step":7,"time_s":1.5,"tokens_per_s":4096.0})");
  MetricsRow dp = step;
  dp.loss = NAN;
  dp.ranks = 2;
  dp.allreduce_wait_s = 0.25;
  CHECK(hybridlab::metrics_line(dp) ==
        R"({"allreduce_wait_s":0.25,"grad_norm":0.75,"loss":null,"lr":0.001,"ranks":2,"step":7,)"
        R"("time_s":1.5,"tokens_per_s":4096.0})");
  MetricsRow ev;
  ev.step = 8;
  ev.eval_length = 64;
  ev.eval = {{"accuracy", 0.5}, {"loss", 1.25}};
  CHECK(hybridlab::metrics_line(ev) ==
        R"({"eval_accuracy":0.5,"eval_length":64,"eval_loss":1.25,"step":8})");

  namespace fs = std::filesystem;
  const fs::path file = fs::temp_directory_path() / "hybridlab_metrics_line_test.jsonl";
  std::ofstream(file) << hybridlab::metrics_line(step) << "\n"
                      << hybridlab::metrics_line(dp) << "\n"
                      << hybridlab::metrics_line(ev) << "\n";
  const std::vector<MetricsRow> rows = hybridlab::read_metrics(file.string());
  fs::remove(file);
  REQUIRE(rows.size() == 3);
  CHECK(rows[0].lr == 0.001);
  CHECK(rows[0].grad_norm == 0.75);
  CHECK(rows[0].time_s == 1.5);
  CHECK(rows[0].ranks == 0);
  CHECK(std::isnan(rows[1].loss));
  CHECK(rows[1].ranks == 2);
  CHECK(rows[1].allreduce_wait_s == 0.25);
  CHECK_FALSE(rows[2].has_loss);
  CHECK(rows[2].eval_length == 64);
  CHECK(rows[2].eval == std::map<std::string, double>{{"accuracy", 0.5}, {"loss", 1.25}});
}

}  // namespace metrics_rows_test
