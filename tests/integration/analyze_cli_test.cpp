// `hybridlab analyze` end to end on a tiny trained run: the baseline it measures is the run's own
// reported result, every knock-out is tabled, and bad input is one clear error with exit 2.

#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli_support.h"

namespace fs = std::filesystem;
using clitest::cli;
using clitest::q;
using clitest::Result;
using clitest::slurp;
using json = nlohmann::json;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace analyze_cli_test {
namespace {

// knockouts.csv as rows of cells (no quoted cells in this run's targets but the commas in
// "layer 1 (attention, rope)": split on the quotes first).
std::vector<std::vector<std::string>> read_csv(const fs::path& p) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(slurp(p));
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::string cell;
    bool quoted = false;
    for (char c : line) {
      if (c == '"') {
        quoted = !quoted;
      } else if (c == ',' && !quoted) {
        cells.push_back(cell);
        cell.clear();
      } else {
        cell += c;
      }
    }
    cells.push_back(cell);
    rows.push_back(cells);
  }
  return rows;
}

}  // namespace

TEST_CASE("analyze cli: knock-outs of a trained GA run, baseline == its results",
          "[analyze][cli]") {
  clitest::TempDir tmp("analyzecli");
  const fs::path exp = tmp.path / "tiny.yaml", runs = tmp.path / "runs";
  std::ofstream(exp) << "name: tiny\n"
                        "model: {d_model: 16, vocab_size: 64, layers: GA,\n"
                        "        attention: {n_heads: 2, position: {scheme: rope}},\n"
                        "        gated_deltanet: {n_heads: 2, expand_v: 1, chunk_size: 8}}\n"
                        "task: {name: mqar, seq_len: 32, vocab_size: 64, num_kv_pairs: 4}\n"
                        "train: {steps: 8, batch_size: 4, warmup_steps: 1}\n"
                        "eval: {lengths: [32, 64], examples: 8}\n"
                        "runtime: {threads: 1}\n"
                        "plugins: {paths: ['" HYBRIDLAB_TEST_PLUGIN_DIR "']}\n";
  const fs::path run = runs / "tiny" / "main";

  // Before the run exists / before it is trained: one clear error, exit 2.
  Result r = cli("analyze " + q(run));
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("is not a folder"));
  fs::create_directories(run);
  r = cli("analyze " + q(run));
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("is not a run folder"));

  r = cli("run " + q(exp) + " --runs-dir " + q(runs) + " --quiet");
  INFO(r.out);
  REQUIRE(r.code == 0);
  r = cli("analyze " + q(run) + " --kinds mixers");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("unknown knock-out kind 'mixers'") &&
                        Catch::Contains("did you mean 'mixer'"));

  r = cli("analyze " + q(run) + " --windows 16 --no-plots");
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("Zeroing"));
  const auto rows = read_csv(run / "analysis" / "knockouts.csv");
  REQUIRE(rows.size() > 1);
  CHECK(rows[0] == std::vector<std::string>{"kind", "layer", "target", "setting", "length",
                                            "baseline", "value", "damage", "mixer"});
  // The baseline at each length is the run's own result (same examples, same eval path).
  const json results = json::parse(slurp(run / "results.json"));
  std::vector<std::string> seen;
  for (size_t i = 1; i < rows.size(); ++i) {
    const auto& c = rows[i];
    REQUIRE(c.size() == 9);
    CHECK(c[8] == (c[1] == "0" ? "gated_deltanet" : "attention"));  // the GA model's layers
    CAPTURE(c[0], c[1], c[4]);
    const double reported = results["eval"][c[4]]["accuracy"].get<double>();
    CHECK(std::stod(c[5]) == Approx(reported).margin(1e-12));
    // damage = baseline − value (accuracy: higher is better).
    CHECK(std::stod(c[7]) == Approx(std::stod(c[5]) - std::stod(c[6])).margin(1e-12));
    seen.push_back(c[0] + ":" + c[1] + ":" + c[3] + "@" + c[4]);
  }
  // Per length: mixer 0 and 1, the state reset of layer 0 every 8 tokens, layer 1's positions,
  // and layer 1's reach at window 16.
  for (const std::string L : {"32", "64"}) {
    for (const std::string k :
         {"mixer:0:0", "mixer:1:0", "state_reset:0:8", "position:1:0", "reach:1:16"}) {
      CHECK(std::count(seen.begin(), seen.end(), k + "@" + L) == 1);
    }
  }
  CHECK(seen.size() == 10);
  for (const char* f : {"reach.csv", "heads_attention.csv", "heads_gated_deltanet.csv",
                        "state_norms.csv", "summary.md"}) {
    CAPTURE(f);
    CHECK(fs::exists(run / "analysis" / f));
  }
  // Two heads of layer 1 at two lengths; two value heads of layer 0 at two lengths.
  CHECK(read_csv(run / "analysis" / "heads_attention.csv").size() == 1 + 4);
  CHECK(read_csv(run / "analysis" / "heads_gated_deltanet.csv").size() == 1 + 4);

  // The experiment report carries the run's analysis paragraph, the same text analyze printed.
  const std::string paragraph =
      r.out.substr(r.out.find("Zeroing"), r.out.find("\n\nwrote") - r.out.find("Zeroing"));
  r = cli("report " + q(runs / "tiny"));
  REQUIRE(r.code == 0);
  const std::string report = slurp(runs / "tiny" / "summary.md");
  CHECK_THAT(report, Catch::Contains("## Analysis (knock-outs of trained runs)") &&
                         Catch::Contains(
                             "- main ([details](main/analysis/summary.md)): " + paragraph + "\n"));

  // A run whose positional scheme is no longer installed.
  const fs::path moved = runs / "tiny" / "moved";
  fs::copy(run, moved, fs::copy_options::recursive);
  REQUIRE(clitest::retrain_source_as(moved, "scheme: rope", "scheme: gone"));
  r = cli("analyze " + q(moved));
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("unknown positional scheme 'gone'"));

  // A run whose checkpoint is gone.
  fs::remove_all(run / "checkpoint");
  r = cli("analyze " + q(run));
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("holds no checkpoint"));
}

}  // namespace analyze_cli_test
