// start_child_process: fork + exec with the process-group and parent-death rules.

#include "util/child_process.h"

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <thread>

extern char** environ;

namespace hybridlab {

std::vector<std::string> environment_with(const std::map<std::string, std::string>& set,
                                          const std::map<std::string, std::string>& defaults) {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& [k, v] : set) env[k] = v;
  for (const auto& [k, v] : defaults) env.emplace(k, v);
  std::vector<std::string> out;
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

pid_t start_child_process(std::vector<std::string> argv, std::vector<std::string> env,
                          const std::function<void()>& in_child) {
  std::vector<char*> args, envp;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t parent = ::getpid();
  // A stop signal that reaches the forked copy before exec would run this process's handler there
  // (setting a flag exec then discards) and be lost: the child would train on, unstoppable but by
  // SIGKILL. So the stop signals stay blocked across fork; the copy restores their default action
  // before unblocking, and one already sent to it then ends it, which the parent records as an
  // interruption. After exec the program's own handlers take over.
  sigset_t stops, before;
  sigemptyset(&stops);
  for (int sig : {SIGINT, SIGTERM, SIGPIPE}) sigaddset(&stops, sig);
  ::sigprocmask(SIG_BLOCK, &stops, &before);
  const pid_t pid = ::fork();
  if (pid == 0) {
    for (int sig : {SIGINT, SIGTERM}) ::signal(sig, SIG_DFL);
    // SIGPIPE keeps the disposition a child of a shell gets (the default).
    ::signal(SIGPIPE, SIG_DFL);
    ::sigprocmask(SIG_SETMASK, &before, nullptr);
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(130);  // the parent died before prctl
    if (in_child) in_child();
    ::execve(args[0], args.data(), envp.data());
    std::fprintf(stderr, "error: cannot run %s: %s\n", args[0], std::strerror(errno));
    ::_exit(127);
  }
  const int fork_errno = errno;
  ::sigprocmask(SIG_SETMASK, &before, nullptr);
  errno = fork_errno;
  return pid;
}

size_t run_child_pool(size_t count, int64_t jobs, const std::function<pid_t(size_t)>& start,
                      const std::function<void(size_t, int)>& done,
                      const std::function<bool()>& stop) {
  std::map<pid_t, size_t> running;
  size_t next = 0;
  bool forwarded = false;
  while (next < count || !running.empty()) {
    while (next < count && static_cast<int64_t>(running.size()) < jobs && !stop()) {
      const size_t i = next++;
      const pid_t pid = start(i);
      if (pid > 0) running[pid] = i;
    }
    if (running.empty()) break;
    int status = 0;
    const pid_t ended = ::waitpid(-1, &status, WNOHANG);
    if (ended == 0 || (ended < 0 && errno == EINTR)) {
      if (stop() && !forwarded) {
        for (const auto& [pid, i] : running) ::kill(pid, SIGTERM);
        forwarded = true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    if (ended < 0) break;
    const auto it = running.find(ended);
    if (it == running.end()) continue;
    done(it->second, status);
    running.erase(it);
  }
  return count - next;
}

}  // namespace hybridlab
