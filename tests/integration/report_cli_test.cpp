// `hybridlab run` + `report --check` end to end on a tiny sweep with two seeds: intervals and
// health in the summary, summary_by_variant.csv, claims.csv, the exit codes of --check, and a bad
// claim rejected with its file:line:col before anything runs.

#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_support.h"

namespace fs = std::filesystem;
using clitest::cli;
using clitest::Result;
using clitest::slurp;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace report_cli_test {
namespace {

struct Tmp : clitest::TempDir {
  Tmp() : clitest::TempDir("reportcli") {}
};

void write_experiment(const fs::path& file, const std::string& claims) {
  std::ofstream(file)
      << "name: seeds\n"
         "model: {d_model: 16, vocab_size: 64, layers: GA, attention: {n_heads: 2},\n"
         "        gated_deltanet: {n_heads: 2, expand_v: 1, chunk_size: 16}}\n"
         "task: {name: mqar, seq_len: 32, vocab_size: 64, num_kv_pairs: 4}\n"
         "train: {steps: 6, batch_size: 4, warmup_steps: 1}\n"
         "eval: {lengths: [32, 64], examples: 8}\n"
         "runtime: {threads: 1}\n"
         "plugins: {paths: ['" HYBRIDLAB_TEST_PLUGIN_DIR
         "']}\n"
         "sweep:\n"
         "  grid:\n"
         "    model.attention.position.scheme: [nope, alibi]\n"
         "  seeds: [0, 1]\n"
         "expect:\n"
      << claims;
}

}  // namespace

TEST_CASE("report cli: two seeds give intervals, health, claims.csv and --check's exit code",
          "[report][cli]") {
  Tmp tmp;
  const fs::path exp = tmp.path / "seeds.yaml";
  // Accuracy lies in [0, 1]; with two seeds the half-width is at most 12.71 * 0.71 / 1.41 = 6.4.
  write_experiment(exp,
                   "  - scheme-nope accuracy at 32 is at most 100\n"
                   "  - \"{scheme: alibi} accuracy at 64 >= 100\"\n"
                   "  - nope loss at 64 is within 1000 of at 32\n");
  const std::string runs = (tmp.path / "runs").string();
  const Result r = cli("run '" + exp.string() + "' --runs-dir '" + runs + "' --jobs 2 --quiet");
  INFO(r.out);
  REQUIRE(r.code == 0);  // a failing claim does not fail `run`
  const fs::path dir = tmp.path / "runs" / "seeds";
  const std::string md = slurp(dir / "summary.md");
  INFO(md);
  REQUIRE(md.find("| variant | n | 32 (train) | 64 | health |") != std::string::npos);
  REQUIRE(md.find("| scheme=nope | 2 |") != std::string::npos);
  REQUIRE(md.find("| scheme=alibi | 2 |") != std::string::npos);
  REQUIRE(md.find(" ± ") != std::string::npos);
  REQUIRE(md.find("3 claims: 2 hold, 1 fail, 0 inconclusive.") != std::string::npos);
  const std::string by = slurp(dir / "summary_by_variant.csv");
  REQUIRE(by.find("scheme-nope,nope,mqar,2,") != std::string::npos);
  const std::string claims = slurp(dir / "claims.csv");
  INFO(claims);
  REQUIRE(claims.find("{scheme: alibi} accuracy at 64 >= 100,fails,scheme-alibi accuracy at "
                      "64,") != std::string::npos);
  REQUIRE(claims.find("scheme-nope accuracy at 32 is at most 100,holds,") != std::string::npos);
  REQUIRE(fs::exists(dir / "summary.csv"));

  const Result check = cli("report '" + dir.string() + "' --check");
  INFO(check.out);
  REQUIRE(check.code == 1);
  REQUIRE(check.out.find("1 claim(s) fail") != std::string::npos);
  REQUIRE(cli("report '" + dir.string() + "'").code == 0);

  // Without the failing claim, --check passes; editing a claim reruns nothing.
  const auto finished_at = fs::last_write_time(dir / "scheme-nope_seed-0" / "results.json");
  write_experiment(exp,
                   "  - scheme-nope accuracy at 32 is at most 100\n"
                   "  - \"{scheme: alibi} accuracy at 64 >= 0\"\n"
                   "  - nope loss at 64 is within 1000 of at 32\n");
  const Result again = cli("run '" + exp.string() + "' --runs-dir '" + runs + "' --jobs 2 --quiet");
  INFO(again.out);
  REQUIRE(again.code == 0);
  REQUIRE(fs::last_write_time(dir / "scheme-nope_seed-0" / "results.json") == finished_at);
  const Result pass = cli("report '" + dir.string() + "' --check");
  INFO(pass.out);
  REQUIRE(pass.code == 0);

  // report.best_of_seeds: the best seed of each variant beside the mean, retraining nothing.
  write_experiment(exp,
                   "  - scheme-nope accuracy at 32 is at most 100\n"
                   "report: {best_of_seeds: true}\n");
  REQUIRE(cli("run '" + exp.string() + "' --runs-dir '" + runs + "' --jobs 2 --quiet").code == 0);
  REQUIRE(fs::last_write_time(dir / "scheme-nope_seed-0" / "results.json") == finished_at);
  const std::string best_md = slurp(dir / "summary.md");
  INFO(best_md);
  const size_t table = best_md.find("### mqar: best seed of n (accuracy)");
  REQUIRE(table != std::string::npos);
  const size_t row = best_md.find("| scheme=nope | 2 | ", table);
  REQUIRE(row != std::string::npos);
  // The cell at 32 is the larger of the two seeds' accuracies, named by its seed.
  double acc[2];
  for (int seed : {0, 1}) {
    const auto res = nlohmann::json::parse(
        slurp(dir / ("scheme-nope_seed-" + std::to_string(seed)) / "results.json"));
    acc[seed] = res["eval"]["32"]["accuracy"].get<double>();
  }
  const int best_seed = acc[1] > acc[0] ? 1 : 0;
  const std::string cell = best_md.substr(row + 19, best_md.find('|', row + 19) - row - 19);
  CHECK(std::stod(cell) == Approx(acc[best_seed]).margin(5e-5));
  if (acc[0] != acc[1])
    CHECK_THAT(cell, Catch::Contains("(seed " + std::to_string(best_seed) + ")"));
}

TEST_CASE("report cli: a claim naming an unknown variant is a config error at its column",
          "[report][cli]") {
  Tmp tmp;
  const fs::path exp = tmp.path / "seeds.yaml";
  write_experiment(exp,
                   "  - scheme-nope accuracy at 32 >= 0\n"
                   "  - scheme-nope accuracy at 32 is better than rope\n"
                   "  - \"{scheme: nope} acuracy at 64 >= 0\"\n");
  const Result r =
      cli("run '" + exp.string() + "' --runs-dir '" + (tmp.path / "runs").string() + "' --quiet");
  INFO(r.out);
  REQUIRE(r.code == 2);
  // Line 15 (the second claim), column 5 + 42: the word after "better than".
  REQUIRE(r.out.find(exp.string() + ":15:47: expect[1]: unknown variant 'rope'; the variants "
                                    "are: scheme-nope, scheme-alibi") != std::string::npos);
  // Line 16, quoted: column 5 + 1 + 15.
  REQUIRE(r.out.find(exp.string() + ":16:21: expect[2]: unknown metric 'acuracy'") !=
          std::string::npos);
  REQUIRE(!fs::exists(tmp.path / "runs"));
}

TEST_CASE("report cli: sweep.tune trains every value and reports the one chosen on validation",
          "[report][cli][tuning]") {
  Tmp tmp;
  const fs::path exp = tmp.path / "tune.yaml";
  std::ofstream(exp)
      << "name: tune\n"
         "model: {d_model: 16, vocab_size: 64, layers: GA, attention: {n_heads: 2},\n"
         "        gated_deltanet: {n_heads: 2, expand_v: 1, chunk_size: 16}}\n"
         "task: {name: mqar, seq_len: 32, vocab_size: 64, num_kv_pairs: 4}\n"
         "train: {steps: 4, batch_size: 4, warmup_steps: 1}\n"
         "eval: {lengths: [32, 64], examples: 8}\n"
         "runtime: {threads: 1}\n"
         "plugins: {paths: ['" HYBRIDLAB_TEST_PLUGIN_DIR
         "']}\n"
         "sweep:\n"
         "  grid: {model.layers: [GA, GG]}\n"
         "  tune: {train.lr: [0.001, 0.01]}\n"
         "expect:\n"
         "  - layers-GA accuracy at 32 is at most 100\n";
  const std::string runs = (tmp.path / "runs").string();
  const Result r = cli("run '" + exp.string() + "' --runs-dir '" + runs + "' --jobs 2 --quiet");
  INFO(r.out);
  REQUIRE(r.code == 0);
  const fs::path dir = tmp.path / "runs" / "tune";
  for (const char* run :
       {"layers-GA_lr-0.001", "layers-GA_lr-0.01", "layers-GG_lr-0.001", "layers-GG_lr-0.01"}) {
    const std::string res = slurp(dir / run / "results.json");
    INFO(run << ": " << res);
    REQUIRE(res.find("\"validation\"") != std::string::npos);
    REQUIRE(res.find("\"tuned\"") != std::string::npos);
  }
  const std::string md = slurp(dir / "summary.md");
  INFO(md);
  REQUIRE(md.find("| variant | n | 32 (train) | 64 | tuned | health |") != std::string::npos);
  REQUIRE(md.find("| layers=GA | 1 |") != std::string::npos);
  REQUIRE(md.find("lr=0.0") != std::string::npos);
  // Two values: the chosen one is always an end of the grid.
  REQUIRE(md.find("(edge of grid)") != std::string::npos);
  REQUIRE(md.find("## Tuning") != std::string::npos);
  REQUIRE(md.find("1 claims: 1 hold, 0 fail, 0 inconclusive.") != std::string::npos);
  REQUIRE(slurp(dir / "summary_by_variant.csv").find("best_lr,best_lr_at_edge") !=
          std::string::npos);
}

}  // namespace report_cli_test
