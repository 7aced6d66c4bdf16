// `hybridlab run` on the recall-capacity recipe end to end, at toy size: a task mixture, eval
// variants over the number of pairs, plots asked for in `report:`, the knock-out analysis of
// every run; what editing `report:` reruns (nothing); and bad `report:` input refused before
// anything is written.

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "cli_support.h"

namespace fs = std::filesystem;
using clitest::cli;
using clitest::q;
using clitest::Result;
using clitest::slurp;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace mixture_cli_test {
namespace {

struct Tmp : clitest::TempDir {
  Tmp() : clitest::TempDir("mixturecli") {}
};

void write_experiment(const fs::path& file, const std::string& report) {
  std::ofstream(file)
      << "name: capacity\n"
         "model: {d_model: 16, vocab_size: 64, layers: GA, attention: {n_heads: 2},\n"
         "        gated_deltanet: {n_heads: 2, expand_v: 1, chunk_size: 16}}\n"
         "task:\n"
         "  name: mqar\n"
         "  vocab_size: 64\n"
         "  seq_len: 32\n"
         "  num_kv_pairs: 8\n"
         "  mixture:\n"
         "    settings:\n"
         "      - {seq_len: 16, num_kv_pairs: 4, weight: 3}\n"
         "      - {seq_len: 32, num_kv_pairs: 8}\n"
         "train: {steps: 6, batch_size: 4, warmup_steps: 1}\n"
         "eval:\n"
         "  lengths: [32]\n"
         "  examples: 8\n"
         "  variants:\n"
         "    k4: {task.num_kv_pairs: 4}\n"
         "    k16: {task.num_kv_pairs: 16, task.seq_len: 64, eval.lengths: [64]}\n"
         "runtime: {threads: 1}\n"
         "plugins: {paths: ['" HYBRIDLAB_TEST_PLUGIN_DIR
         "']}\n"
         "sweep:\n"
         "  grid:\n"
         "    model.gated_deltanet.head_dim: [4, 8, 16]\n"
         "expect:\n"
         "  - \"{head_dim: 4, eval: k16} accuracy at 64 is at most 1\"\n"
      << report;
}

}  // namespace

TEST_CASE("mixture cli: trained on a mixture, scored per setting, plotted and analysed",
          "[mixture][cli]") {
  Tmp tmp;
  const fs::path exp = tmp.path / "capacity.yaml";
  const fs::path runs = tmp.path / "runs";
  write_experiment(exp,
                   "report:\n"
                   "  plots:\n"
                   "    - {x: task.num_kv_pairs, length: 32}\n"
                   "    - {x: model.gated_deltanet.head_dim, length: 32, series: [eval]}\n"
                   "  analysis: {kinds: [mixer]}\n");
  Result r = cli("run " + q(exp) + " --runs-dir " + q(runs) + " --jobs 2");
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("analysis: 3 analysed, 0 up to date, 0 failed"));
  // The sweep as a whole after each run ends: two runs at once, so one still runs after the
  // first ends, and the third waits.
  CHECK_THAT(r.out, Catch::Contains("sweep: 1 ended, 1 running, 1 left; 0:"));
  CHECK_THAT(r.out, Catch::Contains("sweep: 2 ended, 1 running, 0 left; 0:"));
  for (const char* hd : {"4", "8", "16"}) {
    const fs::path run = runs / "capacity" / (std::string("head_dim-") + hd);
    CHECK(fs::exists(run / "analysis" / "analysis.json"));
    // The training length is the mixture's longest setting; the run's own config keeps the
    // settings in order.
    CHECK_THAT(slurp(run / "results.json"), Catch::Contains("\"train_length\": 32"));
    CHECK_THAT(slurp(run / "config.yaml"), Catch::Contains("mixture:"));
  }
  const std::string md = slurp(runs / "capacity" / "summary.md");
  CHECK_THAT(md, Catch::Contains("head_dim=4 eval=k16"));
  CHECK_THAT(md, Catch::Contains("mqar: where the damage is"));
  CHECK_THAT(md, Catch::Contains("| head_dim=16 | 1 | gated_deltanet"));
  CHECK_THAT(md, Catch::Contains("1 claims: 1 hold"));
  if (fs::exists(runs / "capacity" / "plots" / "mqar_loss_vs_step.png")) {  // gnuplot installed
    CHECK(fs::exists(runs / "capacity" / "plots" / "mqar_accuracy_vs_task.num_kv_pairs_at_32.png"));
    CHECK(fs::exists(runs / "capacity" / "plots" / "mqar_accuracy_vs_head_dim_at_32.png"));
  }

  // Editing what the report asks for retrains nothing and re-analyses only on new measurements.
  write_experiment(exp,
                   "report:\n  plots: [{x: recurrent_state_floats, length: 32}]\n"
                   "  analysis: {kinds: [mixer]}\n");
  r = cli("run " + q(exp) + " --runs-dir " + q(runs) + " --jobs 2");
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("0 finished, 3 skipped"));
  CHECK_THAT(r.out, !Catch::Contains("analysis: "));
  write_experiment(exp, "report: {analysis: {kinds: [mixer], examples: 4}}\n");
  r = cli("run " + q(exp) + " --runs-dir " + q(runs) + " --jobs 2");
  CHECK_THAT(r.out, Catch::Contains("analysis: 3 analysed"));
  // `analyze` over the folder: everything is up to date.
  r = cli("analyze " + q(runs / "capacity") + " --kinds mixer --examples 4 --no-heads --no-plots");
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("0 analysed, 3 up to date"));
}

TEST_CASE("mixture cli: bad report requests are refused at file:line before anything is written",
          "[mixture][cli]") {
  Tmp tmp;
  const fs::path exp = tmp.path / "capacity.yaml";
  const fs::path runs = tmp.path / "runs";
  const auto refused = [&](const std::string& report, const std::string& what) {
    write_experiment(exp, report);
    const Result r = cli("run " + q(exp) + " --runs-dir " + q(runs));
    INFO(r.out);
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Catch::Contains(what));
    CHECK_FALSE(fs::exists(runs));
  };
  refused("report: {plots: [{x: model.d_model}]}\n",
          "capacity.yaml:27:19: report.plots.0.x: 'model.d_model' is not a swept key");
  refused("report: {plots: [{x: head_dim, metric: bleu}]}\n",
          "report.plots.0.metric: 'bleu' is not a metric");
  refused("report: {plots: [{x: head_dim, length: 48}]}\n",
          "report.plots.0.length: 48 is not an eval length");
  refused("report: {plots: [{x: head_dim, series: [layers]}]}\n",
          "report.plots.0.series: 'layers' is not a label");
  refused("report: {analysis: {kinds: [mixr]}}\n",
          "report.analysis.kinds: unknown knock-out kind 'mixr'; did you mean 'mixer'?");
  refused("report: {plot: []}\n", "report.plot: unknown key 'plot'; did you mean 'plots'?");
}

}  // namespace mixture_cli_test
