#pragma once
// Helpers of the interop tests: temporary folders, models from YAML (model.from expanded), export
// to a folder, and the comparison of a model with an independent Python transcription
// (tests/fixtures/interop/*_reference.py, run by the system Python).

#include <fmt/format.h>
#include <torch/torch.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "checkpoint/safetensors.h"
#include "hybridlab/generate.h"
#include "hybridlab/interop.h"
#include "model/model_options.h"
#include "unit/layers/layers_test_util.h"
#include "util/atomic_file.h"

namespace hybridlab::interoptest {

/// A fresh empty folder <temp>/hybridlab_interop_<tag>_<pid>.
inline std::filesystem::path fresh_dir(const std::string& tag) {
  const auto d = std::filesystem::temp_directory_path() /
                 ("hybridlab_interop_" + tag + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

/// The model of `yaml`'s `model:` section (model.from expanded), built for lengths 32 / 64.
inline std::shared_ptr<LanguageModel> build_from_yaml(const std::string& yaml, PluginHost& host) {
  Config cfg = Config::parse(yaml, "exp.yaml");
  expand_model_from(cfg);
  auto opts = read_model_options(cfg.section("model"));
  cfg.raise_errors();
  return build_model(*opts, host, ModelBuildContext(32, 64));
}

/// The model of the checkpoint in `dir` (`model: {from: dir}`).
inline std::shared_ptr<LanguageModel> import_from(const std::filesystem::path& dir,
                                                  PluginHost& host) {
  return build_from_yaml("model: {from: '" + dir.string() + "'}\n", host);
}

/// Exports `model` in fla's layout into `dir` (config.json, model.safetensors).
inline void export_to(const LanguageModel& model, const std::filesystem::path& dir) {
  const HfCheckpoint ck = export_hf_fla(model, 64);
  write_file_atomic((dir / "config.json").string(), ck.config_json);
  write_safetensors((dir / "model.safetensors").string(), ck.tensors, {{"format", "pt"}});
}

/// Runs `/usr/bin/python3 tests/fixtures/interop/SCRIPT ARGS`, its output in `log`; requires
/// success.
inline void run_oracle(const std::string& script, const std::string& args,
                       const std::filesystem::path& log) {
  const std::string cmd =
      fmt::format("/usr/bin/python3 '{}/tests/fixtures/interop/{}' {} > '{}' 2>&1",
                  HYBRIDLAB_SOURCE_DIR, script, args, log.string());
  const int rc = std::system(cmd.c_str());
  INFO(read_file(log.string()));
  REQUIRE(rc == 0);
}

/// How a model compares with the transcription on the same checkpoint.
struct OracleComparison {
  double kl = 0;              ///< largest KL(oracle || model) over positions
  double diff = 0;            ///< largest absolute logit difference
  bool greedy_equal = false;  ///< the 32-token greedy continuations are equal
};

/// Runs `script`'s `logits` on the checkpoint in `ckpt` for `tokens` [B,T] (in `work`) and
/// compares with `model`'s fp64 forward and greedy decoding (the model is moved to fp64).
inline OracleComparison compare_with_oracle(LanguageModel& model, const std::string& script,
                                            const std::filesystem::path& ckpt,
                                            const torch::Tensor& tokens,
                                            const std::filesystem::path& work) {
  nlohmann::json rows = nlohmann::json::array();
  for (int64_t b = 0; b < tokens.size(0); ++b) {
    const int64_t* p = tokens[b].data_ptr<int64_t>();
    rows.push_back(std::vector<int64_t>(p, p + tokens.size(1)));
  }
  std::ofstream(work / "tokens.json") << rows.dump();
  run_oracle(script,
             fmt::format("logits '{}' --tokens '{}' --out '{}' --greedy 32", ckpt.string(),
                         (work / "tokens.json").string(), (work / "out.safetensors").string()),
             work / "logits.log");
  SafetensorsFile out((work / "out.safetensors").string());
  const torch::Tensor ref = out.load("logits");
  model.to(torch::kFloat64);
  model.eval();
  torch::Tensor mine;
  {
    torch::NoGradGuard ng;
    mine = model.forward(tokens);
  }
  REQUIRE(ref.sizes() == mine.sizes());
  const torch::Tensor lp = torch::log_softmax(ref, -1), lq = torch::log_softmax(mine, -1);
  GenerateOptions g;
  g.max_new_tokens = 32;
  OracleComparison c;
  c.kl = (lp.exp() * (lp - lq)).sum(-1).max().item<double>();
  c.diff = (ref - mine).abs().max().item<double>();
  c.greedy_equal = out.load("greedy").equal(generate(model, tokens, g).tokens);
  return c;
}

}  // namespace hybridlab::interoptest
