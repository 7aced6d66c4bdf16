// RunFolder: the typed record round-trips; damaged files read as documented.

#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "hybridlab/run_record.h"
#include "runs_support.h"

using namespace hybridlab;
namespace fs = std::filesystem;

TEST_CASE("run record: status, identity, source and results round-trip", "[runs][record]") {
  runstest::TempDir tmp;
  const RunFolder f((tmp.path / "r").string());
  CHECK(f.status().state == RunState::kNew);
  CHECK(!f.source());
  CHECK(!f.results());

  f.write_status(RunStatus{RunState::kInterrupted, "stopped at step 3", 1.5, 42});
  const RunStatus s = f.status();
  CHECK(s.state == RunState::kInterrupted);
  CHECK(s.error == "stopped at step 3");
  CHECK(s.wall_s == 1.5);
  CHECK(s.pid == 42);
  f.write_status(RunState::kTrained);
  CHECK(f.status().state == RunState::kTrained);
  CHECK(f.status().pid == ::getpid());

  f.write_source("model: {d_model: 16}\n",
                 RunIdentity{"exp", "r", {{"scheme", "rope"}}, "/x", {{"lr", {"0.001", "0.01"}}}});
  CHECK(*f.source() == "model: {d_model: 16}\n");
  CHECK(f.identity()->experiment == "exp");
  CHECK(f.identity()->labels.at(0).second == "rope");
  CHECK(f.identity()->config_dir == "/x");
  CHECK(f.identity()->tuned.at(0).second == std::vector<std::string>{"0.001", "0.01"});

  RunResults r;
  r.id = RunIdentity{"exp", "r", {{"scheme", "rope"}}, "", {}};
  r.task = "mqar";
  r.primary_metric = "accuracy";
  r.train_length = 32;
  r.params = 1234;
  r.train = TrainRecord{12, 5, 2.686761234567891, 1000.5, 3.0, 2.0};
  r.eval.push_back(LengthResult{64, 8, {{"accuracy", 0.25}, {"loss", 3.5}}, {1.0, 2.0}});
  r.eval.push_back(LengthResult{32, 8, {{"accuracy", 0.5}, {"loss", 2.5}}, {}});
  r.chance = {{"accuracy", 0.0078125}};
  r.tuned = {{"lr", {"0.001", "0.01"}}};
  r.validation.push_back(LengthResult{32, 4, {{"accuracy", 0.75}}, {}});
  f.write_results(r);
  const RunResults back = *f.results();
  CHECK(back.id.run == "r");
  CHECK(back.task == "mqar");
  CHECK(back.params == 1234);
  REQUIRE(back.train);
  CHECK(back.train->final_loss == 2.686761234567891);  // exact: shortest round-trip doubles
  CHECK(back.train->resumed_from == 5);
  REQUIRE(back.eval.size() == 2u);
  CHECK(back.eval[0].length == 32);  // ascending
  CHECK(back.eval[1].metrics.at("accuracy") == 0.25);
  CHECK(back.eval[1].examples == 8);
  CHECK(back.eval[1].position_loss == std::vector<double>{1.0, 2.0});
  CHECK(back.chance.at("accuracy") == 0.0078125);
  CHECK(back.tuned.at(0).first == "lr");
  CHECK(back.tuned.at(0).second.at(1) == "0.01");
  REQUIRE(back.validation.size() == 1u);
  CHECK(back.validation[0].metrics.at("accuracy") == 0.75);
}

TEST_CASE("run record: a damaged status reads as new, a damaged results.json is named",
          "[runs][record]") {
  runstest::TempDir tmp;
  const RunFolder f(tmp.str());
  std::ofstream(tmp.path / "status.json") << "{\"state\": \"finis";
  CHECK(f.status().state == RunState::kNew);
  std::ofstream(tmp.path / "results.json") << "[1, 2";
  CHECK_THROWS_WITH(f.results(), Catch::Contains("unreadable results.json") &&
                                     Catch::Contains((tmp.path / "results.json").string()));
  const RunRecord rec = f.read();
  CHECK(!rec.results);
  CHECK_THAT(rec.results_error, Catch::Contains("unreadable results.json"));
  // clear_training removes exactly what a fresh start must not see.
  fs::create_directories(tmp.path / "checkpoint");
  std::ofstream(tmp.path / "checkpoint" / "state.pt") << "x";
  std::ofstream(tmp.path / "metrics.jsonl") << "{}\n";
  f.clear_training();
  CHECK(!fs::exists(tmp.path / "checkpoint"));
  CHECK(!fs::exists(tmp.path / "metrics.jsonl"));
  CHECK(!fs::exists(tmp.path / "results.json"));
  CHECK(fs::exists(tmp.path / "status.json"));
}

TEST_CASE("run record: non-finite metrics are written as \"nan\", \"inf\", \"-inf\" and read back",
          "[runs][record]") {
  runstest::TempDir tmp;
  const RunFolder f(tmp.str());
  const double inf = std::numeric_limits<double>::infinity();
  RunResults r;
  r.id = RunIdentity{"exp", "r", {}, "", {}};
  r.task = "text";
  r.train = TrainRecord{4, 0, std::nan(""), 10.0, 1.0, 0.5};
  r.eval.push_back(LengthResult{32, 8, {{"loss", 2.5}, {"perplexity", 12.25}}, {}});
  r.variants.push_back(EvalVariantResult{
      "broken",
      "model.attention.position.scale_base=1e-300",
      {LengthResult{32,
                    8,
                    {{"loss", std::nan("")}, {"perplexity", inf}, {"margin", -inf}},
                    {1.5, std::nan("")}}},
      {}});
  f.write_results(r);
  const std::string text = runstest::slurp(tmp.path / "results.json");
  CHECK(text.find("null") == std::string::npos);
  CHECK(text.find("\"perplexity\": \"inf\"") != std::string::npos);
  CHECK(text.find("\"margin\": \"-inf\"") != std::string::npos);

  RunResults back = *f.results();
  CHECK(std::isnan(back.train->final_loss));
  CHECK(back.eval.at(0).metrics.at("loss") == 2.5);
  const LengthResult& v = back.variants.at(0).eval.at(0);
  CHECK(std::isnan(v.metrics.at("loss")));
  CHECK(v.metrics.at("perplexity") == inf);
  CHECK(v.metrics.at("margin") == -inf);
  REQUIRE(v.position_loss.size() == 2u);
  CHECK(v.position_loss[0] == 1.5);
  CHECK(std::isnan(v.position_loss[1]));

  // A file that read fine stays readable after another evaluation is added and written.
  back.variants.push_back(
      EvalVariantResult{"again", "", {LengthResult{32, 8, {{"loss", 3.0}}, {}}}, {}});
  f.write_results(back);
  const RunResults twice = *f.results();
  REQUIRE(twice.variants.size() == 2u);
  CHECK(std::isnan(twice.variants[0].eval.at(0).metrics.at("loss")));
  CHECK(twice.variants[1].eval.at(0).metrics.at("loss") == 3.0);
}

TEST_CASE("run record: a null metric (how older files stored NaN) reads as NaN, text is refused",
          "[runs][record]") {
  runstest::TempDir tmp;
  const RunFolder f(tmp.str());
  std::ofstream(tmp.path / "results.json")
      << R"({"task": "text", "train": {"steps": 4, "final_loss": null},)"
      << R"( "eval": {"32": {"examples": 8, "loss": null, "accuracy": 0.5}}})";
  const RunResults r = *f.results();
  CHECK(std::isnan(r.train->final_loss));
  CHECK(std::isnan(r.eval.at(0).metrics.at("loss")));
  CHECK(r.eval.at(0).metrics.at("accuracy") == 0.5);
  std::ofstream(tmp.path / "results.json")
      << R"({"task": "text", "eval": {"32": {"examples": 8, "loss": "NaNs"}}})";
  CHECK_THROWS_WITH(f.results(),
                    Catch::Contains("unreadable results.json") && Catch::Contains("got \"NaNs\""));
}
