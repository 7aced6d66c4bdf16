// train.init_from checked before anything is written: the source must be a trained run whose
// model has this run's parameters at their shapes, and none this run would drop unless asked.

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "hybridlab/experiment.h"
#include "hybridlab/run.h"
#include "run/init_from.h"
#include "runs_support.h"

using namespace hybridlab;
namespace fs = std::filesystem;

namespace init_from_test {
namespace {

const std::string kTrain =
    "train: {steps: 2, batch_size: 4, lr: 0.01, warmup_steps: 0, checkpoint_every: 2, seed: 1}\n";

// The only variant's config of `yaml` written to <dir>/next.yaml (train.init_from on line 8).
Config next_config(const fs::path& dir, const std::string& yaml) {
  const auto file = dir / "next.yaml";
  std::ofstream(file) << yaml;
  const Config cfg = load_experiment_config(file.string(), {});
  const Experiment exp = read_experiment(cfg);
  return variant_config(cfg, expand_sweep(exp.sweep).at(0), exp.sweep);
}

std::string continuing(const std::string& from, const std::string& more = "") {
  return runstest::tiny_yaml() + "train: {steps: 2, batch_size: 4, lr: 0.01, warmup_steps: 0,\n" +
         "        init_from: '" + from + "'" + more + "}\n";
}

std::string refusal(const Config& cfg) {
  try {
    check_init_from(cfg, "");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("init_from: a source that is not a trained run is refused at its line, nothing written",
          "[runs][init_from]") {
  runstest::TempDir src_dir, dir;
  const RunFolder src = runstest::prepare_main(src_dir.path, runstest::tiny_yaml(kTrain));
  const std::string file = (src_dir.path / "exp.yaml").string();
  const auto check = [&](const std::string& from, const std::string& why) {
    const std::string e = refusal(next_config(dir.path, continuing(from)));
    INFO(e);
    CHECK_THAT(e, Catch::Contains("next.yaml:8") && Catch::Contains("train.init_from") &&
                      Catch::Contains(why) && Catch::Contains("nothing was written"));
  };
  check((src_dir.path / "missing").string(), "does not exist");
  check(file, "is a file, not a run folder");
  check(src_dir.str(), "is not a run folder");
  check(src.dir(), "is new, not a trained run");
  CHECK_FALSE(fs::exists(dir.path / "runs"));
  // Unset: nothing to check.
  CHECK(refusal(next_config(dir.path, runstest::tiny_yaml(kTrain))).empty());
}

TEST_CASE("init_from: parameters that differ or would be dropped are named, partial is explicit",
          "[runs][init_from]") {
  runstest::TempDir src_dir, dir;
  const RunFolder src = runstest::prepare_main(src_dir.path, runstest::tiny_yaml(kTrain));
  ExecuteOptions quiet;
  quiet.quiet = true;
  execute_run_folder(src, quiet);
  REQUIRE(src.status().state == RunState::kFinished);

  // The same model: accepted.
  CHECK(refusal(next_config(dir.path, continuing(src.dir()))).empty());

  // A wider model: the first parameter, with both shapes.
  std::string wide = continuing(src.dir());
  wide.replace(wide.find("d_model: 16"), 11, "d_model: 24");
  const std::string e_wide = refusal(next_config(dir.path, wide));
  CHECK_THAT(e_wide, Catch::Contains("next.yaml:8") && Catch::Contains("×16") &&
                         Catch::Contains("×24") && Catch::Contains("this run's model"));

  // One layer fewer (GA -> G): the attention layer's weights would be dropped.
  std::string shorter = continuing(src.dir());
  shorter.replace(shorter.find("layers: GA"), 10, "layers: G ");
  const std::string e_short = refusal(next_config(dir.path, shorter));
  CHECK_THAT(e_short, Catch::Contains("would be dropped") && Catch::Contains("layers_1.") &&
                          Catch::Contains("init_from_partial: true"));
  std::string partial = continuing(src.dir(), ", init_from_partial: true");
  partial.replace(partial.find("layers: GA"), 10, "layers: G ");
  CHECK(refusal(next_config(dir.path, partial)).empty());

  // One layer more (G <- GA the other way): this run's parameters the source lacks.
  runstest::TempDir g_dir;
  std::string g_yaml = runstest::tiny_yaml(kTrain);
  g_yaml.replace(g_yaml.find("layers: GA"), 10, "layers: G ");
  const RunFolder g = runstest::prepare_main(g_dir.path, g_yaml);
  execute_run_folder(g, quiet);
  const std::string e_more = refusal(next_config(dir.path, continuing(g.dir())));
  CHECK_THAT(e_more, Catch::Contains("lacks parameters of this run's model") &&
                         Catch::Contains("layers_1."));
}

}  // namespace init_from_test
