// Executing one run folder in this process: source.yaml -> model -> train (+ eval) -> record.

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>

#include "hybridlab/distributed.h"
#include "hybridlab/run.h"
#include "hybridlab/run_build.h"
#include "hybridlab/runtime.h"
#include "hybridlab/trainer.h"
#include "run/init_from.h"
#include "run/variants.h"

namespace hybridlab {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

RunResults results_of(const RunIdentity& id, const BuiltRun& b) {
  RunResults r;
  r.id = id;
  r.id.config_dir.clear();
  r.task = b.exp.task->name();
  r.primary_metric = b.exp.task->primary_metric();
  r.higher_is_better = b.exp.task->higher_is_better();
  r.train_length = longest_train_length(*b.exp.task);
  r.params = b.params;
  const ModelSummary m = b.model->summary(r.train_length);
  r.model = ModelRecord{static_cast<int64_t>(m.layers.size()), m.attention_share, m.position_share,
                        m.recurrent_state_floats, m.kv_floats_per_token};
  r.chance = b.exp.task->chance_levels();
  r.tuned = id.tuned;
  return r;
}

// Evaluates each of `variants` on the weights of `trained` (built from `cfg`); with `group`, every
// rank scores its share of each.
std::vector<EvalVariantResult> evaluate_variants(const Config& cfg, const std::string& config_dir,
                                                 const BuiltRun& trained,
                                                 const std::vector<EvalVariant>& variants,
                                                 ProcessGroup* group = nullptr) {
  std::vector<EvalVariantResult> out;
  for (const EvalVariant& v : variants) {
    BuiltRun vb = build_eval_variant(trained, cfg, v, config_dir);
    out.push_back({v.name, eval_variant_text(v), evaluate(*vb.model, *vb.exp.task, vb.exp, group),
                   eval_variant_settings(v)});
  }
  return out;
}

// Puts the lengths of `now` into `into` (a length evaluated again replaces its result), sorted.
void merge_lengths(std::vector<LengthResult>& into, const std::vector<LengthResult>& now) {
  for (const LengthResult& l : now) {
    auto it = std::find_if(into.begin(), into.end(),
                           [&](const LengthResult& x) { return x.length == l.length; });
    if (it != into.end())
      *it = l;
    else
      into.push_back(l);
  }
  std::sort(into.begin(), into.end(),
            [](const LengthResult& a, const LengthResult& b) { return a.length < b.length; });
}

// Puts `now` into `into`. A variant with the same name and settings gains the new lengths, as the
// trained setting does; one whose settings changed is replaced (its old lengths measured
// something else).
void merge_variants(std::vector<EvalVariantResult>& into,
                    const std::vector<EvalVariantResult>& now) {
  for (const auto& r : now) {
    auto it = std::find_if(into.begin(), into.end(),
                           [&](const EvalVariantResult& x) { return x.name == r.name; });
    if (it == into.end())
      into.push_back(r);
    else if (it->set != r.set)
      *it = r;
    else
      merge_lengths(it->eval, r.eval);
  }
}

bool leads(const ExecuteOptions& opts) { return !opts.group || opts.group->rank() == 0; }

// Data parallel: the ranks must evaluate the same variants in the same order, and only rank 0
// reads the results it recorded. Rank 0 runs `decide` and publishes the names it returned (none
// when `decide` throws, so that no rank waits for it); the others take those of `listed`.
std::vector<EvalVariant> agree_on_variants(
    const ExecuteOptions& opts, const RunFolder& folder, const std::vector<EvalVariant>& listed,
    const std::function<std::vector<EvalVariant>()>& decide) {
  if (!opts.group) return decide();
  const std::string key = "variants/" + fs::path(folder.dir()).filename().string();
  if (opts.group->rank() == 0) {
    std::vector<EvalVariant> todo;
    try {
      todo = decide();
    } catch (...) {
      opts.group->set(key, "");
      throw;
    }
    std::string names;
    for (const EvalVariant& v : todo) names += v.name + "\n";
    opts.group->set(key, names);
    return todo;
  }
  const std::string names = "\n" + opts.group->get(key);
  std::vector<EvalVariant> todo;
  for (const EvalVariant& v : listed) {
    if (names.find("\n" + v.name + "\n") != std::string::npos) todo.push_back(v);
  }
  return todo;
}

// A finished run asked for eval variants it lacks: evaluates them from its checkpoint and adds
// them to its results. Its status and training results are left as they are, also on failure.
void add_missing_variants(const RunFolder& folder, const Config& cfg, const RunIdentity& id,
                          const ExecuteOptions& opts) {
  BuiltRun b = build_run(cfg, id.config_dir, opts.threads);
  auto nothing_to_evaluate = [&] {
    return UserError(
        fmt::format("'{}' is finished but holds no results or checkpoint to evaluate "
                    "eval variants on",
                    folder.dir()));
  };
  std::optional<RunResults> r;
  const std::vector<EvalVariant> todo = agree_on_variants(opts, folder, b.exp.eval.variants, [&] {
    r = folder.results();
    if (!r || load_model_checkpoint(*b.model, folder.dir()) < 0) throw nothing_to_evaluate();
    return variants_without_results(b.exp.eval.variants, r);
  });
  if (todo.empty()) return;
  if (!leads(opts) && load_model_checkpoint(*b.model, folder.dir()) < 0)
    throw nothing_to_evaluate();
  const std::vector<EvalVariantResult> done =
      evaluate_variants(cfg, id.config_dir, b, todo, opts.group);
  if (!leads(opts)) return;
  merge_variants(r->variants, done);
  folder.write_results(*r);
}

// Whether the run's config lists eval variants.
bool lists_variants(const Config& cfg) {
  const YAML::Node listed = cfg.lookup("eval.variants");
  return listed.IsDefined() && !listed.IsNull();
}

// Starts a run that has no checkpoint from train.init_from, if set.
void start_weights(const RunFolder& folder, BuiltRun& b) {
  if (b.exp.train.init_from.empty() || fs::exists(folder.checkpoint_path())) return;
  // source.yaml holds the path made absolute (run_source_yaml).
  init_weights_from(*b.model, init_from_folder(b.exp.train, fs::current_path().string()), folder);
}

TrainSummary train_run(const RunFolder& folder, BuiltRun& b, const ExecuteOptions& opts) {
  TrainerHooks hooks;
  hooks.quiet = opts.quiet;
  hooks.stop_after = opts.stop_after;
  return train(*b.model, *b.exp.task, b.exp, folder, hooks, opts.group);
}

}  // namespace

void execute_run_folder(const RunFolder& folder, const ExecuteOptions& opts) {
  const auto t0 = Clock::now();
  auto [cfg, id] = folder_config(folder);
  if (!leads(opts)) {
    // Another rank of a data-parallel job: it trains and scores its share of every evaluation
    // (eval lengths, validation set, eval variants) in rank 0's order; rank 0 records.
    if (folder.status().state == RunState::kFinished && !opts.train_only) {
      add_missing_variants(folder, cfg, id, opts);
      return;
    }
    BuiltRun b = build_run(cfg, id.config_dir, opts.threads);
    start_weights(folder, b);
    train_run(folder, b, opts);
    if (opts.train_only) return;
    evaluate(*b.model, *b.exp.task, b.exp, opts.group);
    if (!id.tuned.empty()) evaluate_validation(*b.model, *b.exp.task, b.exp, opts.group);
    if (lists_variants(cfg)) add_missing_variants(folder, cfg, id, opts);
    return;
  }
  if (folder.status().state == RunState::kFinished && !opts.train_only) {
    add_missing_variants(folder, cfg, id, opts);
    return;
  }
  try {
    folder.write_status(RunState::kRunning);
    BuiltRun b = build_run(cfg, id.config_dir, opts.threads);
    folder.write_config(cfg.resolved_yaml());
    start_weights(folder, b);
    const TrainSummary ts = train_run(folder, b, opts);
    RunResults r = results_of(id, b);
    r.train = TrainRecord{ts.steps,        ts.resumed_from, ts.final_loss,
                          ts.tokens_per_s, ts.wall_s,       ts.model_s};
    if (!opts.train_only) {
      r.eval = evaluate(*b.model, *b.exp.task, b.exp, opts.group);
      if (!id.tuned.empty()) {
        r.validation = {evaluate_validation(*b.model, *b.exp.task, b.exp, opts.group)};
      }
    }
    folder.write_results(r);
    folder.write_status(opts.train_only ? RunState::kTrained : RunState::kFinished, "",
                        std::chrono::duration<double>(Clock::now() - t0).count());
  } catch (const Interrupted& e) {
    folder.write_status(RunState::kInterrupted, e.what());
    throw;
  } catch (const std::exception& e) {
    // After a stop was asked for, the error that ended the run is the stop's (a write to the
    // pipe that closed, a wait cut short): the run resumes like any stopped run.
    if (stop_requested().load()) {
      folder.write_status(RunState::kInterrupted, e.what());
      throw Interrupted(e.what());
    }
    // A failure to write status.json itself (disk full) must not hide the first error.
    try {
      folder.write_status(RunState::kFailed, e.what());
    } catch (const std::exception&) {
    }
    throw;
  }
  // Eval variants come after the run is finished and recorded: one that fails (e.g. it would
  // change the parameters) is reported without costing the run its results.
  if (!opts.train_only && lists_variants(cfg)) add_missing_variants(folder, cfg, id, opts);
}

void eval_run_folder(const std::string& run_dir, const std::vector<int64_t>& lengths,
                     const std::vector<EvalVariant>& variants) {
  const RunFolder folder(run_dir);
  // Not a run, or a variant key its mixers do not let change: say so before taking a lock.
  const Config source = folder_config(folder).first;
  for (const EvalVariant& v : variants) check_eval_variant(source, v);
  RunLock lock(run_dir);
  TrainedRun t = load_trained_run(folder, lengths);
  const Config& cfg = t.cfg;
  const RunIdentity& id = t.id;
  BuiltRun& b = t.built;
  const std::optional<RunResults> prev = folder.results();
  RunResults r = results_of(id, b);
  if (prev) {
    // Evaluation adds to what the run reported: the training summary and other lengths stay.
    r.train = prev->train;
    r.eval = prev->eval;
    r.validation = prev->validation;
    r.variants = prev->variants;
  }
  if (!variants.empty()) {
    // Ad-hoc variants only: the trained setting's results are not touched.
    if (!prev || prev->eval.empty()) {
      throw UserError(
          fmt::format("'{}' has no results of its trained setting yet; `hybridlab eval "
                      "{}` first, then its variants",
                      run_dir, run_dir));
    }
    merge_variants(r.variants, evaluate_variants(cfg, id.config_dir, b, variants));
    folder.write_results(r);
    return;
  }
  if (!id.tuned.empty() && r.validation.empty()) {
    r.validation = {evaluate_validation(*b.model, *b.exp.task, b.exp)};
  }
  merge_lengths(r.eval, evaluate(*b.model, *b.exp.task, b.exp));
  merge_variants(r.variants,
                 evaluate_variants(cfg, id.config_dir, b,
                                   variants_without_results(b.exp.eval.variants, prev)));
  folder.write_results(r);
  if (t.state != RunState::kFinished) folder.write_status(RunState::kFinished);
}

}  // namespace hybridlab
