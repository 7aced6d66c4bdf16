// How a run ends is what its records say: a non-finite metric is stored and
// shown as such and never makes results.json unreadable; a child that exits 0
// before recording `finished` is a failure. The misbehaving fixture plugin
// (tests/fixtures/plugins/misbehaving.cpp) does the harm.

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "cli_support.h"

namespace fs = std::filesystem;
using clitest::cli;
using clitest::q;
using clitest::Result;
using clitest::slurp;
using json = nlohmann::json;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace run_endings_cli_test {
namespace {

const std::string kMisbehaving =
    std::string(HYBRIDLAB_BINARY_DIR) + "/test-fixtures/misbehaving/misbehaving.so";

struct Tmp : clitest::TempDir {
  Tmp() : clitest::TempDir("endings") {}
};

// Replaces the first `from` in `text` by `to`.
void replace(std::string& text, const std::string& from, const std::string& to) {
  text.replace(text.find(from), from.size(), to);
}

// The tiny experiment with the misbehaving scheme (`position`: its keys beside
// `scheme`); with `text`, on bytes of the test corpus (primary metric
// bits_per_byte) instead of MQAR.
void write_experiment(const fs::path& file, const std::string& position, const std::string& train,
                      bool text = false) {
  clitest::write_tiny_experiment(file, "tiny", train, "{lengths: [32], examples: 8}");
  std::string yaml = slurp(file);
  replace(yaml, "attention: {n_heads: 2}",
          "attention: {n_heads: 2, position: {scheme: '" + kMisbehaving + "'" +
              (position.empty() ? "" : ", " + position) + "}}");
  if (text) {
    replace(yaml, "vocab_size: 64, layers", "vocab_size: 256, layers");
    replace(yaml, "{name: mqar, seq_len: 32, vocab_size: 64, num_kv_pairs: 4}",
            "{name: text, seq_len: 32, path: '" HYBRIDLAB_SOURCE_DIR
            "/tests/fixtures/text_corpus'}");
  }
  std::ofstream(file) << yaml;
}

json json_of(const fs::path& p) {
  try {
    return json::parse(slurp(p));
  } catch (const std::exception&) {
    return json::object();
  }
}

// The step of the last line of a metrics.jsonl (0 when none).
int64_t last_step(const fs::path& metrics) {
  std::ifstream in(metrics);
  std::string line;
  int64_t step = 0;
  while (std::getline(in, line)) {
    if (!line.empty()) step = json::parse(line).value("step", step);
  }
  return step;
}

}  // namespace

TEST_CASE(
    "run endings: a NaN metric is stored as \"nan\", later evaluations "
    "still read the file",
    "[runs][cli]") {
  Tmp tmp;
  const fs::path exp = tmp.path / "tiny.yaml", runs = tmp.path / "runs";
  write_experiment(exp, "", "{steps: 2, batch_size: 2, warmup_steps: 1}",
                   /*text=*/true);
  const fs::path run = runs / "tiny" / "main";
  const Result r = cli("run " + q(exp) + " --runs-dir " + q(runs) + " --quiet --no-report", 300);
  INFO(r.out);
  REQUIRE(r.code == 0);

  // q filled with NaN: every logit, hence the loss, is NaN.
  const Result bad =
      cli("eval " + q(run) + " --variant 'broken=model.attention.position.action=nan'");
  INFO(bad.out);
  REQUIRE(bad.code == 0);
  const json after_bad = json_of(run / "results.json");
  REQUIRE(after_bad["eval_variants"].size() == 1u);
  CHECK(after_bad["eval_variants"][0]["eval"]["32"]["loss"] == "nan");

  // Another evaluation reads the file back: the identity setting scores what
  // training recorded.
  const Result again =
      cli("eval " + q(run) + " --variant 'same=model.attention.position.action=none'");
  INFO(again.out);
  REQUIRE(again.code == 0);
  const json after = json_of(run / "results.json");
  REQUIRE(after["eval_variants"].size() == 2u);
  CHECK(after["eval_variants"][0]["eval"]["32"]["loss"] == "nan");
  const double trained = after["eval"]["32"]["loss"].get<double>();
  CHECK(after["eval_variants"][1]["eval"]["32"]["loss"].get<double>() == Approx(trained));

  // The report shows the variant's value as nan, beside the finite ones (in
  // summary.md the primary metric, bits_per_byte; in summary.csv every metric,
  // accuracy aside: argmax picks the first byte of a NaN row, a finite 0).
  const Result rep = cli("report " + q(runs / "tiny"));
  INFO(rep.out);
  CHECK(rep.code == 0);
  CHECK_THAT(rep.out, Catch::Contains("| eval=broken | 1 | nan |") &&
                          Catch::Contains("| eval=same | 1 |") && !Catch::Contains("unreadable"));
  std::string csv_row;
  std::istringstream csv(slurp(runs / "tiny" / "summary.csv"));
  for (std::string line; std::getline(csv, line);) {
    if (line.rfind("main_eval-broken,", 0) == 0) csv_row = line;
  }
  CHECK_THAT(csv_row, Catch::EndsWith(",nan,nan,nan"));  // bits_per_byte, loss, perplexity

  // A setting whose values overflow is refused at its key before anything is
  // evaluated.
  const std::string before = slurp(run / "results.json");
  const Result xpos = cli("eval " + q(run) +
                          " --variant 'x=model.attention.position={scheme: xpos, scale_base: "
                          "1e-300}'");
  INFO(xpos.out);
  CHECK(xpos.code == 2);
  CHECK_THAT(xpos.out, Catch::Contains("position.scale_base: 1e-300 makes the scale zeta^(n/B) "
                                       "overflow a float at length 32"));
  CHECK(slurp(run / "results.json") == before);
}

TEST_CASE("run endings: a child that exits 0 before recording finished is a failure",
          "[runs][cli]") {
  Tmp tmp;
  const fs::path exp = tmp.path / "tiny.yaml", runs = tmp.path / "runs";
  // One attention layer: one rotate call per training step; the 13th call is
  // step 13's forward.
  write_experiment(exp, "action: exit0, at_call: 13",
                   "{steps: 30, batch_size: 2, warmup_steps: 1}");
  const fs::path run = runs / "tiny" / "main";
  const Result r = cli("run " + q(exp) + " --runs-dir " + q(runs) + " --no-report", 300);
  INFO(r.out);
  CHECK(r.code == 1);
  const std::string why =
      "ended with exit code 0 before recording finished "
      "(its status says running)";
  CHECK_THAT(r.out, Catch::Contains("main: FAILED after") && Catch::Contains(why));
  CHECK_THAT(r.out,
             Catch::Contains("0 finished, 0 skipped (finished before), 1 failed, 0 interrupted"));
  CHECK_THAT(r.out, !Catch::Contains("finished in"));
  const json st = json_of(run / "status.json");
  CHECK(st["state"] == "failed");
  CHECK(st.value("error", "") == why);
  CHECK(last_step(run / "metrics.jsonl") == 12);
  CHECK_FALSE(fs::exists(run / "results.json"));
}
}  // namespace run_endings_cli_test
