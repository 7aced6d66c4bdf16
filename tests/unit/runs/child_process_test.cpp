// Child processes: the environment a child gets, its own process group, the hook before exec,
// and a program that cannot be run.

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "runs_support.h"
#include "util/child_process.h"

using namespace hybridlab;
namespace fs = std::filesystem;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace child_process_test {
namespace {

bool has(const std::vector<std::string>& env, const std::string& entry) {
  return std::find(env.begin(), env.end(), entry) != env.end();
}

int wait_exit(pid_t pid) {
  int st = 0;
  ::waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

}  // namespace

TEST_CASE("child process: set replaces, defaults fill in only what is unset", "[runs][child]") {
  ::setenv("HYBRIDLAB_CHILD_A", "outer", 1);
  ::setenv("HYBRIDLAB_CHILD_B", "outer", 1);
  ::unsetenv("HYBRIDLAB_CHILD_C");
  const auto env =
      environment_with({{"HYBRIDLAB_CHILD_A", "set"}},
                       {{"HYBRIDLAB_CHILD_B", "default"}, {"HYBRIDLAB_CHILD_C", "default"}});
  CHECK(has(env, "HYBRIDLAB_CHILD_A=set"));
  CHECK(has(env, "HYBRIDLAB_CHILD_B=outer"));
  CHECK(has(env, "HYBRIDLAB_CHILD_C=default"));
  CHECK_FALSE(has(env, "HYBRIDLAB_CHILD_A=outer"));
  CHECK(std::count_if(env.begin(), env.end(), [](const std::string& e) {
          return e.rfind("HYBRIDLAB_CHILD_A=", 0) == 0;
        }) == 1);
  ::unsetenv("HYBRIDLAB_CHILD_A");
  ::unsetenv("HYBRIDLAB_CHILD_B");
}

TEST_CASE("child process: runs with its environment in its own group, the hook first",
          "[runs][child]") {
  runstest::TempDir tmp;
  const fs::path out = tmp.path / "out.txt";
  const int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  REQUIRE(fd >= 0);
  // The child prints its variable and whether it leads its own process group (field 5 of
  // /proc/PID/stat), then exits 3.
  const pid_t pid = start_child_process(
      {"/bin/sh", "-c",
       "echo \"$HYBRIDLAB_CHILD_X\"; set -- $(cat /proc/$$/stat); [ \"$5\" = $$ ] && echo leader; "
       "exit 3"},
      environment_with({{"HYBRIDLAB_CHILD_X", "hello"}}), [fd] { ::dup2(fd, 1); });
  ::close(fd);
  REQUIRE(pid > 0);
  CHECK(wait_exit(pid) == 3);
  std::ifstream in(out);
  std::string first, second;
  std::getline(in, first);
  std::getline(in, second);
  CHECK(first == "hello");
  CHECK(second == "leader");
}

TEST_CASE("child process: a stop signal that reaches it before exec ends it", "[runs][child]") {
  // The parent's own stop handler is inherited by the forked copy: a SIGTERM forwarded before exec
  // used to run it there (a flag exec discards), and the program then ran on, unstoppable.
  struct sigaction stop {
  }, before{};
  stop.sa_handler = [](int) {};
  sigemptyset(&stop.sa_mask);
  ::sigaction(SIGTERM, &stop, &before);
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = start_child_process({"/bin/sleep", "20"}, environment_with({}),
                                        [] { ::kill(::getpid(), SIGTERM); });
  ::sigaction(SIGTERM, &before, nullptr);
  REQUIRE(pid > 0);
  CHECK(wait_exit(pid) == 128 + SIGTERM);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
}

TEST_CASE("child process: a program that cannot be run exits 127", "[runs][child]") {
  const pid_t pid = start_child_process({"/nonexistent/program"}, environment_with({}));
  REQUIRE(pid > 0);
  CHECK(wait_exit(pid) == 127);
}

}  // namespace child_process_test
