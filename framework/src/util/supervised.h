#pragma once
// Code run first in a forked child under a time limit (a plugin's, a run's preflight), so that
// code that crashes, hangs or throws something foreign costs this process an error message, not
// its life.

#include <sys/types.h>

#include <functional>
#include <string>

namespace hybridlab::detail {

/// What a supervised body did.
struct Supervised {
  bool returned = false;  ///< the body returned; `payload` is what it returned
  std::string payload;
  std::string stage;    ///< the last stage the body announced ("" if none)
  std::string failure;  ///< when !returned: "killed by signal 11 (Segmentation fault)", "did not
                        ///< return within 60 s", "threw std::bad_alloc: ...", "threw an exception
                        ///< that is not a std::exception", "exited with code 3"
};

/// Announces the stage a body is in (e.g. "loading the library"), so that a crash names it.
using StageFn = std::function<void(const std::string&)>;

/// Runs `body` in a forked child (crash signals at their default action, one intra-op thread) and
/// waits at most `timeout_s` seconds (then kills it with SIGKILL). The child's stdout and stderr
/// stay this process's. Nothing the body changes reaches this process except its returned text.
/// Throws UserError when no child can be started (fork or pipe failed).
Supervised run_supervised(const std::function<std::string(const StageFn&)>& body, double timeout_s);

/// Forks a child joined to this process by a pipe, stdout and stderr flushed first: returns 0 in
/// the child (which writes to `fds[1]`; `fds[0]` is closed there) and the child's pid here (which
/// reads `fds[0]`; `fds[1]` is closed here). Throws UserError "cannot start WHAT: reason".
pid_t fork_with_pipe(int fds[2], const char* what);

/// Writes all of `s` to `fd` (retrying short writes and EINTR); gives up on an error.
void write_all(int fd, const std::string& s);

/// The time limit of each supervised plugin call, in seconds: HYBRIDLAB_PLUGIN_TIMEOUT (a number
/// in (0, 3600], read as the config reads numbers), else 60. Throws UserError for a malformed or
/// out-of-range value.
double plugin_time_limit();

}  // namespace hybridlab::detail
