// `hybridlab export` end to end: a trained tiny GA run exported in fla's gated_deltanet layout
// (files, names, config), and every bad input: one error line, exit code 2, nothing written.

#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "checkpoint/safetensors.h"
#include "cli_support.h"

namespace fs = std::filesystem;
using clitest::cli;
using clitest::q;
using clitest::Result;
using clitest::slurp;
using json = nlohmann::json;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace export_cli_test {

TEST_CASE("export cli: a trained GA run in fla's layout, and every refusal", "[cli][interop]") {
  clitest::TempDir tmp("exportcli");
  const fs::path exp = tmp.path / "exp.yaml";
  clitest::write_tiny_experiment(exp, "ex", "{steps: 3, batch_size: 2, warmup_steps: 1}",
                                 "{lengths: [32], examples: 4}");
  // fla's attention always rotates: the tiny experiment's attention gets RoPE.
  const Result r = cli("run " + q(exp.string()) + " --runs-dir " + q((tmp.path / "runs").string()) +
                       " model.attention.position.scheme=rope");
  INFO(r.out);
  REQUIRE(r.code == 0);
  const std::string run = (tmp.path / "runs" / "ex" / "main").string();
  const fs::path out = tmp.path / "out";

  const Result ok = cli("export " + q(run) + " " + q(out.string()));
  INFO(ok.out);
  REQUIRE(ok.code == 0);
  CHECK(ok.out.find("wrote " + out.string()) != std::string::npos);
  const json config = json::parse(slurp(out / "config.json"));
  CHECK(config["model_type"] == "gated_deltanet");
  CHECK(config["attn"]["layers"] == json::array({1}));
  CHECK(config["max_position_embeddings"] == 32);
  hybridlab::SafetensorsFile st((out / "model.safetensors").string());
  CHECK(st.header().metadata.at("format") == "pt");
  CHECK(st.contains("model.layers.0.attn.A_log"));
  CHECK(st.contains("model.layers.1.attn.q_proj.weight"));
  CHECK(!st.contains("lm_head.weight"));  // tied
  CHECK(fs::directory_iterator(tmp.path) != fs::directory_iterator());
  for (const auto& e : fs::directory_iterator(tmp.path)) {
    CHECK(e.path().filename().string().find(".tmp.") == std::string::npos);
  }

  struct Bad {
    std::string args, expect;
  };
  const std::vector<Bad> bad{
      {q(run) + " " + q(out.string()), "is not empty"},
      {q(run) + " " + q((tmp.path / "o2").string()) + " --format gguf",
       "--format 'gguf' is not known"},
      {q(tmp.path.string()) + " " + q((tmp.path / "o3").string()), "is not a run folder"},
  };
  for (const auto& b : bad) {
    const Result e = cli("export " + b.args);
    INFO(e.out);
    CHECK(e.code == 2);
    CHECK(e.out.find(b.expect) != std::string::npos);
  }
  CHECK(!fs::exists(tmp.path / "o2"));
  CHECK(!fs::exists(tmp.path / "o3"));
}

TEST_CASE("import cli: a random fla checkpoint runs, evaluates, generates and is analysed",
          "[cli][interop]") {
  clitest::TempDir tmp("importcli");
  std::ofstream(tmp.path / "in.json")
      << R"({"model_type": "gated_deltanet", "hidden_size": 32, "num_heads": 2, "head_dim": 16,
            "expand_v": 1.0, "num_hidden_layers": 4, "vocab_size": 64, "intermediate_size": 64,
            "attn": {"layers": [3], "num_heads": 4, "rope_theta": 10000}})";
  const std::string oracle =
      std::string(HYBRIDLAB_SOURCE_DIR) + "/tests/fixtures/interop/fla_reference.py";
  REQUIRE(std::system(("/usr/bin/python3 " + q(oracle) + " random " + q(tmp.path / "ckpt") +
                       " --config " + q(tmp.path / "in.json") + " --seed 1 > /dev/null")
                          .c_str()) == 0);
  const fs::path exp = tmp.path / "imp.yaml";
  std::ofstream(exp) << "name: imp\n"
                        "model: {from: ckpt}\n"
                        "task: {name: mqar, seq_len: 32, vocab_size: 64, num_kv_pairs: 4}\n"
                        "train: {steps: 0, batch_size: 2}\n"
                        "eval: {lengths: [32], examples: 4}\n"
                        "runtime: {threads: 1}\n"
                        "plugins: {paths: ['" HYBRIDLAB_TEST_PLUGIN_DIR "']}\n";
  const std::string runs = (tmp.path / "runs").string();
  const Result r = cli("run " + q(exp) + " --runs-dir " + q(runs));
  INFO(r.out);
  REQUIRE(r.code == 0);
  const fs::path run = tmp.path / "runs" / "imp" / "main";
  const json results = json::parse(slurp(run / "results.json"));
  CHECK(results["train"]["steps"] == 0);
  CHECK(results["train"]["final_loss"] == "nan");  // no step, no training loss
  CHECK(results["params"].get<int64_t>() > 0);
  for (const std::string& args :
       {"generate " + q(run) + " --prompt '1 2 3' -n 4", "analyze " + q(run),
        "eval " + q(run) + " --variant 'w2=model.attention.window=2'"}) {
    const Result ok = cli(args);
    INFO(args << "\n" << ok.out);
    CHECK(ok.code == 0);
  }
  // A config.json of another layout: one error naming the file and the key, exit 2.
  std::ofstream(tmp.path / "ckpt" / "config.json") << R"({"model_type": "llama"})";
  const Result bad = cli("run " + q(exp) + " --runs-dir " + q((tmp.path / "runs2").string()));
  INFO(bad.out);
  CHECK(bad.code == 2);
  CHECK(bad.out.find("ckpt/config.json: model_type: unknown checkpoint layout 'llama'") !=
        std::string::npos);
  CHECK(!fs::exists(tmp.path / "runs2" / "imp"));
}

}  // namespace export_cli_test
