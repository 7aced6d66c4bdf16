// model.from: fla gated_deltanet checkpoints as hybridlab models. Export -> import round-trips
// bit-exactly; a random checkpoint written by the independent transcription
// (tests/fixtures/interop/fla_reference.py `random`, F32 and BF16) gives the transcription's
// logits (KL < 1e-6) and greedy continuation; every bad checkpoint is refused naming the file and
// the key or tensor.

#include <fmt/format.h>
#include <torch/torch.h>
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "checkpoint/safetensors.h"
#include "hybridlab/error.h"
#include "hybridlab/interop.h"
#include "unit/interop/interop_test_util.h"
#include "util/atomic_file.h"

using namespace hybridlab;
namespace fs = std::filesystem;

namespace hf_fla_import_test {
namespace {

using interoptest::build_from_yaml;
using interoptest::export_to;
using interoptest::fresh_dir;
using interoptest::import_from;

std::string import_error(const fs::path& dir) {
  auto host = test::test_host();
  try {
    import_from(dir, *host);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

// The tiny hybrid every random checkpoint below starts from (config keys of fla).
nlohmann::json tiny_config() {
  return nlohmann::json::parse(R"({
    "model_type": "gated_deltanet", "hidden_size": 32, "num_heads": 2, "head_dim": 16,
    "expand_v": 1.0, "num_v_heads": 4, "num_hidden_layers": 4, "vocab_size": 48,
    "intermediate_size": 96, "tie_word_embeddings": false, "norm_eps": 1e-6,
    "attn": [{"layers": [1], "num_heads": 4, "num_kv_heads": 2, "window_size": 6,
              "rope_theta": 500.0},
             {"layers": [3], "num_heads": 2}]})");
}

// Writes a random checkpoint of `config` in `dtype` into `dir` with the transcription.
void random_checkpoint(const nlohmann::json& config, const fs::path& dir,
                       const std::string& dtype) {
  std::ofstream(dir / "in.json") << config.dump();
  interoptest::run_oracle("fla_reference.py",
                          fmt::format("random '{}' --config '{}' --seed 3 --dtype {}",
                                      (dir / "ckpt").string(), (dir / "in.json").string(), dtype),
                          dir / "random.log");
}

}  // namespace

TEST_CASE("hf-fla import: export then import gives the same parameters, bit for bit", "[interop]") {
  auto host = test::test_host();
  torch::manual_seed(11);
  auto original = build_from_yaml(
      "model:\n  d_model: 32\n  vocab_size: 40\n  layers: GAGG\n  tie_embeddings: false\n"
      "  attention: {n_heads: 4, n_kv_heads: 2, window: 5, position: {scheme: rope}}\n"
      "  gated_deltanet: {n_heads: 2, head_dim: 16, n_v_heads: 4, expand_v: 1.5}\n",
      *host);
  const fs::path dir = fresh_dir("roundtrip");
  export_to(*original, dir);
  auto imported = import_from(dir, *host);
  const auto a = original->named_parameters(true), b = imported->named_parameters(true);
  REQUIRE(a.size() == b.size());
  for (const auto& p : a) {
    INFO(p.key());
    REQUIRE(b.contains(p.key()));
    CHECK(torch::equal(p.value(), b[p.key()]));
  }
  // And the imported model exports the same files' tensors again.
  const fs::path again = fresh_dir("roundtrip_again");
  export_to(*imported, again);
  SafetensorsFile f1((dir / "model.safetensors").string()),
      f2((again / "model.safetensors").string());
  REQUIRE(f1.header().tensors.size() == f2.header().tensors.size());
  for (const auto& e : f1.header().tensors) CHECK(torch::equal(f1.load(e.name), f2.load(e.name)));
  fs::remove_all(dir);
  fs::remove_all(again);
}

TEST_CASE("hf-fla import: an interleaved-RoPE model exported and imported computes the same",
          "[interop]") {
  // The import builds fla's rotate-half RoPE: q/k rows come back in another order, the logits
  // are the same (fp64, to rounding).
  auto host = test::test_host();
  torch::manual_seed(5);
  auto original = build_from_yaml(
      "model:\n  d_model: 32\n  vocab_size: 40\n  layers: AG\n"
      "  attention: {n_heads: 2, position: {scheme: rope, layout: interleaved}}\n",
      *host);
  const fs::path dir = fresh_dir("interleaved");
  export_to(*original, dir);
  auto imported = import_from(dir, *host);
  original->to(torch::kFloat64);
  imported->to(torch::kFloat64);
  torch::NoGradGuard ng;
  const torch::Tensor tokens = torch::randint(0, 40, {2, 16});
  const double diff =
      (original->forward(tokens) - imported->forward(tokens)).abs().max().item<double>();
  CHECK(diff < 1e-12);
  fs::remove_all(dir);
}

TEST_CASE(
    "hf-fla import: a random fla checkpoint gives the transcription's logits and greedy "
    "continuation (F32 and BF16)",
    "[interop]") {
  for (const std::string dtype : {"F32", "BF16"}) {
    INFO(dtype);
    const fs::path dir = fresh_dir("random_" + dtype);
    random_checkpoint(tiny_config(), dir, dtype);
    auto host = test::test_host();
    auto model = import_from(dir / "ckpt", *host);
    torch::manual_seed(2);
    const torch::Tensor tokens = torch::randint(0, 48, {2, 20});
    const auto c =
        interoptest::compare_with_oracle(*model, "fla_reference.py", dir / "ckpt", tokens, dir);
    INFO("KL " << c.kl << ", largest logit difference " << c.diff);
    CHECK(c.kl < 1e-6);
    CHECK(c.diff < 1e-9);
    CHECK(c.greedy_equal);
    fs::remove_all(dir);
  }
}

TEST_CASE("hf-fla import: every bad checkpoint is refused naming the file and the key or tensor",
          "[interop]") {
  const fs::path dir = fresh_dir("bad");
  random_checkpoint(tiny_config(), dir, "F32");
  const fs::path ck = dir / "ckpt";
  const std::string config = read_file((ck / "config.json").string());
  auto with_config = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json c = nlohmann::json::parse(config);
    edit(c);
    std::ofstream(ck / "config.json") << c.dump();
  };
  struct Case {
    std::string what;
    std::function<void(nlohmann::json&)> edit;
    std::string expect;
  };
  const std::vector<Case> cases{
      {"another layout", [](nlohmann::json& c) { c["model_type"] = "llama"; },
       "config.json: model_type: unknown checkpoint layout 'llama'"},
      {"mixture of experts", [](nlohmann::json& c) { c["num_experts"] = 8; },
       "config.json: num_experts: is set"},
      {"qkv bias", [](nlohmann::json& c) { c["attn"][0]["qkv_bias"] = true; },
       "config.json: attn.qkv_bias: true"},
      {"activation", [](nlohmann::json& c) { c["hidden_act"] = "gelu"; },
       "config.json: hidden_act: only swish"},
      {"a shape the tensors do not have", [](nlohmann::json& c) { c["intermediate_size"] = 64; },
       "tensor 'model.layers.0.mlp.gate_proj.weight' is [96,32] where the config makes it [64,32]"},
      {"a tensor the config does not make",
       [](nlohmann::json& c) {
         c["num_hidden_layers"] = 3;
         c["attn"] = nlohmann::json::parse(R"({"layers": [1], "num_heads": 4, "num_kv_heads": 2})");
       },
       "tensor 'model.layers.3."},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    with_config(c.edit);
    const std::string err = import_error(ck);
    INFO(err);
    CHECK(err.find(c.expect) != std::string::npos);
  }
  std::ofstream(ck / "config.json") << config;
  // A missing tensor: the checkpoint rewritten without one.
  {
    SafetensorsFile f((ck / "model.safetensors").string());
    std::vector<std::pair<std::string, torch::Tensor>> kept;
    for (const auto& e : f.header().tensors) {
      if (e.name != "model.layers.2.attn.A_log") kept.emplace_back(e.name, f.load(e.name));
    }
    write_safetensors((ck / "model.safetensors").string(), kept);
    const std::string err = import_error(ck);
    INFO(err);
    CHECK(err.find("no tensor 'model.layers.2.attn.A_log', which the model's parameter "
                   "'layers_2.mixer.A_log' needs") != std::string::npos);
  }
  // A truncated file.
  fs::resize_file(ck / "model.safetensors", fs::file_size(ck / "model.safetensors") - 4);
  CHECK(import_error(ck).find("model.safetensors: the tensors end at byte") != std::string::npos);
  // No config.json.
  fs::remove(ck / "config.json");
  CHECK(import_error(ck).find("model.from: '" + ck.string() +
                              "' is not a folder holding "
                              "config.json") != std::string::npos);
  fs::remove_all(dir);
}

}  // namespace hf_fla_import_test
