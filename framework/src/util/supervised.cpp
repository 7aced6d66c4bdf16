// run_supervised: fork, run, report through a pipe, wait with a deadline.

#include "util/supervised.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ATen/Parallel.h>

#include <cxxabi.h>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <typeinfo>

#include "hybridlab/config.h"
#include "hybridlab/error.h"

namespace hybridlab::detail {
namespace {

// "S <len>\n<stage>" before each stage; at the end "R <len>\n<payload>" or "F <len>\n<failure>".
std::string frame(char tag, const std::string& text) {
  return fmt::format("{} {}\n", tag, text.size()) + text;
}

std::string demangled(const char* name) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> d(abi::__cxa_demangle(name, nullptr, nullptr, &status),
                                           std::free);
  return status == 0 && d ? d.get() : name;
}

[[noreturn]] void child(int fd, const std::function<std::string(const StageFn&)>& body) {
  // A crash must end this child: handlers inherited from the parent (a test framework's, a
  // library's) would otherwise catch it and let the child run on.
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTERM, SIGINT})
    ::signal(sig, SIG_DFL);
  at::set_num_threads(1);  // the parent's thread pool did not survive fork()
  std::string out;
  try {
    out = frame('R', body([fd](const std::string& stage) { write_all(fd, frame('S', stage)); }));
  } catch (const std::exception& e) {
    out = frame('F', fmt::format("threw {}: {}", demangled(typeid(e).name()), e.what()));
  } catch (...) {
    out = frame('F', "threw an exception that is not a std::exception");
  }
  write_all(fd, out);
  std::fflush(stdout);
  std::fflush(stderr);
  ::_exit(0);
}

// Reads from `fd` until EOF or `deadline`; false on timeout.
bool read_until(int fd, std::chrono::steady_clock::time_point deadline, std::string& out) {
  char buf[4096];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1 << 30)));
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) return false;
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return true;
    out.append(buf, static_cast<size_t>(n));
  }
}

// Parses the frames of a report into `s`.
void parse(const std::string& report, Supervised& s) {
  size_t at = 0;
  while (at < report.size()) {
    const size_t eol = report.find('\n', at);
    if (eol == std::string::npos || eol - at < 2) return;
    const char tag = report[at];
    const size_t len = std::strtoull(report.c_str() + at + 2, nullptr, 10);
    if (eol + 1 + len > report.size()) return;
    const std::string text = report.substr(eol + 1, len);
    at = eol + 1 + len;
    if (tag == 'S') s.stage = text;
    if (tag == 'R') s.returned = true, s.payload = text;
    if (tag == 'F') s.failure = text;
  }
}

}  // namespace

void write_all(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

pid_t fork_with_pipe(int fds[2], const char* what) {
  if (::pipe(fds) != 0)
    throw UserError(fmt::format("cannot start {}: {}", what, std::strerror(errno)));
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    throw UserError(fmt::format("cannot start {}: {}", what, std::strerror(err)));
  }
  ::close(pid == 0 ? fds[0] : fds[1]);
  return pid;
}

Supervised run_supervised(const std::function<std::string(const StageFn&)>& body,
                          double timeout_s) {
  int fds[2];
  const pid_t pid = fork_with_pipe(fds, "a plugin check");
  if (pid == 0) child(fds[1], body);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(timeout_s));
  std::string report;
  const bool finished = read_until(fds[0], deadline, report);
  ::close(fds[0]);
  if (!finished) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  Supervised s;
  parse(report, s);
  if (!finished) {
    s.returned = false;
    s.failure = fmt::format("did not return within {:g} s (HYBRIDLAB_PLUGIN_TIMEOUT)", timeout_s);
  } else if (WIFSIGNALED(status)) {
    const char* d = strsignal(WTERMSIG(status));
    s.returned = false;
    s.failure = fmt::format("killed by signal {} ({})", WTERMSIG(status), d ? d : "?");
  } else if (!s.returned && s.failure.empty()) {
    s.failure = fmt::format("exited with code {}", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  }
  return s;
}

double plugin_time_limit() {
  const char* env = std::getenv("HYBRIDLAB_PLUGIN_TIMEOUT");
  if (!env || !*env) return 60;
  double v = 0;
  // At most an hour: a limit past that is no limit, and every hanging plugin costs it once.
  if (!parse_number_text(env, v) || !(v > 0) || v > 3600) {
    throw UserError(fmt::format(
        "HYBRIDLAB_PLUGIN_TIMEOUT: '{}' is not a number of seconds in (0, 3600] (the time limit "
        "of each plugin check; default 60)",
        env));
  }
  return v;
}

}  // namespace hybridlab::detail
