#pragma once
// Child processes of the CLI (a sweep's runs, a data-parallel job's ranks): started the same way.

#include <sys/types.h>

#include <cstdint>

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace hybridlab {

/// This process's environment (NAME=value entries) with `set` replacing or adding variables and
/// `defaults` added only where the variable is not set.
std::vector<std::string> environment_with(const std::map<std::string, std::string>& set,
                                          const std::map<std::string, std::string>& defaults = {});

/// Starts `argv` (argv[0]: the program's path) with environment `env` as a child process in a
/// process group of its own (a terminal's Ctrl-C reaches the parent only, which forwards it as
/// SIGTERM) that receives SIGTERM when this process dies (PR_SET_PDEATHSIG). A stop signal sent
/// to the child before its exec is not lost: it ends the child (default action), which the
/// caller sees as death by that signal. `in_child` runs in the child just before exec
/// (e.g. to redirect output). A failed exec prints why and exits 127. Returns the pid, or -1
/// with errno set when fork() failed.
pid_t start_child_process(std::vector<std::string> argv, std::vector<std::string> env,
                          const std::function<void()>& in_child = {});

/// Runs `count` children at most `jobs` at a time: `start(i)` starts the i-th and returns its
/// pid (-1: none was started for it), `done(i, status)` gets its waitpid() status. Once `stop()`
/// returns true, no further child is started and SIGTERM is sent once to those running; the
/// call returns when all have ended, with the number never started.
size_t run_child_pool(size_t count, int64_t jobs, const std::function<pid_t(size_t)>& start,
                      const std::function<void(size_t, int)>& done,
                      const std::function<bool()>& stop);

}  // namespace hybridlab
