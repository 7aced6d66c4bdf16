// Running an experiment: each variant in a child process (crash isolation, --jobs N at a time),
// finished runs skipped, failures recorded, then the report.

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include "hybridlab/evaluator.h"
#include "hybridlab/model.h"
#include "hybridlab/plugin_host.h"
#include "hybridlab/report.h"
#include "hybridlab/runtime.h"
#include "hybridlab/sweep.h"
#include "hybridlab/trainer.h"
#include "util/atomic_file.h"

namespace hybridlab {
namespace fs = std::filesystem;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

std::string source_yaml(const Config& cfg) {
  YAML::Emitter em;
  em << cfg.tree();
  return std::string(em.c_str()) + "\n";
}

json results_json(const std::string& experiment, const Variant& v, const Task& task,
                  const Experiment& exp, int64_t params, const TrainSummary* ts,
                  const std::vector<LengthResult>& results) {
  json j;
  j["experiment"] = experiment;
  j["run"] = v.name;
  json labels = json::object();
  for (const auto& [k, val] : v.labels) labels[k] = val;
  j["labels"] = labels;
  j["task"] = task.name();
  j["primary_metric"] = task.primary_metric();
  j["higher_is_better"] = task.higher_is_better();
  j["train_length"] = task.seq_len();
  j["params"] = params;
  if (ts) {
    j["train"] = {{"steps", ts->steps},           {"resumed_from", ts->resumed_from},
                  {"final_loss", ts->final_loss}, {"tokens_per_s", ts->tokens_per_s},
                  {"wall_s", ts->wall_s},         {"model_s", ts->model_s}};
  }
  json ev = json::object(), pos = json::object();
  for (const auto& r : results) {
    json m = {{"examples", r.examples}};
    for (const auto& [k, val] : r.metrics) m[k] = val;
    ev[std::to_string(r.length)] = m;
    if (!r.position_loss.empty()) pos[std::to_string(r.length)] = r.position_loss;
  }
  j["eval"] = ev;
  if (!pos.empty()) j["position_loss"] = pos;
  (void)exp;
  return j;
}

struct Built {
  Experiment exp;
  std::unique_ptr<PluginHost> host;
  std::shared_ptr<LanguageModel> model;
  int64_t params = 0;
};

Built build(const Config& cfg) {
  Built b;
  b.exp = read_experiment(cfg, false);
  apply_runtime(b.exp.runtime);
  torch::manual_seed(static_cast<uint64_t>(b.exp.train.seed));
  b.host = make_plugin_host(cfg);
  b.model = build_model(*b.exp.model, *b.host, model_build_context(b.exp));
  b.model->to(runtime_device(b.exp.runtime));
  for (const auto& p : b.model->parameters()) b.params += p.numel();
  std::vector<int64_t> lengths = b.exp.eval.lengths;
  lengths.push_back(b.exp.task->seq_len());
  b.exp.task->prepare(lengths);
  return b;
}

void ensure_writable(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    throw UserError(
        fmt::format("cannot create the runs folder '{}': {}; choose another with --runs-dir",
                    dir.string(), ec.message()));
  }
  const fs::path probe = dir / ".write_test";
  try {
    write_file_atomic(probe.string(), "ok\n");
  } catch (const UserError& e) {
    throw UserError(
        fmt::format("the runs folder '{}' is not writable ({}); choose another with "
                    "--runs-dir",
                    dir.string(), e.what()));
  }
  fs::remove(probe, ec);
}

// Builds (and drops) the model and prepares the task of every distinct variant, so that a bad
// scheme, table size, device or corpus is one clear error before any run folder is written,
// rather than one failure per child process.
void check_variants(const Config& cfg, const std::vector<Variant>& variants,
                    const SweepOptions& sweep) {
  std::set<std::string> seen;
  for (const auto& v : variants) {
    const Config vc = variant_config(cfg, v, sweep);
    // Runs differing only in train/sweep keys (seeds, steps, lr) build the same model and data.
    std::string key;
    for (const char* part : {"model", "task", "eval", "runtime", "plugins"}) {
      const YAML::Node n = vc.lookup(part);
      YAML::Emitter em;
      if (n.IsDefined()) em << n;
      key += std::string(part) + ":" + (n.IsDefined() ? em.c_str() : "-") + "\n";
    }
    if (!seen.insert(key).second) continue;
    const std::string where = variants.size() > 1 ? fmt::format("run '{}': ", v.name) : "";
    try {
      build(vc);
    } catch (const ConfigError& e) {
      throw ConfigError(where + e.what());
    } catch (const PluginError& e) {
      throw PluginError(where + e.what());
    } catch (const DataError& e) {
      throw DataError(where + e.what());
    } catch (const UserError& e) {
      throw UserError(where + e.what());
    } catch (const c10::Error& e) {
      std::string reason = e.what_without_backtrace();
      throw UserError(
          fmt::format("{}cannot build the model: {}", where, reason.substr(0, reason.find('\n'))));
    }
  }
}

std::string self_exe() {
  std::error_code ec;
  const fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? "hybridlab" : p.string();
}

std::string signal_text(int sig) {
  const char* d = strsignal(sig);
  return fmt::format("killed by signal {} ({})", sig, d ? d : "?");
}

}  // namespace

Config load_experiment_config(const std::string& path, const std::vector<std::string>& overrides) {
  Config cfg = Config::load(path);
  for (const auto& o : overrides) cfg.apply_override(o);
  return cfg;
}

void run_single(const Config& variant_cfg, const Variant& variant, const std::string& experiment,
                const std::string& run_dir, bool quiet, bool train_only) {
  const auto t0 = Clock::now();
  // Built first: a configuration that cannot build leaves no run folder behind.
  Built b = build(variant_cfg);
  ensure_writable(run_dir);
  write_file_atomic((fs::path(run_dir) / "source.yaml").string(), source_yaml(variant_cfg));
  write_run_status(run_dir, RunState::kRunning);
  try {
    write_file_atomic((fs::path(run_dir) / "config.yaml").string(), variant_cfg.resolved_yaml());
    TrainerHooks hooks;
    hooks.quiet = quiet;
    const TrainSummary ts = train(*b.model, *b.exp.task, b.exp, run_dir, hooks);
    std::vector<LengthResult> results;
    if (!train_only) results = evaluate(*b.model, *b.exp.task, b.exp);
    const json j = results_json(experiment, variant, *b.exp.task, b.exp, b.params, &ts, results);
    write_file_atomic((fs::path(run_dir) / "results.json").string(), j.dump(2) + "\n");
    write_run_status(run_dir, train_only ? RunState::kInterrupted : RunState::kFinished,
                     train_only ? "trained; not evaluated yet (hybridlab eval)" : "",
                     std::chrono::duration<double>(Clock::now() - t0).count());
  } catch (const Interrupted& e) {
    write_run_status(run_dir, RunState::kInterrupted, e.what());
    throw;
  } catch (const std::exception& e) {
    write_run_status(run_dir, RunState::kFailed, e.what());
    throw;
  }
}

void eval_run(const std::string& run_dir, const std::vector<int64_t>& lengths) {
  const fs::path src = fs::path(run_dir) / "source.yaml";
  if (!fs::exists(src)) {
    throw UserError(fmt::format(
        "'{}' is not a run folder (no source.yaml); give runs/<experiment>/<run>", run_dir));
  }
  Config cfg = Config::parse(read_file(src.string()), src.string());
  if (!lengths.empty()) {
    YAML::Node seq(YAML::NodeType::Sequence);
    for (int64_t L : lengths) seq.push_back(L);
    cfg.set("eval.lengths", seq, Location{"command line", 0, 0});
  }
  Built b = build(cfg);
  if (load_model_checkpoint(*b.model, run_dir) < 0) {
    throw UserError(
        fmt::format("'{}' holds no checkpoint; train it first (hybridlab run / train)", run_dir));
  }
  json prev = json::object();
  const fs::path res = fs::path(run_dir) / "results.json";
  if (fs::exists(res)) {
    // A results.json from a crashed write or another version is not needed: start afresh.
    prev = json::parse(read_file(res.string()), nullptr, false);
    if (!prev.is_object()) prev = json::object();
  }
  const auto text = [&](const char* key, const std::string& fallback) {
    const auto it = prev.find(key);
    return it != prev.end() && it->is_string() ? it->get<std::string>() : fallback;
  };
  Variant v;
  v.name = text("run", fs::path(run_dir).filename().string());
  const auto labels = prev.find("labels");
  if (labels != prev.end() && labels->is_object()) {
    for (const auto& [k, val] : labels->items())
      v.labels.emplace_back(k, val.is_string() ? val.get<std::string>() : val.dump());
  }
  const auto results = evaluate(*b.model, *b.exp.task, b.exp);
  json j = results_json(text("experiment", fs::path(run_dir).parent_path().filename().string()), v,
                        *b.exp.task, b.exp, b.params, nullptr, results);
  if (prev.contains("train")) j["train"] = prev["train"];
  write_file_atomic(res.string(), j.dump(2) + "\n");
  write_run_status(run_dir, RunState::kFinished);
}

SweepOutcome run_experiment(const RunRequest& req) {
  SweepOutcome out;
  Config cfg = load_experiment_config(req.experiment_file, req.overrides);
  const Experiment exp = read_experiment(cfg, req.only.empty());
  const std::vector<Variant> all = expand_sweep(exp.sweep);
  const fs::path exp_dir = fs::path(req.runs_dir) / exp.name;
  out.experiment_dir = exp_dir.string();

  if (!req.only.empty()) {
    for (const auto& v : all) {
      if (v.name != req.only) continue;
      const fs::path dir = exp_dir / v.name;
      if (run_state(dir.string()) == RunState::kFinished && !req.train_only) {
        const bool same =
            fs::exists(dir / "source.yaml") && read_file((dir / "source.yaml").string()) ==
                                                   source_yaml(variant_config(cfg, v, exp.sweep));
        if (!same) {
          throw UserError(
              fmt::format("'{}' finished with a different configuration and is not "
                          "overwritten; delete it or use another --runs-dir",
                          dir.string()));
        }
        if (!req.quiet) fmt::print("{}: finished before, skipped\n", v.name);
        out.skipped = 1;
        return out;
      }
      run_single(variant_config(cfg, v, exp.sweep), v, exp.name, (exp_dir / v.name).string(),
                 req.quiet, req.train_only);
      out.finished = 1;
      return out;
    }
    std::string names;
    for (const auto& v : all) names += "\n  " + v.name;
    throw UserError(fmt::format("--only '{}': no such run in {}; its runs are:{}", req.only,
                                req.experiment_file, names));
  }

  const std::vector<Variant> mine = shard_variants(all, req.shard_index, req.shard_count);
  check_variants(cfg, mine, exp.sweep);
  ensure_writable(exp_dir);
  std::vector<const Variant*> pending;
  for (const auto& v : mine) {
    const fs::path dir = exp_dir / v.name;
    const std::string src = source_yaml(variant_config(cfg, v, exp.sweep));
    const bool same =
        fs::exists(dir / "source.yaml") && read_file((dir / "source.yaml").string()) == src;
    const RunState st = run_state(dir.string());
    if (st == RunState::kFinished && !req.train_only) {
      if (same) {
        ++out.skipped;
        if (!req.quiet) fmt::print("{}: finished before, skipped\n", v.name);
      } else {
        ++out.failed;
        out.failures.emplace_back(v.name,
                                  fmt::format("'{}' finished with a different configuration and "
                                              "is not overwritten; delete it or use another "
                                              "--runs-dir",
                                              dir.string()));
      }
      continue;
    }
    if (st != RunState::kNew && !same && fs::exists(dir / "checkpoint")) {
      // The configuration changed since the interrupted run: its checkpoint no longer fits.
      if (!req.quiet)
        fmt::print("{}: configuration changed since it was interrupted; starting afresh\n", v.name);
      fs::remove_all(dir / "checkpoint");
      fs::remove(dir / "metrics.jsonl");
    }
    pending.push_back(&v);
  }

  const int64_t total_threads = exp.runtime.threads > 0 ? exp.runtime.threads : hardware_threads();
  const int64_t jobs =
      std::max<int64_t>(1, std::min<int64_t>(req.jobs, static_cast<int64_t>(pending.size())));
  const int64_t child_threads = std::max<int64_t>(1, total_threads / jobs);
  const std::string exe = req.self_exe.empty() ? self_exe() : req.self_exe;
  struct Child {
    const Variant* v;
    Clock::time_point start;
  };
  std::map<pid_t, Child> running;
  size_t next = 0, started = 0;
  const size_t n = pending.size();

  auto finish_child = [&](const Child& c, int status) {
    const fs::path dir = exp_dir / c.v->name;
    const double secs = std::chrono::duration<double>(Clock::now() - c.start).count();
    const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    const bool interrupted =
        (WIFEXITED(status) && WEXITSTATUS(status) == 130) ||
        (WIFSIGNALED(status) && (WTERMSIG(status) == SIGINT || WTERMSIG(status) == SIGTERM));
    if (ok) {
      ++out.finished;
      if (!req.quiet) fmt::print("{}: finished in {:.0f} s\n", c.v->name, secs);
      return;
    }
    std::string error;
    if (interrupted) {
      ++out.interrupted;
      if (run_state(dir.string()) != RunState::kInterrupted)
        write_run_status(dir.string(), RunState::kInterrupted, "interrupted");
      if (!req.quiet) fmt::print("{}: interrupted (rerun to resume)\n", c.v->name);
      return;
    }
    ++out.failed;
    if (WIFSIGNALED(status)) {
      error = signal_text(WTERMSIG(status));
      write_run_status(dir.string(), RunState::kFailed, "crashed: " + error);
    } else if (run_state(dir.string()) != RunState::kFailed) {
      error = fmt::format("exited with code {}", WEXITSTATUS(status));
      write_run_status(dir.string(), RunState::kFailed, error);
    } else {
      try {
        error = json::parse(read_file((dir / "status.json").string())).value("error", "failed");
      } catch (const std::exception&) {
        error = "failed";
      }
    }
    out.failures.emplace_back(c.v->name, error);
    if (!req.quiet) fmt::print("{}: FAILED after {:.0f} s: {}\n", c.v->name, secs, error);
  };

  if (req.in_process) {
    for (const Variant* v : pending) {
      if (stop_requested().load()) break;
      const auto t0 = Clock::now();
      try {
        run_single(variant_config(cfg, *v, exp.sweep), *v, exp.name, (exp_dir / v->name).string(),
                   req.quiet, req.train_only);
        ++out.finished;
      } catch (const Interrupted&) {
        ++out.interrupted;
        break;
      } catch (const std::exception& e) {
        ++out.failed;
        out.failures.emplace_back(v->name, e.what());
      }
      (void)t0;
    }
  } else {
    while (next < n || !running.empty()) {
      while (next < n && static_cast<int64_t>(running.size()) < jobs && !stop_requested().load()) {
        const Variant* v = pending[next++];
        const fs::path dir = exp_dir / v->name;
        fs::create_directories(dir);
        std::vector<std::string> args = {exe, req.train_only ? "train" : "run",
                                         req.experiment_file};
        for (const auto& o : req.overrides) args.push_back(o);
        if (jobs > 1) args.push_back(fmt::format("runtime.threads={}", child_threads));
        args.insert(args.end(), {"--runs-dir", req.runs_dir, "--only", v->name});
        if (req.quiet) args.push_back("--quiet");
        std::vector<char*> argv;
        for (auto& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        // BLAS threads follow the split too (OpenBLAS spins its own pool otherwise, which
        // oversubscribes the cores when several runs share them), unless the user set them.
        std::vector<std::string> env_store;
        for (char** e = environ; *e; ++e) env_store.emplace_back(*e);
        for (const char* var : {"OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"}) {
          if (!std::getenv(var)) env_store.push_back(fmt::format("{}={}", var, child_threads));
        }
        std::vector<char*> envp;
        for (auto& e : env_store) envp.push_back(e.data());
        envp.push_back(nullptr);
        int log_fd = -1;
        if (jobs > 1) {
          log_fd = ::open((dir / "log.txt").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
        }
        ++started;
        if (!req.quiet) {
          fmt::print("[{}/{}] {}{}\n", started, n, v->name,
                     jobs > 1 ? fmt::format(" (log: {})", (dir / "log.txt").string()) : "");
          std::fflush(stdout);
        }
        const pid_t pid = ::fork();
        if (pid == 0) {
          if (log_fd >= 0) {
            ::dup2(log_fd, 1);
            ::dup2(log_fd, 2);
          }
          ::execve(exe.c_str(), argv.data(), envp.data());
          _exit(127);
        }
        if (log_fd >= 0) ::close(log_fd);
        if (pid < 0)
          throw UserError(
              fmt::format("cannot start a process for run {}: {}", v->name, std::strerror(errno)));
        running[pid] = {v, Clock::now()};
      }
      if (running.empty()) break;
      int status = 0;
      const pid_t done = ::waitpid(-1, &status, 0);
      if (done < 0) {
        if (errno == EINTR) continue;
        break;
      }
      auto it = running.find(done);
      if (it == running.end()) continue;
      finish_child(it->second, status);
      running.erase(it);
    }
  }
  if (stop_requested().load()) out.interrupted += static_cast<int64_t>(n - next);
  return out;
}

}  // namespace hybridlab
