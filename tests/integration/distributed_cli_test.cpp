// `hybridlab run --nproc-per-node N`: the launcher and its ranks end to end over Gloo on
// loopback: the same training as one process, a killed rank stops the job and names it, a rerun
// resumes, and bad input is one error before anything starts.

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "cli_support.h"
#include "support/loopback_port.h"

namespace fs = std::filesystem;
using clitest::cli;
using clitest::q;
using clitest::Result;
using clitest::slurp;
using json = nlohmann::json;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace distributed_cli_test {
namespace {

struct Tmp : clitest::TempDir {
  Tmp() : clitest::TempDir("distcli") {}
};

void write_experiment(const fs::path& file, const std::string& train) {
  clitest::write_tiny_experiment(file, "dp", train, "{lengths: [32], examples: 8}");
}

std::vector<json> metrics(const fs::path& run) {
  std::ifstream in(run / "metrics.jsonl");
  std::vector<json> out;
  for (std::string line; std::getline(in, line);) {
    const json j = json::parse(line);
    if (j.contains("loss")) out.push_back(j);
  }
  return out;
}

// The CLI in the background, output to `log`; `rank` >= 0: as that rank of 2 (torchrun's
// variables, rank 0 serving on `port`).
pid_t spawn(const std::vector<std::string>& args, const fs::path& log, int rank = -1,
            int port = 0) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setenv("HYBRIDLAB_PLUGIN_PATH", "", 1);
    if (rank >= 0) {
      ::setenv("RANK", std::to_string(rank).c_str(), 1);
      ::setenv("WORLD_SIZE", "2", 1);
      ::setenv("MASTER_ADDR", "127.0.0.1", 1);
      ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      ::setenv("OMP_NUM_THREADS", "1", 1);
    }
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    std::vector<std::string> copy = args;
    std::vector<char*> argv;
    std::string exe = HYBRIDLAB_CLI;
    argv.push_back(exe.data());
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(exe.c_str(), argv.data());
    ::_exit(127);
  }
  return pid;
}

// The pid of the child of `parent` whose environment has RANK=`rank`; -1 if none (yet).
pid_t rank_pid(pid_t parent, int rank) {
  std::ifstream children("/proc/" + std::to_string(parent) + "/task/" + std::to_string(parent) +
                         "/children");
  for (pid_t pid = 0; children >> pid;) {
    std::ifstream env("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
    for (std::string kv; std::getline(env, kv, '\0');) {
      if (kv == "RANK=" + std::to_string(rank)) return pid;
    }
  }
  return -1;
}

int wait_exit(pid_t pid) {
  int st = 0;
  ::waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

template <class F>
bool eventually(F&& ok, double seconds = 60) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until) {
    if (ok()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

// A 2-rank job of `exp` (2000 steps) whose rank `rank` is SIGKILLed once `run` logged
// `min_steps` steps: the victim's pid, the launcher's wait status and the seconds it took to end.
struct KilledRank {
  pid_t victim = -1;
  int status = 0;
  double seconds = 0;
};
KilledRank kill_rank_in_training(const fs::path& exp, const fs::path& runs, const fs::path& run,
                                 const fs::path& log, int rank, size_t min_steps) {
  KilledRank k;
  const pid_t launcher = spawn(
      {"run", exp.string(), "--runs-dir", runs.string(), "--nproc-per-node", "2", "--quiet"}, log);
  REQUIRE(eventually([&] { return metrics(run).size() >= min_steps; }));
  k.victim = rank_pid(launcher, rank);
  REQUIRE(k.victim > 0);
  ::kill(k.victim, SIGKILL);
  const auto t0 = std::chrono::steady_clock::now();
  REQUIRE(eventually([&] { return ::waitpid(launcher, &k.status, WNOHANG) == launcher; }, 30));
  k.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return k;
}

}  // namespace

TEST_CASE("distributed cli: 2 local ranks log the losses of one process, rank 0 writes",
          "[distributed][cli]") {
  Tmp tmp;
  const fs::path exp = tmp.path / "dp.yaml";
  write_experiment(exp, "{steps: 20, batch_size: 4, warmup_steps: 2, log_every: 5}");
  const Result one = cli("run " + q(exp) + " --runs-dir " + q(tmp.path / "one") + " --quiet");
  REQUIRE(one.code == 0);
  const Result two = cli("run " + q(exp) + " --runs-dir " + q(tmp.path / "two") +
                         " --nproc-per-node 2 --master-addr 127.0.0.1");
  INFO(two.out);
  REQUIRE(two.code == 0);
  CHECK_THAT(two.out, Catch::Contains("[1/1] main on 2 ranks"));
  // One report, from rank 0.
  CHECK(two.out.find("1 finished, 0 skipped") == two.out.rfind("1 finished, 0 skipped"));
  const fs::path run = tmp.path / "two" / "dp" / "main";
  CHECK(json::parse(slurp(run / "status.json"))["state"] == "finished");
  CHECK(fs::exists(run / "results.json"));
  const auto a = metrics(tmp.path / "one" / "dp" / "main"), b = metrics(run);
  REQUIRE(a.size() == 20);
  REQUIRE(b.size() == 20);
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK(b[i]["loss"].get<double>() == Approx(a[i]["loss"].get<double>()).epsilon(1e-5));
    CHECK(b[i]["ranks"] == 2);
    CHECK(b[i]["allreduce_wait_s"].get<double>() >= 0.0);
  }
}

TEST_CASE("distributed cli: a killed rank stops the job naming it, a rerun resumes",
          "[distributed][cli]") {
  Tmp tmp;
  const fs::path exp = tmp.path / "dp.yaml", runs = tmp.path / "runs";
  write_experiment(exp, "{steps: 2000, batch_size: 4, warmup_steps: 2, checkpoint_every: 10}");
  const fs::path run = runs / "dp" / "main";
  const KilledRank k = kill_rank_in_training(exp, runs, run, tmp.path / "log", 1, 25);
  const std::string log = slurp(tmp.path / "log");
  INFO(log);
  CHECK(k.seconds < 10);
  CHECK(WIFEXITED(k.status));
  CHECK(WEXITSTATUS(k.status) == 128 + SIGKILL);
  CHECK_THAT(
      log, Catch::Contains("rank 1 (pid " + std::to_string(k.victim) + ") was killed by signal 9"));
  CHECK(json::parse(slurp(run / "status.json"))["state"] == "failed");
  REQUIRE(fs::exists(run / "checkpoint" / "state.pt"));

  // The rerun, on one process with fewer steps to go: it resumes from the checkpoint.
  const Result again = cli("run " + q(exp) + " --runs-dir " + q(runs) + " --quiet");
  INFO(again.out);
  CHECK(again.code == 0);
  const json res = json::parse(slurp(run / "results.json"));
  CHECK(res["train"]["resumed_from"].get<int64_t>() >= 20);
  CHECK(res["train"]["steps"] == 2000);
}

TEST_CASE("distributed cli: SIGTERM to the launcher stops every rank after one step, rerun resumes",
          "[distributed][cli]") {
  Tmp tmp;
  const fs::path exp = tmp.path / "dp.yaml", runs = tmp.path / "runs";
  write_experiment(exp, "{steps: 2000, batch_size: 4, warmup_steps: 2, checkpoint_every: 0}");
  const fs::path run = runs / "dp" / "main";
  const pid_t launcher = spawn({"run", exp.string(), "--runs-dir", runs.string(),
                                "--nproc-per-node", "2", "--only", "main", "--quiet"},
                               tmp.path / "log");
  REQUIRE(eventually([&] { return metrics(run).size() >= 10; }));
  ::kill(launcher, SIGTERM);
  int status = 0;
  REQUIRE(eventually([&] { return ::waitpid(launcher, &status, WNOHANG) == launcher; }, 30));
  const std::string log = slurp(tmp.path / "log");
  INFO(log);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 130);
  CHECK(json::parse(slurp(run / "status.json"))["state"] == "interrupted");
  const int64_t stopped = metrics(run).back()["step"].get<int64_t>();
  CHECK(stopped < 2000);
  const Result again = cli("run " + q(exp) + " --runs-dir " + q(runs) + " --quiet --no-report");
  INFO(again.out);
  CHECK(again.code == 0);
  const json res = json::parse(slurp(run / "results.json"));
  CHECK(res["train"]["resumed_from"].get<int64_t>() == stopped);
}

TEST_CASE("distributed cli: validation sets and eval variants scored by both ranks, as one process",
          "[distributed][cli]") {
  Tmp tmp;
  const fs::path exp = tmp.path / "tune.yaml";
  auto write = [&](const std::string& variants) {
    clitest::write_tiny_experiment(exp, "tune", "{steps: 12, batch_size: 4, warmup_steps: 2}",
                                   "{lengths: [32], examples: 8, variants: {" + variants + "}}",
                                   "sweep: {tune: {train.lr: [0.003, 0.01]}}\n");
  };
  const std::string both =
      "window: {model.attention.window: 8}, chunk8: {model.gated_deltanet.chunk_size: 8}";
  write(both);
  const Result one = cli("run " + q(exp) + " --runs-dir " + q(tmp.path / "one") + " --quiet");
  INFO(one.out);
  REQUIRE(one.code == 0);
  // The ranks' first run lacks a variant; the second run adds it to the finished runs, which
  // takes the path where rank 0 alone knows what is missing.
  write("window: {model.attention.window: 8}");
  Result two =
      cli("run " + q(exp) + " --runs-dir " + q(tmp.path / "two") + " --nproc-per-node 2 --quiet");
  INFO(two.out);
  REQUIRE(two.code == 0);
  write(both);
  two = cli("run " + q(exp) + " --runs-dir " + q(tmp.path / "two") + " --nproc-per-node 2 --quiet");
  INFO(two.out);
  REQUIRE(two.code == 0);
  for (const char* run : {"lr-0.003", "lr-0.01"}) {
    const json a = json::parse(slurp(tmp.path / "one" / "tune" / run / "results.json"));
    const json b = json::parse(slurp(tmp.path / "two" / "tune" / run / "results.json"));
    INFO(run << "\none process: " << a.dump() << "\n2 ranks: " << b.dump());
    REQUIRE(b["eval_variants"].size() == 2);
    CHECK(b["eval_variants"][0]["name"] == "window");
    CHECK(b["eval_variants"][1]["name"] == "chunk8");
    const std::vector<std::pair<json, json>> scored = {
        {a["validation"]["32"], b["validation"]["32"]},
        {a["eval_variants"][0]["eval"]["32"], b["eval_variants"][0]["eval"]["32"]},
        {a["eval_variants"][1]["eval"]["32"], b["eval_variants"][1]["eval"]["32"]}};
    for (const auto& [x, y] : scored) {
      REQUIRE(y.size() == x.size());
      CHECK(y["examples"] == 8);
      for (const auto& [metric, value] : x.items()) {
        if (!value.is_number()) continue;
        INFO(metric);
        CHECK(y[metric].get<double>() == Approx(value.get<double>()).epsilon(1e-4));
      }
    }
  }
}

TEST_CASE("distributed cli: bad input is one error, exit 2, nothing started or written",
          "[distributed][cli]") {
  Tmp tmp;
  const fs::path exp = tmp.path / "dp.yaml", runs = tmp.path / "runs";
  write_experiment(exp, "{steps: 2, batch_size: 6}");
  Result r = cli("run " + q(exp) + " --runs-dir " + q(runs) + " --nproc-per-node 0");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("--nproc-per-node"));
  r = cli("run " + q(exp) + " --runs-dir " + q(runs) + " --nproc-per-node 4");
  INFO(r.out);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("dp.yaml:5:") &&
                        Catch::Contains("train.batch_size: 6 (run 'main') is not a multiple of "
                                        "the 4 ranks"));
  r = cli("run " + q(exp) + " --runs-dir " + q(runs) + " --nproc-per-node 2 --jobs 2");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("drop --jobs"));
  r = cli("run " + q(exp) + " --runs-dir " + q(runs) + " --nproc-per-node 3 --nnodes 2 " +
          "--node-rank 5");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("--node-rank 5 is not below --nnodes 2"));
  r = cli("run " + q(exp) + " --runs-dir " + q(runs) +
          " train.batch_size=4 runtime.device=cuda --nproc-per-node 2");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("CUDA is not available"));
  CHECK_FALSE(fs::exists(runs));

  // Ranks started by hand (torchrun's variables) with different overrides: both stop, exit 2,
  // naming the rank and the line that differs; nothing is written.
  const int port = testsupport::unused_port();
  const pid_t r0 = spawn({"run", exp.string(), "train.batch_size=4", "--runs-dir", runs.string()},
                         tmp.path / "log0", 0, port);
  const pid_t r1 = spawn(
      {"run", exp.string(), "train.batch_size=4", "train.lr=0.5", "--runs-dir", runs.string()},
      tmp.path / "log1", 1, port);
  CHECK(wait_exit(r0) == 2);
  CHECK(wait_exit(r1) == 2);
  for (const char* log : {"log0", "log1"}) {
    INFO(slurp(tmp.path / log));
    CHECK_THAT(slurp(tmp.path / log),
               Catch::Contains("rank 1's experiment config differs from rank 0's") &&
                   Catch::Contains("lr: 0.5"));
  }
  CHECK_FALSE(fs::exists(runs));
}

}  // namespace distributed_cli_test

namespace distributed_cli_test {

TEST_CASE("distributed cli: a master port in use is one error at once, nothing started",
          "[distributed][cli]") {
  Tmp tmp;
  const fs::path exp = tmp.path / "dp.yaml", runs = tmp.path / "runs";
  write_experiment(exp, "{steps: 2, batch_size: 4}");
  testsupport::BoundSocket taken;
  REQUIRE(::listen(taken.fd, 1) == 0);
  const auto t0 = std::chrono::steady_clock::now();
  const Result r = cli("run " + q(exp) + " --runs-dir " + q(runs) +
                           " --nproc-per-node 2 --master-port " + std::to_string(taken.port),
                       60);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(r.out);
  CHECK(r.code == 2);
  CHECK(took < 10);
  CHECK_THAT(r.out, Catch::Contains("--master-port " + std::to_string(taken.port)) &&
                        Catch::Contains("in use"));
  CHECK_FALSE(fs::exists(runs));
}

TEST_CASE("distributed cli: a rank that never joins is named after the rendezvous timeout",
          "[distributed][cli]") {
  Tmp tmp;
  const fs::path exp = tmp.path / "dp.yaml", runs = tmp.path / "runs";
  write_experiment(exp, "{steps: 2, batch_size: 4}");
  ::setenv("HYBRIDLAB_RENDEZVOUS_TIMEOUT_S", "3", 1);
  const pid_t r0 = spawn({"run", exp.string(), "--runs-dir", runs.string()}, tmp.path / "log0", 0,
                         testsupport::unused_port());
  ::unsetenv("HYBRIDLAB_RENDEZVOUS_TIMEOUT_S");
  int status = 0;
  REQUIRE(eventually([&] { return ::waitpid(r0, &status, WNOHANG) == r0; }, 30));
  const std::string log = slurp(tmp.path / "log0");
  INFO(log);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 2);
  CHECK_THAT(log, Catch::Contains("rank(s) 1 of 2 did not join the rendezvous") &&
                      Catch::Contains("within 3 s"));
  CHECK_FALSE(fs::exists(runs));
}

TEST_CASE("distributed cli: rank 0 killed records its run failed, naming it",
          "[distributed][cli]") {
  Tmp tmp;
  const fs::path exp = tmp.path / "dp.yaml", runs = tmp.path / "runs";
  write_experiment(exp, "{steps: 2000, batch_size: 4, warmup_steps: 2, checkpoint_every: 10}");
  const fs::path run = runs / "dp" / "main";
  const KilledRank k = kill_rank_in_training(exp, runs, run, tmp.path / "log", 0, 15);
  INFO(slurp(tmp.path / "log"));
  CHECK(WIFEXITED(k.status));
  CHECK(WEXITSTATUS(k.status) == 128 + SIGKILL);
  const json st = json::parse(slurp(run / "status.json"));
  CHECK(st["state"] == "failed");
  CHECK_THAT(
      st["error"].get<std::string>(),
      Catch::Contains("rank 0 (pid " + std::to_string(k.victim) + ") was killed by signal 9"));
}

}  // namespace distributed_cli_test
