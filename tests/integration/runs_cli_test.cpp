// Run-folder guarantees end to end: finished is final for every command, one rule for a changed
// config, one writer per run, no orphaned child, checkpoint errors on a full disk, safe folder
// names, crash-contained plugins.

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <array>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "cli_support.h"

namespace fs = std::filesystem;
using clitest::cli;
using clitest::q;
using clitest::Result;
using clitest::slurp;
using json = nlohmann::json;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace runs_cli_test {
namespace {

// Starts the CLI in the background (output to `log`); `limit_bytes` > 0 caps file sizes.
pid_t spawn(const std::vector<std::string>& args, const fs::path& log, long limit_bytes = 0) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setenv("HYBRIDLAB_PLUGIN_PATH", "", 1);
    ::setenv("OMP_NUM_THREADS", "1", 1);
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    if (limit_bytes > 0) {
      ::signal(SIGXFSZ, SIG_IGN);  // inherited through exec: writes fail with EFBIG instead
      struct rlimit lim {
        static_cast<rlim_t>(limit_bytes), static_cast<rlim_t>(limit_bytes)
      };
      ::setrlimit(RLIMIT_FSIZE, &lim);
    }
    std::vector<char*> argv;
    std::string exe = HYBRIDLAB_CLI;
    argv.push_back(exe.data());
    std::vector<std::string> copy = args;
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(exe.c_str(), argv.data());
    ::_exit(127);
  }
  return pid;
}

int wait_exit(pid_t pid) {
  int st = 0;
  ::waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

struct Tmp : clitest::TempDir {
  Tmp() : clitest::TempDir("runscli") {}
};

json status_of(const fs::path& run) {
  try {
    return json::parse(slurp(run / "status.json"));
  } catch (const std::exception&) {
    return json::object();
  }
}

// Waits (up to `seconds`) for `ok()`.
template <class F>
bool eventually(F&& ok, double seconds = 60) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (ok()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return ok();
}

bool lock_free(const fs::path& run) {
  const int fd = ::open((run / "lock").c_str(), O_RDWR);
  if (fd < 0) return true;
  const bool ok = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
  ::close(fd);
  return ok;
}

void write_experiment(
    const fs::path& file, const std::string& extra = "",
    const std::string& train = "{steps: 6, batch_size: 4, warmup_steps: 1, checkpoint_every: 3}") {
  clitest::write_tiny_experiment(file, "tiny", train, "{lengths: [32, 64], examples: 8}", extra);
}

}  // namespace

TEST_CASE("runs cli: train skips a finished run and never overwrites it and eval only adds",
          "[runs][cli]") {
  Tmp tmp;
  const fs::path exp = tmp.path / "tiny.yaml", runs = tmp.path / "runs";
  write_experiment(exp);
  const fs::path run = runs / "tiny" / "main";
  const Result r = cli("run " + q(exp) + " --runs-dir " + q(runs) + " --quiet");
  INFO(r.out);
  REQUIRE(r.code == 0);
  REQUIRE(status_of(run)["state"] == "finished");
  const std::string results = slurp(run / "results.json");
  // A temporary file of a writer that was killed before its rename (pid 2^22 + 1 is above any
  // default pid_max, so never alive): removed by the next command that takes the run's lock.
  const fs::path stale = run / "checkpoint" / "state.pt.tmp.4194305";
  std::ofstream(stale) << "partial";

  const Result again = cli("train " + q(exp) + " --runs-dir " + q(runs));
  INFO(again.out);
  CHECK(again.code == 0);
  CHECK_THAT(again.out, Catch::Contains("main: finished before, skipped"));
  CHECK_FALSE(fs::exists(stale));
  CHECK(status_of(run)["state"] == "finished");
  CHECK(slurp(run / "results.json") == results);

  const Result changed = cli("train " + q(exp) + " train.lr=0.001 --runs-dir " + q(runs));
  INFO(changed.out);
  CHECK(changed.code == 1);
  CHECK_THAT(changed.out, Catch::Contains("not overwritten"));
  CHECK(status_of(run)["state"] == "finished");
  CHECK(slurp(run / "results.json") == results);

  // eval at a new length adds it; the training summary and the other lengths stay.
  const Result ev = cli("eval " + q(run) + " --lengths 48");
  INFO(ev.out);
  CHECK(ev.code == 0);
  const json before = json::parse(results), after = json::parse(slurp(run / "results.json"));
  CHECK(after["train"] == before["train"]);
  CHECK(after["eval"]["32"] == before["eval"]["32"]);
  CHECK(after["eval"]["64"] == before["eval"]["64"]);
  CHECK(after["eval"].contains("48"));
  CHECK(status_of(run)["state"] == "finished");
}

TEST_CASE("runs cli: train then run evaluates without retraining", "[runs][cli]") {
  Tmp tmp;
  const fs::path exp = tmp.path / "tiny.yaml", runs = tmp.path / "runs";
  write_experiment(exp);
  const fs::path run = runs / "tiny" / "main";
  const Result t = cli("train " + q(exp) + " --runs-dir " + q(runs) + " --quiet");
  INFO(t.out);
  REQUIRE(t.code == 0);
  CHECK(status_of(run)["state"] == "trained");
  const json trained = json::parse(slurp(run / "results.json"));
  CHECK(trained["eval"].empty());
  const Result r = cli("run " + q(exp) + " --runs-dir " + q(runs) + " --quiet");
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK(status_of(run)["state"] == "finished");
  const json done = json::parse(slurp(run / "results.json"));
  CHECK(done["train"]["final_loss"] == trained["train"]["final_loss"]);
  CHECK(done["train"]["steps"] == 6);
  CHECK(done["train"]["resumed_from"] == 6);  // nothing retrained
  CHECK(done["eval"].contains("64"));
}

TEST_CASE("runs cli: --only with a changed config restarts an interrupted run like run does",
          "[runs][cli]") {
  Tmp tmp;
  const fs::path exp = tmp.path / "tiny.yaml", runs = tmp.path / "runs";
  write_experiment(exp, "", "{steps: 100000, batch_size: 4, warmup_steps: 1, checkpoint_every: 0}");
  const fs::path run = runs / "tiny" / "main";
  // Interrupted by SIGTERM to the parent, which forwards it: the child checkpoints and stops.
  const pid_t pid =
      spawn({"run", exp.string(), "--runs-dir", runs.string(), "--quiet"}, tmp.path / "log1");
  REQUIRE(eventually([&] {
    return status_of(run)["state"] == "running" && fs::exists(run / "metrics.jsonl") &&
           fs::file_size(run / "metrics.jsonl") > 0;
  }));
  ::kill(pid, SIGTERM);
  CHECK(wait_exit(pid) == 130);
  INFO(slurp(tmp.path / "log1"));
  REQUIRE(status_of(run)["state"] == "interrupted");
  REQUIRE(fs::exists(run / "checkpoint" / "state.pt"));

  // A new d_model (and fewer steps): its checkpoint no longer fits; --only says so and restarts.
  const Result r =
      cli("run " + q(exp) + " model.d_model=24 train.steps=3 --only main --runs-dir " + q(runs));
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("configuration changed since it was interrupted; starting "
                                    "afresh"));
  CHECK(status_of(run)["state"] == "finished");
  const json res = json::parse(slurp(run / "results.json"));
  CHECK(res["train"]["steps"] == 3);
  CHECK(res["train"]["resumed_from"] == 0);
  CHECK_THAT(slurp(run / "config.yaml"), Catch::Contains("d_model: 24"));
}

TEST_CASE("runs cli: one writer per run and killing the parent stops its child", "[runs][cli]") {
  Tmp tmp;
  const fs::path exp = tmp.path / "tiny.yaml", runs = tmp.path / "runs";
  write_experiment(exp, "", "{steps: 100000, batch_size: 4, warmup_steps: 1, checkpoint_every: 0}");
  const fs::path run = runs / "tiny" / "main";
  const pid_t parent =
      spawn({"run", exp.string(), "--runs-dir", runs.string(), "--quiet"}, tmp.path / "log1");
  REQUIRE(eventually([&] { return status_of(run)["state"] == "running"; }));
  const std::string source = slurp(run / "source.yaml");
  const long child = status_of(run).value("pid", 0L);
  REQUIRE(child > 0);
  CHECK(child != parent);

  // A second run of the same folder with another config: refused, naming the writer.
  const Result second =
      cli("run " + q(exp) + " train.steps=60 --runs-dir " + q(runs) + " --no-report");
  INFO(second.out);
  CHECK(second.code == 1);
  CHECK_THAT(second.out, Catch::Contains("in use by process " + std::to_string(child)));
  CHECK(slurp(run / "source.yaml") == source);
  CHECK(status_of(run)["state"] == "running");
  const Result only = cli("run " + q(exp) + " --only main --runs-dir " + q(runs));
  CHECK(only.code == 2);
  CHECK_THAT(only.out, Catch::Contains("in use by process " + std::to_string(child)));

  // kill -9 of the parent: the child gets SIGTERM (PR_SET_PDEATHSIG), checkpoints and stops.
  ::kill(parent, SIGKILL);
  wait_exit(parent);
  // (The child's exit is seen through its lock and status: an orphan may stay a zombie.)
  CHECK(eventually([&] { return lock_free(run) && status_of(run)["state"] == "interrupted"; }));
  CHECK(status_of(run)["state"] == "interrupted");
  CHECK(status_of(run).value("pid", 0L) == child);
  CHECK(fs::exists(run / "checkpoint" / "state.pt"));
}

TEST_CASE("runs cli: SIGTERM or SIGINT to the parent and its child together checkpoints and stops",
          "[runs][cli]") {
  // What SLURM, systemd and `timeout` do: signal every process of the job at once. The parent
  // also forwards its own SIGTERM, so the child sees two; both are one stop request.
  for (const int sig : {SIGTERM, SIGINT}) {
    INFO("signal " << sig);
    Tmp tmp;
    const fs::path exp = tmp.path / "tiny.yaml", runs = tmp.path / "runs";
    // Steps long enough (batch 256) that the forwarded signal arrives while the child trains.
    write_experiment(exp, "",
                     "{steps: 100000, batch_size: 256, warmup_steps: 1, checkpoint_every: 0}");
    const fs::path run = runs / "tiny" / "main";
    const pid_t parent =
        spawn({"run", exp.string(), "--runs-dir", runs.string(), "--quiet"}, tmp.path / "log");
    REQUIRE(eventually([&] { return status_of(run)["state"] == "running"; }));
    const long child = status_of(run).value("pid", 0L);
    REQUIRE(child > 0);
    REQUIRE(eventually([&] { return fs::exists(run / "metrics.jsonl"); }));
    ::kill(static_cast<pid_t>(child), sig);
    ::kill(parent, sig);
    CHECK(wait_exit(parent) == 130);
    INFO(slurp(tmp.path / "log"));
    CHECK(eventually([&] { return lock_free(run); }));
    CHECK(status_of(run)["state"] == "interrupted");
    CHECK(fs::exists(run / "checkpoint" / "state.pt"));
  }
}

TEST_CASE("runs cli: a closed stdout or stderr pipe stops the run like SIGTERM", "[runs][cli]") {
  // `hybridlab run exp.yaml | head -1`: the reader goes away and the next line written raises
  // SIGPIPE, which used to end the process before its records (141; the run left `running`).
  // fd 1: the parent's "[1/1] main" line; fd 2: an in-process run's progress line.
  for (const int fd : {1, 2}) {
    INFO("closed fd " << fd);
    Tmp tmp;
    const fs::path exp = tmp.path / "tiny.yaml", runs = tmp.path / "runs";
    write_experiment(exp, "",
                     "{steps: 100000, batch_size: 4, warmup_steps: 1, checkpoint_every: 0, "
                     "log_every: 1}");
    const fs::path run = runs / "tiny" / "main";
    std::array<int, 2> p{};
    REQUIRE(::pipe(p.data()) == 0);
    ::close(p[0]);  // the reader is gone before the first line
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::setenv("HYBRIDLAB_PLUGIN_PATH", "", 1);
      ::setenv("OMP_NUM_THREADS", "1", 1);
      const int log = ::open((tmp.path / "log").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(log, fd == 1 ? 2 : 1);
      ::dup2(p[1], fd);
      ::signal(SIGPIPE, SIG_DFL);
      std::string exe = HYBRIDLAB_CLI;
      std::vector<std::string> args = {exe, "run", exp.string(), "--runs-dir", runs.string()};
      if (fd == 2) args.insert(args.end(), {"--only", "main"});
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(exe.c_str(), argv.data());
      ::_exit(127);
    }
    ::close(p[1]);
    CHECK(wait_exit(pid) == 130);
    INFO(slurp(tmp.path / "log"));
    CHECK(eventually([&] { return lock_free(run); }));
    CHECK(status_of(run)["state"] == "interrupted");
  }
}

TEST_CASE("runs cli: a full disk while checkpointing is a recorded error, no temp left",
          "[runs][cli]") {
  Tmp tmp;
  const fs::path exp = tmp.path / "tiny.yaml", runs = tmp.path / "runs";
  write_experiment(exp);
  const fs::path run = runs / "tiny" / "main";
  // Files cannot grow past 16 KiB: status and config fit, the checkpoint does not.
  const pid_t pid =
      spawn({"run", exp.string(), "--runs-dir", runs.string(), "--quiet", "--no-report"},
            tmp.path / "log", 16384);
  const int code = wait_exit(pid);
  INFO(slurp(tmp.path / "log"));
  CHECK(code == 1);
  json st = status_of(run);
  CHECK(st["state"] == "failed");
  const std::string err = st.value("error", "");
  CHECK_THAT(err, Catch::Contains("cannot write checkpoint"));
  CHECK_THAT(err, Catch::Contains((run / "checkpoint" / "state.pt").string()));
  CHECK_THAT(err, Catch::Contains("free on the filesystem"));
  for (const auto& e : fs::directory_iterator(run / "checkpoint")) {
    CHECK(e.path().filename().string().find(".tmp.") == std::string::npos);
  }
}

TEST_CASE("runs cli: names stay inside the runs folder and distinct", "[runs][cli]") {
  Tmp tmp;
  const fs::path exp = tmp.path / "bad.yaml", runs = tmp.path / "sub" / "runs";
  write_experiment(exp);
  std::string text = slurp(exp);
  text.replace(0, text.find('\n'), "name: ..");
  std::ofstream(exp) << text;
  const Result r = cli("run " + q(exp) + " --runs-dir " + q(runs) + " --quiet");
  INFO(r.out);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("bad.yaml:1:"));
  CHECK(!fs::exists(tmp.path / "sub"));

  write_experiment(exp, "sweep: {grid: {description: [\"α β\", \"γ δ\", \"a b\", a_b]}}\n");
  const Result list = cli("sweep list " + q(exp));
  INFO(list.out);
  CHECK(list.code == 0);
  CHECK_THAT(list.out, Catch::Contains("4 run(s)"));
  CHECK_THAT(list.out, Catch::Contains("description-a_b "));
}

TEST_CASE("runs cli: a segfaulting plugin fails its variant only and plugins list survives it",
          "[runs][cli]") {
  Tmp tmp;
  const fs::path exp = tmp.path / "tiny.yaml", runs = tmp.path / "runs";
  const std::string segv =
      std::string(HYBRIDLAB_BINARY_DIR) + "/test-fixtures/segfaulting/segfaulting.so";
  write_experiment(
      exp, "sweep:\n  grid:\n    model.attention.position.scheme: [nope, '" + segv + "']\n");
  const Result r = cli("run " + q(exp) + " --runs-dir " + q(runs) + " --quiet");
  INFO(r.out);
  CHECK(r.code == 1);
  CHECK(status_of(runs / "tiny" / "scheme-nope")["state"] == "finished");
  json bad = status_of(runs / "tiny" / "scheme-segfaulting.so");
  CHECK(bad["state"] == "failed");
  CHECK_THAT(bad.value("error", ""),
             Catch::Contains("Segmentation fault") && Catch::Contains("segfaulting.so"));
  CHECK_THAT(slurp(runs / "tiny" / "summary.md"),
             Catch::Contains("scheme-segfaulting.so (failed)"));

  const Result list = cli("plugins list --path '" + std::string(HYBRIDLAB_BINARY_DIR) +
                          "/test-fixtures/segfaulting' --path '" HYBRIDLAB_TEST_PLUGIN_DIR "'");
  INFO(list.out);
  CHECK(list.code == 0);
  CHECK_THAT(list.out, Catch::Contains("crashed: plugin '") && Catch::Contains("segfaulting.so'"));
  CHECK_THAT(list.out, Catch::Contains("Segmentation fault"));
  CHECK_THAT(list.out, Catch::Contains("rope"));
}

}  // namespace runs_cli_test

namespace runs_cli_test {

TEST_CASE("runs cli: a train.init_from that cannot start the run is refused before any write",
          "[runs][cli]") {
  Tmp tmp;
  const fs::path exp = tmp.path / "tiny.yaml", runs = tmp.path / "runs";
  const auto refused = [&](const std::string& from, const std::string& why) {
    write_experiment(exp, "",
                     "{steps: 2, batch_size: 4, warmup_steps: 0, init_from: '" + from + "'}");
    const Result r = cli("run " + q(exp) + " --runs-dir " + q(runs));
    INFO(r.out);
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Catch::Contains("tiny.yaml:") && Catch::Contains("train.init_from") &&
                          Catch::Contains(why));
    CHECK_FALSE(fs::exists(runs / "tiny"));
  };
  refused((tmp.path / "nowhere").string(), "does not exist");
  refused(exp.string(), "is a file, not a run folder");
  refused(tmp.path.string(), "is not a run folder");
  // A trained source whose checkpoint was cut short: refused here, and the advice is about the
  // source (this run has nothing to delete).
  const fs::path source_runs = tmp.path / "source_runs";
  write_experiment(exp, "", "{steps: 2, batch_size: 4, warmup_steps: 0}");
  REQUIRE(cli("run " + q(exp) + " --runs-dir " + q(source_runs) + " --quiet").code == 0);
  // A finished run is read from its weights file (train/weights_file.h).
  const fs::path ckpt = source_runs / "tiny" / "main" / "checkpoint" / "weights.safetensors";
  REQUIRE(fs::exists(ckpt));
  fs::resize_file(ckpt, fs::file_size(ckpt) / 2);
  refused((source_runs / "tiny" / "main").string(), "holds an unreadable checkpoint");
  write_experiment(exp, "",
                   "{steps: 2, batch_size: 4, warmup_steps: 0, init_from: '" +
                       (source_runs / "tiny" / "main").string() + "'}");
  const Result r = cli("run " + q(exp) + " --runs-dir " + q(runs));
  CHECK_THAT(r.out, Catch::Contains("train the source run again") && !Catch::Contains("delete it"));
}

}  // namespace runs_cli_test
