#pragma once
// Child processes of the CLI (a sweep's runs, a data-parallel job's ranks): started the same way.

#include <sys/types.h>

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
/// process group of its own (a terminal's Ctrl-C reaches the parent only, which forwards one
/// SIGTERM: two signals would make the child exit without its checkpoint) that receives SIGTERM
/// when this process dies (PR_SET_PDEATHSIG). `in_child` runs in the child just before exec
/// (e.g. to redirect output). A failed exec prints why and exits 127. Returns the pid, or -1
/// with errno set when fork() failed.
pid_t start_child_process(std::vector<std::string> argv, std::vector<std::string> env,
                          const std::function<void()>& in_child = {});

}  // namespace hybridlab
