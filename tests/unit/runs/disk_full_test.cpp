// A full disk while writing: a clear error with the file and the free space, no temp files left;
// plot temp files of a killed report are removed by the next one.

#include <catch2/catch.hpp>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>

#include "hybridlab/error.h"
#include "hybridlab/report.h"
#include "hybridlab/run_record.h"
#include "runs_support.h"
#include "util/atomic_file.h"

using namespace hybridlab;
namespace fs = std::filesystem;

TEST_CASE("disk full: write_file_atomic names the file and the free space, removes its temp",
          "[runs][disk]") {
  runstest::TempDir tmp;
  const fs::path target = tmp.path / "big.bin";
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // Files of this process cannot grow past 4 KiB: writes fail with EFBIG, as on a full disk
    // with ENOSPC (SIGXFSZ ignored, so the write returns the error instead of killing).
    ::signal(SIGXFSZ, SIG_IGN);
    struct rlimit lim {
      4096, 4096
    };
    ::setrlimit(RLIMIT_FSIZE, &lim);
    std::string msg = "no error";
    try {
      write_file_atomic(target.string(), std::string(100000, 'x'));
    } catch (const UserError& e) {
      msg = e.what();
    }
    [[maybe_unused]] const ssize_t n = ::write(fds[1], msg.data(), msg.size());
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string msg;
  char buf[1024];
  ssize_t n = 0;
  while ((n = ::read(fds[0], buf, sizeof buf)) > 0) msg.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  INFO(msg);
  CHECK_THAT(msg, Catch::Contains("cannot write '" + target.string() + "' (100000 bytes)"));
  CHECK_THAT(msg, Catch::Contains("free on the filesystem of '" + tmp.str() + "'"));
  CHECK(!fs::exists(target));
  for (const auto& e : fs::directory_iterator(tmp.path)) FAIL("left behind: " << e.path());
}

TEST_CASE("disk full: plot temp files of a killed report are removed by the next report",
          "[runs][disk]") {
  runstest::TempDir tmp;
  const RunFolder run((tmp.path / "main").string());
  run.write_status(RunState::kFailed, "x");
  fs::create_directories(tmp.path / "plots");
  // A report killed mid-plot left this (its pid is not alive: pids are below 2^22 on Linux).
  const fs::path stale = tmp.path / "plots" / "mqar_accuracy_vs_length.png.tmp.4194999.png";
  std::ofstream(stale) << "partial";
  // One of a live process (this one's parent) is another report at work: kept.
  const fs::path live =
      tmp.path / "plots" / ("mqar_loss_vs_step.png.tmp." + std::to_string(::getppid()) + ".png");
  std::ofstream(live) << "partial";
  const fs::path keep = tmp.path / "plots" / "mqar_loss_vs_step.png";
  std::ofstream(keep) << "png";
  write_report(tmp.str(), false);
  CHECK(!fs::exists(stale));
  CHECK(fs::exists(live));
  CHECK(fs::exists(keep));
}
