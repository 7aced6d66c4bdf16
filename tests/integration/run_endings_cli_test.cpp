// How a run ends is what its records say: a non-finite metric is stored and
// shown as such and never makes results.json unreadable; a child that exits 0
// before recording `finished` is a failure; a child whose step hangs ends
// itself within its grace after a stop or its parent's death. The misbehaving
// fixture plugin (tests/fixtures/plugins/misbehaving.cpp) does the harm.

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

template <class F>
bool eventually(F&& ok, double seconds) {
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

// Whether process `pid` has ended (gone, or a zombie nobody reaped).
bool ended(long pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), {});
  const size_t paren = text.rfind(')');
  return text.empty() || paren == std::string::npos || text.compare(paren + 2, 1, "Z") == 0;
}

// `hybridlab run EXP` in the background, its output to `log`, with
// HYBRIDLAB_STOP_GRACE=2.
pid_t spawn_run(const fs::path& exp, const fs::path& runs, const fs::path& log) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setenv("HYBRIDLAB_PLUGIN_PATH", "", 1);
    ::setenv("OMP_NUM_THREADS", "1", 1);
    ::setenv("HYBRIDLAB_STOP_GRACE", "2", 1);
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::execl(HYBRIDLAB_CLI, HYBRIDLAB_CLI, "run", exp.c_str(), "--runs-dir", runs.c_str(), "--quiet",
            "--no-report", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

int wait_exit(pid_t pid) {
  int st = 0;
  ::waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// Kills `pid` if it still runs when the test ends (a failed check must not
// leave it spinning).
struct KillAtEnd {
  long pid = 0;
  ~KillAtEnd() {
    if (pid > 0 && !ended(pid)) ::kill(static_cast<pid_t>(pid), SIGKILL);
  }
};

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

TEST_CASE(
    "run endings: a child whose step hangs ends itself after its parent "
    "is killed",
    "[runs][cli]") {
  Tmp tmp;
  const fs::path exp = tmp.path / "tiny.yaml", runs = tmp.path / "runs";
  write_experiment(exp, "action: hang, at_call: 3",
                   "{steps: 1000, batch_size: 2, warmup_steps: 1}");
  const fs::path run = runs / "tiny" / "main", log = tmp.path / "log";
  const pid_t parent = spawn_run(exp, runs, log);
  // The fixture says when its third call (step 3's forward) starts to hang.
  REQUIRE(eventually([&] { return slurp(log).find("hang at rotate call 3") != std::string::npos; },
                     120));
  KillAtEnd child{json_of(run / "status.json").value("pid", 0L)};
  REQUIRE(child.pid > 0);
  CHECK(child.pid != parent);
  ::kill(parent, SIGKILL);
  wait_exit(parent);
  // Without a deadline the child would wait forever; with
  // HYBRIDLAB_STOP_GRACE=2 it ends in ~2 s.
  CHECK(eventually([&] { return ended(child.pid) && lock_free(run); }, 30));
  const json st = json_of(run / "status.json");
  CHECK(st["state"] == "interrupted");
  CHECK_THAT(st.value("error", ""), Catch::Contains("did not stop within 2 s of"));
  CHECK(last_step(run / "metrics.jsonl") == 2);
}

TEST_CASE(
    "run endings: a stop request to a child whose step hangs ends the "
    "run interrupted",
    "[runs][cli]") {
  Tmp tmp;
  const fs::path exp = tmp.path / "tiny.yaml", runs = tmp.path / "runs";
  write_experiment(exp, "action: hang, at_call: 3",
                   "{steps: 1000, batch_size: 2, warmup_steps: 1}");
  const fs::path run = runs / "tiny" / "main", log = tmp.path / "log";
  const pid_t parent = spawn_run(exp, runs, log);
  REQUIRE(eventually([&] { return slurp(log).find("hang at rotate call 3") != std::string::npos; },
                     120));
  KillAtEnd child{json_of(run / "status.json").value("pid", 0L)};
  REQUIRE(child.pid > 0);
  // SIGTERM to `run` is forwarded to the child once; the child's step never
  // returns to see it.
  const auto t0 = std::chrono::steady_clock::now();
  ::kill(parent, SIGTERM);
  const int code = wait_exit(parent);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(slurp(log));
  CHECK(code == 130);
  CHECK(secs < 30);
  CHECK(ended(child.pid));
  CHECK(lock_free(run));
  const json st = json_of(run / "status.json");
  CHECK(st["state"] == "interrupted");
  CHECK_THAT(st.value("error", ""), Catch::Contains("did not stop within 2 s of the stop request"));
}

}  // namespace run_endings_cli_test
