#pragma once
// Plugin code run first in a forked child under a time limit, so that a plugin that crashes,
// hangs or throws something foreign costs this process an error message, not its life.

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
/// Throws PluginError when no child can be started (fork or pipe failed).
Supervised run_supervised(const std::function<std::string(const StageFn&)>& body, double timeout_s);

/// The time limit of each supervised plugin call, in seconds: HYBRIDLAB_PLUGIN_TIMEOUT (a number
/// > 0, read as the config reads numbers), else 60. Throws UserError for a malformed value.
double plugin_time_limit();

}  // namespace hybridlab::detail
