// analyze_experiment: the knock-out analysis of every finished run of an experiment, each run in
// a child process (`hybridlab analyze RUN`), --jobs at a time.

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "hybridlab/analysis.h"
#include "hybridlab/error.h"
#include "hybridlab/run_record.h"
#include "hybridlab/runtime.h"
#include "hybridlab/trainer.h"
#include "util/child_process.h"

namespace hybridlab {
namespace fs = std::filesystem;

namespace {

std::string joined(const std::vector<int64_t>& v) {
  std::string out;
  for (int64_t x : v) out += (out.empty() ? "" : ",") + std::to_string(x);
  return out;
}

// The command line of `hybridlab analyze` asking for `o` on `run_dir`.
std::vector<std::string> analyze_command(const std::string& exe, const std::string& run_dir,
                                         const AnalyzeOptions& o) {
  std::vector<std::string> args = {exe, "analyze", run_dir, "--quiet"};
  if (!o.kinds.empty()) {
    std::string kinds;
    for (const auto& k : o.kinds) kinds += (kinds.empty() ? "" : ",") + k;
    args.insert(args.end(), {"--kinds", kinds});
  }
  if (!o.lengths.empty()) args.insert(args.end(), {"--lengths", joined(o.lengths)});
  if (o.examples > 0) args.insert(args.end(), {"--examples", std::to_string(o.examples)});
  if (o.state_window > 0)
    args.insert(args.end(), {"--state-window", std::to_string(o.state_window)});
  if (!o.reach_windows.empty()) args.insert(args.end(), {"--windows", joined(o.reach_windows)});
  args.insert(args.end(), {"--tolerance", fmt::format("{}", o.reach_tolerance)});
  if (!o.head_stats) args.push_back("--no-heads");
  if (!o.plots) args.push_back("--no-plots");
  return args;
}

// The run folders of `dir` (those with a status.json), sorted by name.
std::vector<fs::path> run_folders(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.is_directory() && fs::exists(e.path() / "status.json")) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

ExperimentAnalysis analyze_experiment(const std::string& experiment_dir, const AnalyzeOptions& opts,
                                      int64_t jobs, const std::string& exe) {
  const std::vector<fs::path> all = run_folders(experiment_dir);
  if (all.empty()) {
    throw UserError(
        fmt::format("'{}' is not a run folder (no status.json) nor an experiment's "
                    "folder of runs (no <run>/status.json below it)",
                    experiment_dir));
  }
  ExperimentAnalysis out;
  std::vector<fs::path> todo;
  for (const fs::path& run : all) {
    const RunState state = RunFolder(run.string()).status().state;
    if (state != RunState::kFinished && state != RunState::kTrained) {
      ++out.not_trained;
      continue;
    }
    const std::optional<AnalysisResult> done = read_analysis(run.string());
    if (done && same_measurements(done->options, opts)) {
      ++out.up_to_date;
      continue;
    }
    todo.push_back(run);
  }
  const auto start = [&](size_t i) -> pid_t {
    const fs::path log_dir = todo[i] / "analysis";
    std::error_code ec;
    fs::create_directories(log_dir, ec);
    const int log = ::open((log_dir / "log.txt").c_str(),
                           O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    const pid_t pid = start_child_process(analyze_command(exe, todo[i].string(), opts),
                                          environment_with({}), [&] {
                                            if (log >= 0) {
                                              ::dup2(log, 1);
                                              ::dup2(log, 2);
                                            }
                                          });
    if (log >= 0) ::close(log);
    if (pid < 0) {
      out.failures.emplace_back(todo[i].filename().string(),
                                fmt::format("cannot start a process: {}", std::strerror(errno)));
      return -1;
    }
    if (!opts.quiet) {
      fmt::print("[analyze {}/{}] {}\n", i + 1, todo.size(), todo[i].filename().string());
    }
    return pid;
  };
  const auto done = [&](size_t i, int status) {
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      ++out.analysed;
      return;
    }
    const std::string why = WIFSIGNALED(status)
                                ? fmt::format("stopped by signal {}", WTERMSIG(status))
                                : fmt::format("exited with code {} (see {})", WEXITSTATUS(status),
                                              (todo[i] / "analysis" / "log.txt").string());
    out.failures.emplace_back(todo[i].filename().string(), why);
    if (!opts.quiet) fmt::print("{}: analysis FAILED: {}\n", todo[i].filename().string(), why);
  };
  run_child_pool(todo.size(), std::max<int64_t>(1, jobs), start, done,
                 [] { return stop_requested().load(); });
  return out;
}

}  // namespace hybridlab
