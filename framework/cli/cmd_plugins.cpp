// `hybridlab plugins list`: the positional-scheme plugins this installation finds.

#include <fmt/core.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>

#include "commands.h"
#include "hybridlab/plugin_host.h"

namespace hybridlab::cli {
namespace {

// Probes one plugin's hooks in a forked child, so that a factory that crashes the process is
// reported against its file instead of ending `plugins list`. Returns "" and sets `hooks`, or
// the crash ("killed by signal 11 (Segmentation fault)").
std::string probe_in_child(PluginHost& host, const PluginRecord& r, uint32_t& hooks) {
  int fds[2];
  if (::pipe(fds) != 0) return std::string("cannot probe: ") + std::strerror(errno);
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) ::signal(sig, SIG_DFL);
    uint32_t h = 0;
    try {
      // A scheme built with default settings at a small model shape, as PluginHost::plugins
      // probes it; a scheme that cannot be built so reports no hooks.
      PositionContext ctx;
      ctx.d_model = 64;
      ctx.n_heads = 4;
      ctx.n_kv_heads = 4;
      ctx.head_dim = 16;
      ctx.train_length = 128;
      ctx.max_length = 128;
      ctx.layer_index = 0;
      Config empty;
      Section params = empty.root();
      h = host.create(r.file, params, ctx)->hooks();
    } catch (const std::exception&) {
    }
    [[maybe_unused]] const ssize_t n = ::write(fds[1], &h, sizeof h);
    ::_exit(0);
  }
  ::close(fds[1]);
  if (pid < 0) {
    ::close(fds[0]);
    return std::string("cannot probe: ") + std::strerror(errno);
  }
  uint32_t h = 0;
  const ssize_t n = ::read(fds[0], &h, sizeof h);
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status)) {
    const char* d = strsignal(WTERMSIG(status));
    return fmt::format("killed by signal {} ({})", WTERMSIG(status), d ? d : "?");
  }
  hooks = n == static_cast<ssize_t>(sizeof h) ? h : 0;
  return "";
}

}  // namespace

void add_plugins_command(CLI::App& app) {
  auto* plugins = app.add_subcommand("plugins", "Positional-scheme plugins");
  plugins->require_subcommand(1);
  struct Args {
    std::vector<std::string> paths;
    std::string config;
  };
  auto args = std::make_shared<Args>();
  auto* list = plugins->add_subcommand(
      "list",
      "List the plugins found: name, version, hooks, file and description. Searches "
      "--path folders, then HYBRIDLAB_PLUGIN_PATH, then the installation's plugin folder");
  list->add_option("--path", args->paths, "Extra plugin folder(s) to search first");
  list->add_option("--config", args->config, "Also search `plugins.paths` of this experiment YAML");
  list->callback([args] {
    std::vector<std::string> paths = args->paths;
    if (!args->config.empty()) {
      Config cfg = Config::load(args->config);
      auto host = make_plugin_host(cfg);
      for (const auto& p : host->search_path()) paths.push_back(p);
    }
    PluginHost host(paths);
    auto records = host.plugins(/*probe_hooks=*/false);
    std::vector<std::string> crashed;
    for (auto& r : records) {
      const std::string crash = probe_in_child(host, r, r.hooks);
      if (!crash.empty())
        crashed.push_back(fmt::format("{} ({}): its factory crashed: {}", r.name, r.file, crash));
    }
    if (records.empty()) {
      std::cout << "no plugins found; searched:\n";
      for (const auto& p : host.search_path()) std::cout << "  " << p << "\n";
      return;
    }
    std::cout << fmt::format("{:<12} {:<8} {:<28} {}\n", "NAME", "VERSION", "HOOKS", "DESCRIPTION");
    for (const auto& r : records) {
      std::cout << fmt::format("{:<12} {:<8} {:<28} {}\n", r.name, r.version, hook_names(r.hooks),
                               r.description);
      std::cout << fmt::format("{:<12} {:<8} {:<28} {}\n", "", "", "", r.file);
    }
    for (const auto& s : host.skipped_files()) std::cout << "skipped: " << s << "\n";
    for (const auto& c : crashed) std::cout << "crashed: " << c << "\n";
  });
}

}  // namespace hybridlab::cli
