// Pre-flight builds in a forked child that reports back through a pipe.

#include "run/preflight.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <set>

#include "hybridlab/run_build.h"
#include "util/supervised.h"

namespace hybridlab {
namespace {

struct Group {
  std::vector<size_t> members;  // indices into the variants
};

// Runs differing only in train/sweep keys (seeds, steps, lr) build the same model and data.
std::vector<Group> distinct_builds(const Config& cfg, const std::vector<Variant>& variants,
                                   const SweepOptions& sweep) {
  std::vector<Group> groups;
  std::map<std::string, size_t> by_key;
  for (size_t i = 0; i < variants.size(); ++i) {
    const Config vc = variant_config(cfg, variants[i], sweep);
    std::string key;
    for (const char* part : {"model", "task", "eval", "runtime", "plugins"}) {
      const YAML::Node n = vc.lookup(part);
      YAML::Emitter em;
      if (n.IsDefined()) em << n;
      key += std::string(part) + ":" + (n.IsDefined() ? em.c_str() : "-") + "\n";
    }
    auto [it, fresh] = by_key.emplace(key, groups.size());
    if (fresh) groups.emplace_back();
    groups[it->second].members.push_back(i);
  }
  return groups;
}

// Every `scheme:` value under `model` (to name the plugin of a crashed build).
void collect_schemes(const YAML::Node& n, std::set<std::string>& out) {
  if (n.IsMap()) {
    for (const auto& kv : n) {
      if (kv.first.Scalar() == "scheme" && kv.second.IsScalar()) out.insert(kv.second.Scalar());
      collect_schemes(kv.second, out);
    }
  } else if (n.IsSequence()) {
    for (const auto& e : n) collect_schemes(e, out);
  }
}

// The child: builds groups [first, end) in order; "B g" before each, "O g" after, or
// "E <kind> g <bytes>\n<message>" and stop. A plugin whose code crashed in its own supervised
// child (PluginCrashed) is that group's crash: "K g <bytes>\n<message>", then the next group.
[[noreturn]] void check_in_child(int fd, const Config& cfg, const std::vector<Variant>& variants,
                                 const SweepOptions& sweep, const std::string& config_dir,
                                 const std::vector<Group>& groups, size_t first,
                                 bool on_this_machine) {
  // Notes about this machine's BLAS and threads are for the commands that compute; a command
  // that only reads the file prints its own output alone. Errors travel through `fd`.
  if (!on_this_machine) {
    const int null_fd = ::open("/dev/null", O_WRONLY);
    if (null_fd >= 0) ::dup2(null_fd, STDERR_FILENO);
  }
  for (size_t g = first; g < groups.size(); ++g) {
    detail::write_all(fd, fmt::format("B {}\n", g));
    char kind = 0;
    std::string msg;
    try {
      Config vc = variant_config(cfg, variants[groups[g].members[0]], sweep);
      // The file's checks without this machine's: a GPU experiment is read on a laptop too.
      if (!on_this_machine && vc.lookup("runtime.device").IsDefined())
        vc.set("runtime.device", YAML::Node("cpu"), vc.location("runtime.device"));
      // One thread: the parent's pool did not survive fork(), and building is not worth more.
      BuiltRun b = build_run(vc, config_dir, 1);
      // Eval variants are built too, and matched against the trained parameters, so that a
      // mistake in one is refused now rather than after training.
      for (const EvalVariant& ev : b.exp.eval.variants) {
        in_eval_variant(ev, [&] { build_eval_variant(b, vc, ev, config_dir); });
      }
    } catch (const PluginCrashed& e) {
      detail::write_all(fd, fmt::format("K {} {}\n", g, std::string(e.what()).size()) + e.what());
      continue;
    } catch (const ConfigError& e) {
      kind = 'C', msg = e.what();
    } catch (const PluginError& e) {
      kind = 'P', msg = e.what();
    } catch (const DataError& e) {
      kind = 'D', msg = e.what();
    } catch (const UserError& e) {
      kind = 'U', msg = e.what();
    } catch (const std::exception& e) {
      kind = 'U', msg = std::string("cannot build the model: ") + e.what();
    }
    if (kind) {
      detail::write_all(fd, fmt::format("E {} {} {}\n", kind, g, msg.size()) + msg);
      std::fflush(stdout);
      std::fflush(stderr);
      ::_exit(0);
    }
    detail::write_all(fd, fmt::format("O {}\n", g));
  }
  std::fflush(stdout);
  std::fflush(stderr);
  ::_exit(0);
}

[[noreturn]] void rethrow(char kind, const std::string& msg) {
  switch (kind) {
    case 'C':
      throw ConfigError(msg);
    case 'P':
      throw PluginError(msg);
    case 'D':
      throw DataError(msg);
    default:
      throw UserError(msg);
  }
}

// Reads `fd` to its end, then closes it.
std::string read_to_end(int fd) {
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

// Applies a pre-flight child's report (check_in_child's lines: B group = building, O group = built,
// K group len + message = crashed, E kind group len + message = a located error, rethrown here):
// crashed variants go to `crashed`, `next` past the last group settled. Returns the group being
// built when the report ends (-1 when none).
long apply_child_report(const std::string& report, const std::vector<Group>& groups,
                        const std::vector<Variant>& variants,
                        std::map<std::string, std::string>& crashed, size_t& next) {
  long current = -1;
  size_t at = 0;
  while (at < report.size()) {
    const size_t eol = report.find('\n', at);
    if (eol == std::string::npos) break;
    const std::string line = report.substr(at, eol - at);
    at = eol + 1;
    const char tag = line.empty() ? 0 : line[0];
    if (tag == 'B') {
      current = std::stol(line.substr(2));
    } else if (tag == 'O') {
      next = static_cast<size_t>(std::stol(line.substr(2))) + 1;
      current = -1;
    } else if (tag == 'K') {
      size_t g = 0, len = 0;
      std::sscanf(line.c_str(), "K %zu %zu", &g, &len);
      const std::string msg = report.substr(at, len);
      at += len;
      for (size_t m : groups[g].members)
        crashed[variants[m].name] = "crashed while building its model: " + msg;
      next = g + 1;
      current = -1;
    } else if (tag == 'E') {
      char kind = 0;
      size_t g = 0, len = 0;
      std::sscanf(line.c_str(), "E %c %zu %zu", &kind, &g, &len);
      const std::string msg = report.substr(at, len);
      const std::string where =
          variants.size() > 1 ? fmt::format("run '{}': ", variants[groups[g].members[0]].name) : "";
      rethrow(kind, where + msg);
    }
  }
  return current;
}

}  // namespace

std::string signal_text(int sig) {
  const char* d = strsignal(sig);
  return fmt::format("killed by signal {} ({})", sig, d ? d : "?");
}

std::map<std::string, std::string> preflight_variants(const Config& cfg,
                                                      const std::vector<Variant>& variants,
                                                      const SweepOptions& sweep,
                                                      const std::string& config_dir,
                                                      bool on_this_machine) {
  std::map<std::string, std::string> crashed;
  const std::vector<Group> groups = distinct_builds(cfg, variants, sweep);
  size_t next = 0;
  while (next < groups.size()) {
    int fds[2];
    const pid_t pid = detail::fork_with_pipe(fds, "the pre-flight check");
    if (pid == 0) {
      // A crash must end this child: handlers inherited from the parent (a test framework's, a
      // library's) would otherwise catch it and let the child run on.
      for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) ::signal(sig, SIG_DFL);
      check_in_child(fds[1], cfg, variants, sweep, config_dir, groups, next, on_this_machine);
    }
    const std::string report = read_to_end(fds[0]);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    const long current = apply_child_report(report, groups, variants, crashed, next);
    if (WIFSIGNALED(status) && current >= 0) {
      const Group& g = groups[static_cast<size_t>(current)];
      std::set<std::string> schemes;
      collect_schemes(variant_config(cfg, variants[g.members[0]], sweep).lookup("model"), schemes);
      std::string names;
      for (const auto& s : schemes) names += (names.empty() ? "" : ", ") + s;
      const std::string msg =
          fmt::format("crashed while building its model: {}{}", signal_text(WTERMSIG(status)),
                      names.empty() ? "" : fmt::format(" (positional schemes: {})", names));
      for (size_t m : g.members) crashed[variants[m].name] = msg;
      next = static_cast<size_t>(current) + 1;
      continue;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || next < groups.size()) {
      throw UserError(fmt::format("the pre-flight check of the variants stopped unexpectedly ({})",
                                  WIFSIGNALED(status)
                                      ? signal_text(WTERMSIG(status))
                                      : fmt::format("exit code {}", WEXITSTATUS(status))));
    }
  }
  return crashed;
}

}  // namespace hybridlab
