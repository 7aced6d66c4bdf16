// The local launcher of a data-parallel job: torchrun's contract for the ranks of one host.

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <thread>

#include "hybridlab/run.h"
#include "hybridlab/runtime.h"
#include "run/preflight.h"
#include "util/child_process.h"

namespace hybridlab {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// Signals arrive asynchronously; the wait loop forwards them.
std::atomic<int>& pending_signal() {
  static std::atomic<int> sig{0};
  return sig;
}
void on_signal(int sig) { pending_signal().store(sig); }

// A TCP port nobody listens on now (the kernel's pick for port 0). Rank 0 binds it a moment
// later; a race with another program is reported by rank 0 as a port in use.
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 29500;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  int port = 29500;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(fd);
  return port;
}

// "" when `port` can be listened on here (nobody listens on it), else why not. SO_REUSEADDR as
// the store's own socket: a port left in TIME_WAIT is free, a listening one is not.
std::string port_problem(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  a.sin_port = htons(static_cast<uint16_t>(port));
  std::string why;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) why = std::strerror(errno);
  ::close(fd);
  return why;
}

std::string exit_text(int status) {
  if (WIFSIGNALED(status)) return "was " + signal_text(WTERMSIG(status));
  return fmt::format("exited with code {}", WEXITSTATUS(status));
}

int exit_code(int status) {
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

pid_t start_rank(const LaunchOptions& o, int64_t local, int port, int64_t threads) {
  const std::map<std::string, std::string> rank = {
      {"RANK", std::to_string(o.node_rank * o.nproc_per_node + local)},
      {"WORLD_SIZE", std::to_string(o.nnodes * o.nproc_per_node)},
      {"LOCAL_RANK", std::to_string(local)},
      {"LOCAL_WORLD_SIZE", std::to_string(o.nproc_per_node)},
      {"GROUP_RANK", std::to_string(o.node_rank)},
      {"MASTER_ADDR", o.master_addr},
      {"MASTER_PORT", std::to_string(port)}};
  // The ranks of one host share its cores, as torchrun's OMP_NUM_THREADS default intends.
  std::map<std::string, std::string> split;
  for (const char* var : {"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"})
    split[var] = std::to_string(threads);
  const pid_t pid = start_child_process(o.command, environment_with(rank, split));
  if (pid < 0) {
    throw UserError(fmt::format("cannot start rank {}: {}", local, std::strerror(errno)));
  }
  return pid;
}

// Rank 0 (pid `pid`) died by a signal while writing runs of `experiment_dir`: each run whose
// status.json still says `running` under its pid is recorded `failed`, naming it, so that the
// record does not claim a run that no process is running.
void record_rank0_death(const std::string& experiment_dir, pid_t pid, const std::string& how) {
  std::error_code ec;
  if (experiment_dir.empty() || !fs::is_directory(experiment_dir, ec)) return;
  for (const auto& e : fs::directory_iterator(experiment_dir, ec)) {
    if (!e.is_directory(ec) || e.is_symlink(ec)) continue;
    const RunFolder f(e.path().string());
    RunStatus s = f.status();
    if (s.state != RunState::kRunning || s.pid != pid) continue;
    s.state = RunState::kFailed;
    s.error = fmt::format(
        "rank 0 (pid {}) {}; rerun the same command to resume from the last checkpoint", pid, how);
    try {
      f.write_status(s);
    } catch (const UserError&) {
      // The record stays as it was; the launcher's exit code and message still say why.
    }
  }
}

}  // namespace

std::vector<std::string> rank_command(const std::vector<std::string>& argv) {
  static const char* const launcher_options[] = {"--nproc-per-node", "--nnodes", "--node-rank",
                                                 "--master-addr", "--master-port"};
  std::vector<std::string> out;
  for (size_t i = 0; i < argv.size(); ++i) {
    bool dropped = false;
    for (const char* opt : launcher_options) {
      const std::string o = opt;
      if (argv[i] == o) {
        ++i;  // and its value
        dropped = true;
        break;
      }
      if (argv[i].rfind(o + "=", 0) == 0) {
        dropped = true;
        break;
      }
    }
    if (!dropped) out.push_back(argv[i]);
  }
  return out;
}

namespace {

// The port rank 0 listens on. Rank 0 listens on this host: a port in use is one error now
// (UserError), not a rank that fails while the others wait for it.
int master_port(const LaunchOptions& o) {
  const int port = o.master_port > 0 ? o.master_port : o.nnodes == 1 ? free_port() : 29500;
  if (o.node_rank != 0) return port;
  const std::string why = port_problem(port);
  if (!why.empty()) {
    throw UserError(fmt::format(
        "--master-port {}: rank 0 cannot listen on it here ({}); choose another port{}", port, why,
        o.nnodes == 1 ? ", or leave --master-port out and a free one is picked" : ""));
  }
  return port;
}

// A rank that fails first makes the others fail too (they lose it): the exit code is the
// likeliest cause's, a killed rank before bad input (2) before a lost peer (1).
int rank_of_cause(int c) {
  return c > 128 && c != 130 && c != 128 + SIGTERM ? 4 : c == 2 ? 3 : c == 1 ? 1 : c == 130 ? 0 : 2;
}

}  // namespace

int launch_ranks(const LaunchOptions& o) {
  if (o.command.empty()) throw UserError("launch_ranks: no command");
  const int port = master_port(o);
  const int64_t threads = std::max<int64_t>(1, hardware_threads() / o.nproc_per_node);
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  std::map<pid_t, int64_t> running;  // pid -> local rank
  for (int64_t local = 0; local < o.nproc_per_node; ++local) {
    running[start_rank(o, local, port, threads)] = local;
  }
  const int64_t base = o.node_rank * o.nproc_per_node;
  int code = 0;
  bool forwarded = false, stopping = false, killed = false;
  Clock::time_point kill_at{};
  while (!running.empty()) {
    const int sig = pending_signal().exchange(0);
    if (sig != 0 && !forwarded) {
      for (const auto& [pid, r] : running) ::kill(pid, SIGTERM);
      forwarded = true;
    }
    if (stopping && !killed && Clock::now() > kill_at) {
      for (const auto& [pid, r] : running) ::kill(pid, SIGKILL);
      killed = true;
    }
    int status = 0;
    const pid_t done = ::waitpid(-1, &status, WNOHANG);
    if (done == 0 || (done < 0 && errno == EINTR)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    if (done < 0) break;
    const auto it = running.find(done);
    if (it == running.end()) continue;
    const int64_t rank = base + it->second;
    running.erase(it);
    if (rank == 0 && WIFSIGNALED(status))
      record_rank0_death(o.experiment_dir, done, exit_text(status));
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) continue;
    const int now = exit_code(status);
    // A rank this launcher killed after the first failure is not a cause.
    const bool ours = killed && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
    if (code == 0 || (!ours && rank_of_cause(now) > rank_of_cause(code))) code = now;
    // An interrupted job stops on its own (every rank after the same step).
    if (now == 130 && forwarded) continue;
    if (!stopping) {
      std::fflush(stdout);
      std::fprintf(stderr, "error: rank %lld (pid %d) %s; stopping the other %zu rank(s)\n",
                   static_cast<long long>(rank), static_cast<int>(done), exit_text(status).c_str(),
                   running.size());
      // The others now wait in a collective for a rank that is gone: stop them.
      for (const auto& [pid, r] : running) ::kill(pid, SIGTERM);
      forwarded = true;
      stopping = true;
      kill_at = Clock::now() + std::chrono::seconds(30);
    }
  }
  return code;
}

}  // namespace hybridlab
