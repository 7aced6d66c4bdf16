// Reports: summary.csv and summary.md from run folders written by hand.

#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "hybridlab/report.h"
#include "hybridlab/run_record.h"
#include "support/job_support.h"

using namespace hybridlab;
namespace fs = std::filesystem;
using json = nlohmann::json;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace report_test {
namespace {

void fake_run(const fs::path& dir, const std::string& name, const std::string& scheme,
              const std::vector<double>& acc, RunState state) {
  const fs::path d = dir / name;
  fs::create_directories(d);
  RunFolder(d.string())
      .write_status(state, state == RunState::kFailed ? "PluginError: no scheme 'rop'" : "");
  if (state != RunState::kFinished) return;
  json j = {{"run", name},
            {"labels", json::object({{"scheme", scheme}})},
            {"task", "mqar"},
            {"primary_metric", "accuracy"},
            {"higher_is_better", true},
            {"train_length", 64},
            {"params", 1234},
            {"train", {{"steps", 10}, {"final_loss", 1.5}, {"tokens_per_s", 1000.0}}}};
  j["eval"]["64"] = {{"accuracy", acc[0]}, {"loss", 1.0}, {"examples", 8}};
  j["eval"]["128"] = {{"accuracy", acc[1]}, {"loss", 2.0}, {"examples", 8}};
  std::ofstream(d / "results.json") << j.dump();
  std::ofstream(d / "metrics.jsonl") << "{\"step\":1,\"loss\":3.0}\n{\"step\":2,\"loss\":2.5}\n";
}

std::string slurp(const std::string& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

TEST_CASE("report: summary.csv rows and summary.md with the best value per column",
          "[job][report]") {
  jobtest::TempDir tmp;
  fake_run(tmp.path, "scheme-alibi", "alibi", {0.9, 0.75}, RunState::kFinished);
  fake_run(tmp.path, "scheme-rope", "rope", {0.95, 0.25}, RunState::kFinished);
  fake_run(tmp.path, "scheme-rop", "rop", {}, RunState::kFailed);
  const ReportFiles f = write_report(tmp.str(), false);
  const std::string csv = slurp(f.csv);
  INFO(csv);
  REQUIRE(csv.find(
              "run,scheme,task,state,health,params,steps,final_train_loss,train_tokens_per_s,error,"
              "accuracy@64,accuracy@128,loss@64,loss@128") == 0);
  REQUIRE(csv.find("scheme-alibi,alibi,mqar,finished,ok,1234,10,1.5,1000,,0.9,0.75,1,2\n") !=
          std::string::npos);
  REQUIRE(csv.find("scheme-rop,,,failed,,,,,,PluginError: no scheme 'rop'") != std::string::npos);
  const std::string md = slurp(f.markdown);
  INFO(md);
  REQUIRE(md == f.markdown_text);
  REQUIRE(md.find("3 runs: 1 failed, 2 finished.") != std::string::npos);
  REQUIRE(md.find("## mqar: accuracy (higher is better; trained at length 64)") !=
          std::string::npos);
  REQUIRE(md.find("| variant | n | 64 (train) | 128 | health |") != std::string::npos);
  REQUIRE(md.find("| scheme=alibi | 1 | 0.9000 | **0.7500** | ok |") != std::string::npos);
  REQUIRE(md.find("| scheme=rope | 1 | **0.9500** | 0.2500 | ok |") != std::string::npos);
  REQUIRE(md.find("- scheme-rop (failed): PluginError: no scheme 'rop'") != std::string::npos);
}

TEST_CASE("report: plots are written when gnuplot is present", "[job][report]") {
  jobtest::TempDir tmp;
  fake_run(tmp.path, "scheme-alibi", "alibi", {0.9, 0.75}, RunState::kFinished);
  const ReportFiles f = write_report(tmp.str(), true);
  for (const auto& p : f.plots) {
    REQUIRE(fs::exists(p));
    REQUIRE(fs::file_size(p) > 1000);
  }
}

TEST_CASE("report: a folder without runs is a UserError", "[job][report]") {
  jobtest::TempDir tmp;
  REQUIRE_THROWS_WITH(write_report(tmp.str(), false), Catch::Contains("holds no runs"));
  REQUIRE_THROWS_WITH(write_report(tmp.str() + "/nope", false),
                      Catch::Contains("not a folder of runs"));
}

}  // namespace report_test
