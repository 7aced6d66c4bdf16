// What an experiment asks its report for (report.yaml): plots against eval settings and model
// quantities, and the per-variant table of knock-out damage over the seeds' analysis records.

#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "hybridlab/analysis.h"
#include "hybridlab/report.h"
#include "hybridlab/run_record.h"
#include "support/job_support.h"

using namespace hybridlab;
namespace fs = std::filesystem;
using json = nlohmann::json;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace report_requests_test {
namespace {

// A finished MQAR run of `layers` and `seed` trained at 64 pairs 8, with eval variants k4 and
// k16 at 64, its own config.yaml, a model record and an analysis record whose mixer knock-outs
// at 64 cost `damage` (one per layer).
void write_run(const fs::path& dir, const std::string& layers, int seed, double acc,
               const std::vector<double>& damage) {
  const std::string name = "layers-" + layers + "_seed-" + std::to_string(seed);
  const fs::path d = dir / name;
  fs::create_directories(d / "analysis");
  RunFolder(d.string()).write_status(RunState::kFinished);
  RunFolder(d.string()).write_config("task: {name: mqar, num_kv_pairs: 8}\n");
  RunResults r;
  r.id.run = name;
  r.id.labels = {{"layers", layers}, {"seed", std::to_string(seed)}};
  r.task = "mqar";
  r.primary_metric = "accuracy";
  r.train_length = 64;
  r.params = 1000;
  r.model = ModelRecord{2, layers == "GG" ? 0.0 : 0.5, 0, layers == "GG" ? 512 : 256, 0};
  const auto at64 = [](double a) {
    return std::vector<LengthResult>{{64, 8, {{"accuracy", a}}, {}}};
  };
  r.eval = at64(acc);
  r.variants = {{"k4", "task.num_kv_pairs=4", at64(acc + 0.01), {{"task.num_kv_pairs", "4"}}},
                {"k16", "task.num_kv_pairs=16", at64(acc / 2), {{"task.num_kv_pairs", "16"}}}};
  RunFolder(d.string()).write_results(r);
  json knockouts = json::array();
  for (size_t l = 0; l < damage.size(); ++l) {
    const std::string mixer = layers[l] == 'A' ? "attention, nope" : "gated_deltanet";
    knockouts.push_back({{"kind", "mixer"},
                         {"layer", l},
                         {"target", "layer " + std::to_string(l) + " (" + mixer + ")"},
                         {"setting", 0},
                         {"length", 64},
                         {"baseline", acc},
                         {"value", acc - damage[l]},
                         {"damage", damage[l]}});
  }
  // Removing positions: only the attention layer has any (RoPE), costing a tenth of the damage
  // of its mixer; "all positions" the same.
  for (size_t l = 0; l < damage.size(); ++l) {
    if (layers[l] != 'A') continue;
    for (const int64_t layer : {static_cast<int64_t>(l), int64_t{-2}}) {
      knockouts.push_back(
          {{"kind", "position"},
           {"layer", layer},
           {"target", layer < 0 ? std::string("all positions")
                                : "layer " + std::to_string(l) + " (attention, rope)"},
           {"setting", 0},
           {"length", 64},
           {"baseline", acc},
           {"value", acc - damage[l] / 10},
           {"damage", damage[l] / 10}});
    }
  }
  std::ofstream(d / "analysis" / "analysis.json") << json({{"options", {{"kinds", {"mixer"}}}},
                                                           {"task", "mqar"},
                                                           {"metric", "accuracy"},
                                                           {"train_length", 64},
                                                           {"lengths", {64}},
                                                           {"knockouts", knockouts},
                                                           {"summary", "layer 0 carries it"}})
                                                         .dump();
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

TEST_CASE("report requests: written and read back beside the runs", "[report][requests]") {
  jobtest::TempDir tmp;
  ReportRequests r;
  r.plots = {{"task.num_kv_pairs", "accuracy", 256, {"layers"}}, {"head_dim", "", 0, {}}};
  r.analysis = true;
  r.analyze.kinds = {"mixer", "position"};
  r.analyze.lengths = {64, 256};
  r.analyze.examples = 32;
  write_report_requests(tmp.str(), r);
  const ReportRequests back = read_report_requests(tmp.str());
  REQUIRE(back.plots.size() == 2u);
  CHECK(back.plots[0].x == "task.num_kv_pairs");
  CHECK(back.plots[0].length == 256);
  CHECK(back.plots[0].series == std::vector<std::string>{"layers"});
  CHECK(back.plots[1].metric.empty());
  CHECK(back.analysis);
  CHECK(same_measurements(back.analyze, r.analyze));
  r.analyze.examples = 64;
  CHECK_FALSE(same_measurements(back.analyze, r.analyze));
  // Nothing asked: no file.
  write_report_requests(tmp.str(), {});
  CHECK_FALSE(fs::exists(tmp.path / "report.yaml"));
  CHECK(read_report_requests(tmp.str()).empty());
  std::ofstream(tmp.path / "report.yaml") << "plots: [{y: 1}]\n";
  CHECK_THROWS_WITH(read_report_requests(tmp.str()), Catch::Contains("report.yaml"));
}

TEST_CASE("report: requested plots and the per-layer damage of every analysed seed",
          "[report][requests][analysis]") {
  jobtest::TempDir tmp;
  // GA: zeroing layer 1 (attention) costs 0.9, 0.8; layer 0 costs 0.1, 0.0.
  // GG: layer 0 costs 0.5 (one seed analysed; the other has no analysis record).
  write_run(tmp.path, "GA", 0, 0.95, {0.1, 0.9});
  write_run(tmp.path, "GA", 1, 0.93, {0.0, 0.8});
  write_run(tmp.path, "GG", 0, 0.60, {0.5, 0.1});
  write_run(tmp.path, "GG", 1, 0.40, {});
  fs::remove(tmp.path / "layers-GG_seed-1" / "analysis" / "analysis.json");
  ReportRequests req;
  req.plots = {{"task.num_kv_pairs", "", 64, {}}, {"recurrent_state_floats", "", 64, {"eval"}}};
  write_report_requests(tmp.str(), req);
  const ReportFiles f = write_report(tmp.str(), true);
  const std::string md = slurp(f.markdown);
  CAPTURE(md);
  // GA layer 0: mean 0.05, sd 0.0707, half-width 12.706 * 0.0707 / sqrt(2) = 0.635; layer 1:
  // 0.85 ± 0.635; shares 0.05 / 0.9 = 6% and 94%. GG: n = 1, no interval.
  CHECK_THAT(md, Catch::Contains("| layers=GA | 2 | gated_deltanet 0.050 ± 0.635 (6%) | "
                                 "attention 0.850 ± 0.635 (94%) |"));
  CHECK_THAT(md, Catch::Contains("| layers=GG | 1 | gated_deltanet 0.500 (83%) | "
                                 "gated_deltanet 0.100 (17%) |"));
  CHECK_THAT(md, Catch::Contains("at 64 (the training length)"));
  // Position knock-outs: GA only (GG has no attention); 0.09, 0.08 -> 0.085 ± 0.0635; no shares.
  CHECK_THAT(md, Catch::Contains("### Damage of removing each attention layer's position "
                                 "information at 64 (the training length)"));
  CHECK_THAT(md, Catch::Contains("| variant | n | layer 1 | all positions |"));
  CHECK_THAT(md, Catch::Contains("| layers=GA | 2 | attention 0.085 ± 0.064 | 0.085 ± 0.064 |"));
  if (!f.plots.empty()) {  // gnuplot installed
    CHECK(fs::exists(tmp.path / "plots" / "mqar_accuracy_vs_task.num_kv_pairs_at_64.png"));
    CHECK(fs::exists(tmp.path / "plots" / "mqar_accuracy_vs_recurrent_state_floats_at_64.png"));
  }
}

}  // namespace report_requests_test
