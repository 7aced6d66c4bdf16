// Executing one run folder in this process: source.yaml -> model -> train (+ eval) -> record.

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "hybridlab/run.h"
#include "hybridlab/trainer.h"
#include "run/build.h"

namespace hybridlab {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// The folder's source config and identity; a folder without them was never prepared.
std::pair<Config, RunIdentity> folder_config(const RunFolder& folder) {
  const auto source = folder.source();
  const auto id = folder.identity();
  if (!source || !id) {
    throw UserError(fmt::format(
        "'{}' is not a run folder (no source.yaml / run.json); give runs/<experiment>/<run>",
        folder.dir()));
  }
  return {Config::parse(*source, (fs::path(folder.dir()) / "source.yaml").string()), *id};
}

RunResults results_of(const RunIdentity& id, const BuiltRun& b) {
  RunResults r;
  r.id = id;
  r.id.config_dir.clear();
  r.task = b.exp.task->name();
  r.primary_metric = b.exp.task->primary_metric();
  r.higher_is_better = b.exp.task->higher_is_better();
  r.train_length = b.exp.task->seq_len();
  r.params = b.params;
  r.chance = b.exp.task->chance_levels();
  r.tuned = id.tuned;
  return r;
}

}  // namespace

void execute_run_folder(const RunFolder& folder, const ExecuteOptions& opts) {
  const auto t0 = Clock::now();
  auto [cfg, id] = folder_config(folder);
  try {
    folder.write_status(RunState::kRunning);
    BuiltRun b = build_run(cfg, id.config_dir, opts.threads);
    folder.write_config(cfg.resolved_yaml());
    TrainerHooks hooks;
    hooks.quiet = opts.quiet;
    hooks.stop_after = opts.stop_after;
    const TrainSummary ts = train(*b.model, *b.exp.task, b.exp, folder.dir(), hooks);
    RunResults r = results_of(id, b);
    r.train = TrainRecord{ts.steps,        ts.resumed_from, ts.final_loss,
                          ts.tokens_per_s, ts.wall_s,       ts.model_s};
    if (!opts.train_only) {
      r.eval = evaluate(*b.model, *b.exp.task, b.exp);
      if (!id.tuned.empty()) r.validation = {evaluate_validation(*b.model, *b.exp.task, b.exp)};
    }
    folder.write_results(r);
    folder.write_status(opts.train_only ? RunState::kTrained : RunState::kFinished, "",
                        std::chrono::duration<double>(Clock::now() - t0).count());
  } catch (const Interrupted& e) {
    folder.write_status(RunState::kInterrupted, e.what());
    throw;
  } catch (const std::exception& e) {
    // A failure to write status.json itself (disk full) must not hide the first error.
    try {
      folder.write_status(RunState::kFailed, e.what());
    } catch (const std::exception&) {
    }
    throw;
  }
}

void eval_run_folder(const std::string& run_dir, const std::vector<int64_t>& lengths) {
  const RunFolder folder(run_dir);
  auto [cfg, id] = folder_config(folder);
  RunLock lock(run_dir);
  const RunStatus st = folder.status();
  if (st.state != RunState::kTrained && st.state != RunState::kFinished) {
    throw UserError(fmt::format(
        "'{}' is {}: only a run trained to its last step can be evaluated; `hybridlab run` (or "
        "`train`) with its experiment resumes it",
        run_dir, run_state_name(st.state)));
  }
  const std::optional<RunResults> prev = folder.results();
  if (!lengths.empty()) {
    YAML::Node seq(YAML::NodeType::Sequence);
    for (int64_t L : lengths) seq.push_back(L);
    cfg.set("eval.lengths", seq, Location{"command line", 0, 0});
  }
  BuiltRun b = build_run(cfg, id.config_dir);
  if (load_model_checkpoint(*b.model, run_dir) < 0) {
    throw UserError(
        fmt::format("'{}' holds no checkpoint; train it first (hybridlab run / train)", run_dir));
  }
  RunResults r = results_of(id, b);
  if (prev) {
    // Evaluation adds to what the run reported: the training summary and other lengths stay.
    r.train = prev->train;
    r.eval = prev->eval;
    r.validation = prev->validation;
  }
  if (!id.tuned.empty() && r.validation.empty()) {
    r.validation = {evaluate_validation(*b.model, *b.exp.task, b.exp)};
  }
  for (const LengthResult& now : evaluate(*b.model, *b.exp.task, b.exp)) {
    auto it = std::find_if(r.eval.begin(), r.eval.end(),
                           [&](const LengthResult& l) { return l.length == now.length; });
    if (it != r.eval.end())
      *it = now;
    else
      r.eval.push_back(now);
  }
  std::sort(r.eval.begin(), r.eval.end(),
            [](const LengthResult& a, const LengthResult& b) { return a.length < b.length; });
  folder.write_results(r);
  if (st.state != RunState::kFinished) folder.write_status(RunState::kFinished);
}

}  // namespace hybridlab
