// Rebuilding a trained run from its folder: the one path for eval, analyze and generate.

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>

#include "hybridlab/run_build.h"
#include "hybridlab/trainer.h"

namespace hybridlab {

std::pair<Config, RunIdentity> folder_config(const RunFolder& folder) {
  const auto source = folder.verified_source();
  const auto id = folder.identity();
  if (!source || !id) {
    throw UserError(fmt::format(
        "'{}' is not a run folder (no source.yaml / run.json); give runs/<experiment>/<run>",
        folder.dir()));
  }
  return {Config::parse(*source, (std::filesystem::path(folder.dir()) / "source.yaml").string()),
          *id};
}

TrainedRun load_trained_run(const RunFolder& folder, const std::vector<int64_t>& lengths,
                            int64_t examples, const std::string& lengths_option) {
  auto [cfg, id] = folder_config(folder);
  const RunState state = folder.status().state;
  if (state != RunState::kTrained && state != RunState::kFinished) {
    throw UserError(fmt::format(
        "'{}' is {}: only a run trained to its last step can be used; `hybridlab run` (or "
        "`train`) with its experiment resumes it",
        folder.dir(), run_state_name(state)));
  }
  if (!lengths.empty()) {
    YAML::Node seq(YAML::NodeType::Sequence);
    for (int64_t L : lengths) seq.push_back(L);
    cfg.set("eval.lengths", seq, Location{"command line", 0, 0});
  }
  // Through the config, so that the eval reader's checks (memory included) apply to them too.
  if (examples > 0) cfg.set("eval.examples", YAML::Node(examples), Location{"command line", 0, 0});
  BuiltRun b;
  try {
    b = build_run(cfg, id.config_dir);
  } catch (const ConfigError& e) {
    // The lengths asked for on the command line stand in for eval.lengths (and set the longest
    // length the model is built for, e.g. against a learned table): say which option gave them.
    if (lengths.empty()) throw;
    throw ConfigError(fmt::format("{} {}: {}", lengths_option, fmt::join(lengths, ","), e.what()));
  } catch (const DataError& e) {
    if (lengths.empty()) throw;
    throw DataError(fmt::format("{} {}: {}", lengths_option, fmt::join(lengths, ","), e.what()));
  }
  if (load_model_checkpoint(*b.model, folder.dir()) < 0) {
    throw UserError(fmt::format("'{}' holds no checkpoint; train it first (hybridlab run / train)",
                                folder.dir()));
  }
  return TrainedRun{std::move(cfg), std::move(id), state, std::move(b)};
}

}  // namespace hybridlab
