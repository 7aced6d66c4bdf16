// A run folder holds only the regular files hybridlab wrote: a link or a special file in the
// place of one is a clear error naming it, nothing is written through a link out of the runs
// folder, and no read blocks on a pipe.

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "hybridlab/run.h"
#include "hybridlab/trainer.h"
#include "runs_support.h"
#include "util/atomic_file.h"

using namespace hybridlab;
namespace fs = std::filesystem;

namespace plain_files_test {
namespace {

const std::string kTrain =
    "train: {steps: 6, batch_size: 4, lr: 0.01, warmup_steps: 0, checkpoint_every: 3, seed: 2}\n";

ExecuteOptions stopping_after(int64_t step) {
  ExecuteOptions o;
  o.quiet = true;
  o.stop_after = step;
  return o;
}

}  // namespace

TEST_CASE("plain files: require_plain_file names links, folders and pipes, absent is fine",
          "[runs][plain_files]") {
  runstest::TempDir tmp;
  const fs::path file = tmp.path / "file", link = tmp.path / "link", fifo = tmp.path / "fifo";
  std::ofstream(file) << "x";
  fs::create_symlink(file, link);
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  CHECK_NOTHROW(require_plain_file(file.string()));
  CHECK_NOTHROW(require_plain_file((tmp.path / "absent").string()));
  CHECK_THROWS_WITH(require_plain_file(link.string()), Catch::Contains("link' is a symbolic link"));
  CHECK_THROWS_WITH(require_plain_file(tmp.path.string()), Catch::Contains("is a folder"));
  CHECK_THROWS_WITH(read_plain_file(fifo.string()), Catch::Contains("is a special file"));
  // A dangling link is present, not absent.
  fs::create_symlink(tmp.path / "nowhere", tmp.path / "dangling");
  CHECK(path_present((tmp.path / "dangling").string()));
  CHECK_FALSE(path_present((tmp.path / "absent").string()));
}

TEST_CASE("plain files: a resumed run does not append through a linked metrics.jsonl",
          "[runs][plain_files]") {
  runstest::TempDir tmp, elsewhere;
  const RunFolder f = runstest::prepare_main(tmp.path, runstest::tiny_yaml(kTrain));
  REQUIRE_THROWS_AS(execute_run_folder(f, stopping_after(3)), Interrupted);
  const fs::path outside = elsewhere.path / "outside.txt";
  std::ofstream(outside) << "untouched\n";
  fs::remove(f.metrics_path());
  fs::create_symlink(outside, f.metrics_path());
  CHECK_THROWS_WITH(execute_run_folder(f, stopping_after(0)),
                    Catch::Contains("metrics.jsonl' is a symbolic link"));
  CHECK(runstest::slurp(outside) == "untouched\n");
}

TEST_CASE("plain files: a linked source.yaml or a piped results.json is named, not read",
          "[runs][plain_files]") {
  runstest::TempDir tmp, elsewhere;
  const RunFolder f = runstest::prepare_main(tmp.path, runstest::tiny_yaml(kTrain));
  const fs::path copy = elsewhere.path / "source.yaml";
  fs::copy_file(fs::path(f.dir()) / "source.yaml", copy);
  fs::remove(fs::path(f.dir()) / "source.yaml");
  fs::create_symlink(copy, fs::path(f.dir()) / "source.yaml");
  CHECK_THROWS_WITH(f.source(), Catch::Contains("source.yaml' is a symbolic link"));
  const fs::path results = fs::path(f.dir()) / "results.json";
  REQUIRE(::mkfifo(results.c_str(), 0644) == 0);
  CHECK_THROWS_WITH(f.results(), Catch::Contains("results.json' is a special file"));
  const fs::path status = fs::path(f.dir()) / "status.json";
  fs::remove(status);
  fs::create_directory(status);
  CHECK_THROWS_WITH(f.status(), Catch::Contains("status.json' is a folder"));
}

}  // namespace plain_files_test

namespace plain_files_test {

TEST_CASE("remove_stale_temporaries: files of dead writers go, a live writer's stay",
          "[runs][atomic]") {
  const fs::path dir = fs::temp_directory_path() / ("hl_stale_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "checkpoint");
  // A pid that no longer runs: a child that has exited and been reaped.
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  int status = 0;
  ::waitpid(dead, &status, 0);
  const std::string d = std::to_string(dead), me = std::to_string(::getpid());
  for (const fs::path& p :
       {dir / ("results.json.tmp." + d), dir / "checkpoint" / ("state.pt.tmp." + d),
        dir / ("status.json.tmp." + me), dir / "notes.tmp.x", dir / ("metrics.jsonl" + d)}) {
    std::ofstream(p) << "x";
  }
  CHECK(remove_stale_temporaries(dir.string()) == 2);
  CHECK_FALSE(fs::exists(dir / ("results.json.tmp." + d)));
  CHECK_FALSE(fs::exists(dir / "checkpoint" / ("state.pt.tmp." + d)));
  CHECK(fs::exists(dir / ("status.json.tmp." + me)));  // this process is alive
  CHECK(fs::exists(dir / "notes.tmp.x"));
  CHECK(fs::exists(dir / ("metrics.jsonl" + d)));
  CHECK(remove_stale_temporaries((dir / "absent").string()) == 0);
  fs::remove_all(dir);
}

}  // namespace plain_files_test
