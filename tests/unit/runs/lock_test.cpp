// RunLock: one writer per run folder; a dead holder's lock is taken over.

#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include "hybridlab/run_record.h"
#include "runs_support.h"

using namespace hybridlab;

TEST_CASE("run lock: a second writer is refused with the holder's pid", "[runs][lock]") {
  runstest::TempDir tmp;
  const std::string dir = (tmp.path / "run").string();
  int ready[2], release[2];
  REQUIRE(::pipe(ready) == 0);
  REQUIRE(::pipe(release) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // Another process holds the lock until told to go.
    RunLock lock(dir);
    char c = 1;
    [[maybe_unused]] ssize_t n = ::write(ready[1], &c, 1);
    n = ::read(release[0], &c, 1);
    ::_exit(0);
  }
  char c = 0;
  REQUIRE(::read(ready[0], &c, 1) == 1);
  CHECK(RunLock::holder(dir) == child);
  try {
    RunLock second(dir);
    FAIL("expected RunBusy");
  } catch (const RunBusy& e) {
    CHECK_THAT(e.what(), Catch::Contains("in use by process " + std::to_string(child)));
    CHECK_THAT(e.what(), Catch::Contains(dir + "/lock"));
  }
  // Killed without any cleanup: the kernel drops the lock, the next writer takes it over.
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  REQUIRE(WIFSIGNALED(status));
  RunLock mine(dir);
  CHECK(RunLock::holder(dir) == ::getpid());
  // Within one process too: a second lock object on the same folder is a second writer.
  CHECK_THROWS_AS(RunLock(dir), RunBusy);
}

TEST_CASE("run lock: an inherited descriptor is adopted only when it holds the lock",
          "[runs][lock]") {
  runstest::TempDir tmp;
  const std::string dir = (tmp.path / "run").string();
  RunLock lock(dir);
  // The same descriptor (as a child would inherit it) is accepted.
  const int dup = ::dup(lock.fd());
  { RunLock adopted = RunLock::adopt(dup, dir); }
  // A descriptor of another file is not.
  runstest::TempDir other;
  RunLock other_lock((other.path / "run").string());
  CHECK_THROWS_WITH(RunLock::adopt(::dup(other_lock.fd()), dir),
                    Catch::Contains("does not hold the lock"));
  CHECK_THROWS_AS(RunLock::adopt(-1, dir), UserError);
}
