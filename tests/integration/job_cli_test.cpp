// `hybridlab run` end to end on a tiny sweep: parallel child processes, a failing variant recorded
// while the sweep goes on, finished runs skipped on rerun, the report, bad runs folders.

#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "cli_support.h"

namespace fs = std::filesystem;
using clitest::cli;
using clitest::Result;
using clitest::slurp;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace job_cli_test {
namespace {

struct Tmp : clitest::TempDir {
  Tmp() : clitest::TempDir("jobcli") {}
};

void write_experiment(const fs::path& file,
                      const std::string& schemes = "[nope, alibi, /nonexistent/broken.so]") {
  std::ofstream(file)
      << "name: tiny\n"
         "model: {d_model: 16, vocab_size: 64, layers: GA, attention: {n_heads: 2},\n"
         "        gated_deltanet: {n_heads: 2, expand_v: 1, chunk_size: 16}}\n"
         "task: {name: mqar, seq_len: 32, vocab_size: 64, num_kv_pairs: 4}\n"
         "train: {steps: 6, batch_size: 4, warmup_steps: 1, checkpoint_every: 3}\n"
         "eval: {lengths: [32, 64], examples: 8}\n"
         "runtime: {threads: 1}\n"
         "plugins: {paths: ['" HYBRIDLAB_TEST_PLUGIN_DIR
         "']}\n"
         "sweep:\n"
         "  grid:\n"
         "    model.attention.position.scheme: "
      << schemes << "\n";
}

}  // namespace

TEST_CASE("job cli: a sweep with a failing variant, rerun skips finished runs, report written",
          "[job][cli]") {
  Tmp tmp;
  const fs::path exp = tmp.path / "tiny.yaml";
  write_experiment(exp);
  const std::string runs = (tmp.path / "runs").string();
  // A variant whose model cannot be built stops the sweep before any run folder is written.
  const Result early = cli("run '" + exp.string() + "' --runs-dir '" + runs + "' --quiet");
  INFO(early.out);
  REQUIRE(early.code == 2);
  REQUIRE(early.out.find("run 'scheme-broken.so'") != std::string::npos);
  REQUIRE(early.out.find("broken.so") != std::string::npos);
  REQUIRE(!fs::exists(tmp.path / "runs"));

  write_experiment(exp, "[nope, alibi]");
  const Result r = cli("run '" + exp.string() + "' --runs-dir '" + runs + "' --jobs 2 --quiet");
  INFO(r.out);
  REQUIRE(r.code == 0);
  const fs::path dir = tmp.path / "runs" / "tiny";
  const auto status = [&](const std::string& run) {
    return nlohmann::json::parse(slurp(dir / run / "status.json"));
  };
  REQUIRE(status("scheme-nope")["state"] == "finished");
  REQUIRE(status("scheme-alibi")["state"] == "finished");
  for (const char* f :
       {"config.yaml", "source.yaml", "metrics.jsonl", "results.json", "checkpoint/state.pt"}) {
    REQUIRE(fs::exists(dir / "scheme-alibi" / f));
  }
  const auto res = nlohmann::json::parse(slurp(dir / "scheme-alibi" / "results.json"));
  REQUIRE(res["eval"].contains("64"));
  REQUIRE(res["train"]["steps"] == 6);
  REQUIRE(slurp(dir / "summary.md").find("| scheme=nope |") != std::string::npos);
  REQUIRE(slurp(dir / "summary.csv").find("accuracy@64") != std::string::npos);

  // eval re-evaluates a finished run and rewrites its results, keeping the training summary.
  const Result ev = cli("eval '" + (dir / "scheme-nope").string() + "'");
  INFO(ev.out);
  REQUIRE(ev.code == 0);
  const auto evres = nlohmann::json::parse(slurp(dir / "scheme-nope" / "results.json"));
  REQUIRE(evres["run"] == "scheme-nope");
  REQUIRE(evres["labels"]["scheme"] == "nope");
  REQUIRE(evres["eval"]["64"]["examples"] == 8);
  REQUIRE(evres["train"]["steps"] == 6);
  REQUIRE(status("scheme-nope")["state"] == "finished");

  // A run that fails in its child process is recorded while the sweep goes on: a corrupt
  // checkpoint of an interrupted run names the file and how to recover.
  std::ofstream(dir / "scheme-alibi" / "checkpoint" / "state.pt") << "garbage";
  std::ofstream(dir / "scheme-alibi" / "status.json") << R"({"state": "interrupted"})";
  const Result again = cli("run '" + exp.string() + "' --runs-dir '" + runs + "' --quiet");
  INFO(again.out);
  REQUIRE(again.code == 1);
  REQUIRE(again.out.find("0 finished, 1 skipped (finished before), 1 failed") != std::string::npos);
  const auto bad = status("scheme-alibi");
  REQUIRE(bad["state"] == "failed");
  const std::string err = bad["error"].get<std::string>();
  REQUIRE(err.find("state.pt is unreadable") != std::string::npos);
  REQUIRE(err.find("delete it (or the run folder)") != std::string::npos);
  REQUIRE(slurp(dir / "summary.md").find("scheme-alibi (failed)") != std::string::npos);

  // Changing the config does not overwrite a finished run.
  const Result changed = cli("run '" + exp.string() + "' train.steps=7 --runs-dir '" + runs +
                             "' --only scheme-nope --quiet");
  INFO(changed.out);
  REQUIRE(changed.code == 2);
  REQUIRE(changed.out.find("not overwritten") != std::string::npos);
  REQUIRE(nlohmann::json::parse(slurp(dir / "scheme-nope" / "results.json"))["train"]["steps"] ==
          6);
  const Result guarded =
      cli("run '" + exp.string() + "' train.steps=8 --runs-dir '" + runs + "' --shard 0/3 --quiet");
  REQUIRE(guarded.out.find("different configuration") != std::string::npos);

  // sweep list shows the states; --shard slices round robin.
  const Result list =
      cli("sweep list '" + exp.string() + "' --runs-dir '" + runs + "' --shard 1/3");
  REQUIRE(list.code == 0);
  REQUIRE(list.out.find("1 run(s) of 2") != std::string::npos);
  REQUIRE(list.out.find("scheme-alibi") != std::string::npos);
}

TEST_CASE("job cli: an unwritable runs folder is a clear error", "[job][cli]") {
  Tmp tmp;
  const fs::path exp = tmp.path / "tiny.yaml";
  write_experiment(exp, "[nope, alibi]");
  std::ofstream(tmp.path / "afile") << "x";
  const Result r =
      cli("run '" + exp.string() + "' --runs-dir '" + (tmp.path / "afile").string() + "' --quiet");
  INFO(r.out);
  REQUIRE(r.code == 2);
  REQUIRE(r.out.find("cannot create the runs folder") != std::string::npos);
  REQUIRE(r.out.find("--runs-dir") != std::string::npos);
}

TEST_CASE("job cli: a sweep key that is not a config key names the nearest key", "[job][cli]") {
  Tmp tmp;
  const fs::path exp = tmp.path / "bad.yaml";
  std::ofstream(exp) << "model: {d_model: 16, vocab_size: 64, layers: A}\n"
                        "task: {name: mqar, seq_len: 32, vocab_size: 64, num_kv_pairs: 4}\n"
                        "sweep: {grid: {train.stpes: [1, 2]}}\n";
  const Result r = cli("sweep list '" + exp.string() + "'");
  INFO(r.out);
  REQUIRE(r.code == 2);
  REQUIRE(r.out.find("did you mean 'steps'") != std::string::npos);
}

TEST_CASE("job cli: a count out of range names its bounds, not the double limit", "[job][cli]") {
  Tmp tmp;
  const fs::path exp = tmp.path / "tiny.yaml";
  write_experiment(exp, "[nope, alibi]");
  for (const std::string opt : {"--jobs 0", "--nproc-per-node 0", "--nnodes 0", "--node-rank -1"}) {
    const Result r = cli("run '" + exp.string() + "' " + opt + " --quiet");
    INFO(opt << ": " << r.out);
    REQUIRE(r.code == 2);
    REQUIRE(r.out.find(opt.substr(0, opt.find(' '))) != std::string::npos);
    REQUIRE(r.out.find(" to 102") != std::string::npos);   // the bound (1024, or 1023 for a rank)
    REQUIRE(r.out.find("00000000") == std::string::npos);  // not DBL_MAX's 309 digits
  }
}

}  // namespace job_cli_test
