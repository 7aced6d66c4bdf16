// train.init_from: the source run checked before anything is written, and its weights loaded.

#include "run/init_from.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <map>
#include <vector>

#include "hybridlab/run_build.h"
#include "hybridlab/trainer.h"

namespace hybridlab {
namespace fs = std::filesystem;

namespace {

using Shapes = std::map<std::string, std::vector<int64_t>>;

Shapes parameter_shapes(LanguageModel& model) {
  Shapes out;
  for (const auto& p : model.named_parameters(true)) out[p.key()] = p.value().sizes().vec();
  return out;
}

// Up to four names of `names`, then how many in all: "a, b, c, d (9 in all)".
std::string some_of(const std::vector<std::string>& names) {
  std::vector<std::string> shown(names.begin(), names.begin() + std::min<size_t>(4, names.size()));
  std::string out = fmt::format("{}", fmt::join(shown, ", "));
  if (names.size() > shown.size()) out += fmt::format(" ({} in all)", names.size());
  return out;
}

// Why `dir` cannot start a run ("" when it can, as far as its record says).
std::string source_problem(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return "does not exist";
  if (!fs::is_directory(dir, ec)) return "is a file, not a run folder";
  const RunFolder src(dir);
  if (!src.verified_source() || !src.identity())
    return "is not a run folder (no source.yaml / run.json); give runs/<experiment>/<run>";
  const RunState state = src.status().state;
  if (state != RunState::kTrained && state != RunState::kFinished) {
    return fmt::format(
        "is {}, not a trained run (it must be trained to its last step: run its "
        "experiment first)",
        run_state_name(state));
  }
  if (!fs::exists(src.checkpoint_path(), ec)) return "holds no checkpoint";
  return "";
}

// The source's checkpoint is another run's: the advice is about that run, not this one.
std::string unreadable(const CheckpointUnreadable& e) {
  return fmt::format(
      "holds an unreadable checkpoint {} ({}); train the source run again, or point "
      "train.init_from at another run",
      e.path(), e.reason());
}

}  // namespace

std::string init_from_folder(const TrainOptions& train, const std::string& base_dir) {
  if (train.init_from.empty()) return "";
  fs::path p(train.init_from);
  if (p.is_relative()) p = (fs::path(base_dir) / p).lexically_normal();
  std::string out = p.string();
  for (size_t at = out.find("{seed}"); at != std::string::npos; at = out.find("{seed}"))
    out.replace(at, 6, std::to_string(train.seed));
  return out;
}

void check_init_from(const Config& variant_cfg, const std::string& config_dir) {
  const YAML::Node init = variant_cfg.lookup("train.init_from");
  if (!init.IsDefined() || !init.IsScalar() || init.Scalar().empty()) return;
  const BuiltRun here = build_run(variant_cfg, config_dir);
  // Relative to the experiment file, as run_source_yaml writes it into the run's source.yaml.
  const std::string from = init_from_folder(
      here.exp.train, variant_cfg.file().empty()
                          ? fs::current_path().string()
                          : fs::absolute(fs::path(variant_cfg.file())).parent_path().string());
  const std::string where = variant_cfg.location("train.init_from").str();
  const auto refuse = [&](const std::string& why) {
    return ConfigError(
        fmt::format("{}: train.init_from: '{}' {}; nothing was written", where, from, why));
  };
  const std::string problem = source_problem(from);
  if (!problem.empty()) throw refuse(problem);

  const auto [src_cfg, src_id] = folder_config(RunFolder(from));
  const BuiltRun there = build_run(src_cfg, src_id.config_dir);
  // Read now, so that a damaged source is refused here, not as this run's failure later.
  try {
    load_model_checkpoint(*there.model, from);
  } catch (const CheckpointUnreadable& e) {
    throw refuse(unreadable(e));
  }
  const Shapes want = parameter_shapes(*here.model);
  const Shapes have = parameter_shapes(*there.model);
  std::vector<std::string> missing, extra;
  for (const auto& [name, shape] : want) {
    const auto it = have.find(name);
    if (it == have.end()) {
      missing.push_back(name);
    } else if (it->second != shape) {
      throw refuse(fmt::format("has '{}' as {}, this run's model as {}", name,
                               fmt::join(it->second, "×"), fmt::join(shape, "×")));
    }
  }
  for (const auto& [name, shape] : have)
    if (!want.count(name)) extra.push_back(name);
  if (!missing.empty()) {
    throw refuse(fmt::format("lacks parameters of this run's model: {}", some_of(missing)));
  }
  if (!extra.empty() && !here.exp.train.init_from_partial) {
    throw refuse(
        fmt::format("has parameters this run's model lacks, which would be dropped: {}; set "
                    "train.init_from_partial: true to start from the rest",
                    some_of(extra)));
  }
}

void init_weights_from(LanguageModel& model, const std::string& from, const RunFolder& to) {
  const std::string problem = source_problem(from);
  if (!problem.empty()) throw UserError(fmt::format("train.init_from: '{}' {}", from, problem));
  // load_model_checkpoint compares every parameter's shape after loading and names it, with the
  // model's origin, when it does not fit.
  const std::string origin =
      fmt::format("{} (train.init_from)", (fs::path(to.dir()) / "source.yaml").string());
  int64_t step = -1;
  try {
    step = load_model_checkpoint(model, from, origin);
  } catch (const CheckpointUnreadable& e) {
    throw UserError(fmt::format("train.init_from: '{}' {}", from, unreadable(e)));
  }
  if (step < 0) throw UserError(fmt::format("train.init_from: '{}' holds no checkpoint", from));
}

}  // namespace hybridlab
