// model.from for the dense Qwen3-Next and Qwen3.5 text layouts. Each trap of the layouts has its
// own hand-made check: the per-key-head grouping of in_proj_qkvz / in_proj_ba, the split of the
// shared conv1d, the zero-centred (1 + w) norms, the gated q_proj and the partial rotary. Random
// checkpoints written by the independent transcription (tests/fixtures/interop/qwen_reference.py)
// give its logits and greedy continuation.

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
using json = nlohmann::json;

namespace hf_qwen_import_test {
namespace {

using interoptest::fresh_dir;
using interoptest::import_from;

torch::Tensor param(LanguageModel& m, const std::string& name) {
  const auto params = m.named_parameters(true);
  const torch::Tensor* p = params.find(name);
  REQUIRE(p);
  return p->detach();
}

// The tiny dense Qwen3-Next config of these tests: 2 key heads, 4 value heads (group 2).
json tiny_qwen3_next() {
  return json::parse(R"({
    "model_type": "qwen3_next", "hidden_size": 8, "vocab_size": 20, "num_hidden_layers": 2,
    "layer_types": ["linear_attention", "full_attention"], "intermediate_size": 16,
    "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 8,
    "rope_parameters": {"rope_theta": 10000.0, "partial_rotary_factor": 0.25},
    "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 2,
    "linear_value_head_dim": 3, "linear_conv_kernel_dim": 4, "num_experts": 0,
    "rms_norm_eps": 1e-6, "tie_word_embeddings": true})");
}

// Row r of a [rows, 8] matrix whose every entry is `tag`·1000 + r: which block and row it came
// from.
torch::Tensor tagged(int64_t rows, int64_t tag) {
  return (torch::arange(rows, torch::kFloat32) + 1000.0f * static_cast<float>(tag))
      .unsqueeze(1)
      .expand({rows, 8})
      .contiguous();
}

// Writes the tiny Qwen3-Next checkpoint with every tensor tagged, the norms at `norm_w`.
void write_tagged_qwen3_next(const fs::path& dir, float norm_w) {
  std::ofstream(dir / "config.json") << tiny_qwen3_next().dump();
  // in_proj_qkvz per key head h (2 heads): [q 2 rows, k 2, v 2·3, z 2·3] = 16 rows; tags 1..4
  // are q, k, v, z, plus 10·h for the head.
  std::vector<torch::Tensor> qkvz, ba;
  for (int64_t h = 0; h < 2; ++h) {
    qkvz.push_back(tagged(2, 1 + 10 * h));
    qkvz.push_back(tagged(2, 2 + 10 * h));
    qkvz.push_back(tagged(6, 3 + 10 * h));
    qkvz.push_back(tagged(6, 4 + 10 * h));
    ba.push_back(tagged(2, 5 + 10 * h));  // b of the head's 2 value heads
    ba.push_back(tagged(2, 6 + 10 * h));  // a
  }
  const std::string l0 = "model.layers.0.", l1 = "model.layers.1.";
  const auto ones = [&](int64_t n) { return torch::full({n}, norm_w); };
  std::vector<std::pair<std::string, torch::Tensor>> t{
      {"model.embed_tokens.weight", torch::randn({20, 8})},
      {"model.norm.weight", ones(8)},
      {l0 + "input_layernorm.weight", ones(8)},
      {l0 + "post_attention_layernorm.weight", ones(8)},
      {l0 + "linear_attn.in_proj_qkvz.weight", torch::cat(qkvz)},
      {l0 + "linear_attn.in_proj_ba.weight", torch::cat(ba)},
      {l0 + "linear_attn.conv1d.weight",
       torch::arange(20, torch::kFloat32).view({20, 1, 1}).expand({20, 1, 4}).contiguous()},
      {l0 + "linear_attn.A_log", torch::zeros({4})},
      {l0 + "linear_attn.dt_bias", torch::ones({4})},
      {l0 + "linear_attn.norm.weight", torch::full({3}, norm_w)},
      {l0 + "linear_attn.out_proj.weight", torch::randn({8, 12})},
      {l1 + "input_layernorm.weight", ones(8)},
      {l1 + "post_attention_layernorm.weight", ones(8)},
      {l1 + "self_attn.q_proj.weight", tagged(32, 7)},
      {l1 + "self_attn.k_proj.weight", torch::randn({8, 8})},
      {l1 + "self_attn.v_proj.weight", torch::randn({8, 8})},
      {l1 + "self_attn.o_proj.weight", torch::randn({8, 16})},
      {l1 + "self_attn.q_norm.weight", torch::full({8}, norm_w)},
      {l1 + "self_attn.k_norm.weight", torch::full({8}, norm_w)},
      {"mtp.fc.weight", torch::zeros({2, 2})},  // ignored, as transformers ignores it
  };
  for (const std::string& l : {l0, l1}) {
    t.emplace_back(l + "mlp.gate_proj.weight", torch::randn({16, 8}));
    t.emplace_back(l + "mlp.up_proj.weight", torch::randn({16, 8}));
    t.emplace_back(l + "mlp.down_proj.weight", torch::randn({8, 16}));
  }
  write_safetensors((dir / "model.safetensors").string(), t);
}

// The first column of a tagged parameter: which block and row each row came from.
std::vector<int64_t> tags(const torch::Tensor& w) {
  const torch::Tensor c = w.select(1, 0).to(torch::kLong).contiguous();
  return {c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel()};
}

}  // namespace

TEST_CASE("qwen3_next import: in_proj_qkvz and in_proj_ba are split per key head", "[interop]") {
  const fs::path dir = fresh_dir("fused");
  write_tagged_qwen3_next(dir, 0.5f);
  auto host = test::test_host();
  auto m = import_from(dir, *host);
  const std::string g = "layers_0.mixer.";
  // q: key head 0's 2 rows (tag 1), then key head 1's (tag 11).
  CHECK(tags(param(*m, g + "q_proj.weight")) == std::vector<int64_t>{1000, 1001, 11000, 11001});
  CHECK(tags(param(*m, g + "k_proj.weight")) == std::vector<int64_t>{2000, 2001, 12000, 12001});
  // v: value heads 0, 1 (key head 0's group, 3 rows each), then 2, 3 (key head 1's).
  CHECK(tags(param(*m, g + "v_proj.weight")) == std::vector<int64_t>{3000, 3001, 3002, 3003, 3004,
                                                                     3005, 13000, 13001, 13002,
                                                                     13003, 13004, 13005});
  CHECK(tags(param(*m, g + "g_proj.weight")) == std::vector<int64_t>{4000, 4001, 4002, 4003, 4004,
                                                                     4005, 14000, 14001, 14002,
                                                                     14003, 14004, 14005});
  CHECK(tags(param(*m, g + "b_proj.weight")) == std::vector<int64_t>{5000, 5001, 15000, 15001});
  CHECK(tags(param(*m, g + "a_proj.weight")) == std::vector<int64_t>{6000, 6001, 16000, 16001});
  // conv1d channels [q 4 | k 4 | v 12], channel c holding c.
  CHECK(param(*m, g + "q_conv").select(2, 0).flatten().equal(torch::arange(0, 4, torch::kFloat32)));
  CHECK(param(*m, g + "k_conv").select(2, 0).flatten().equal(torch::arange(4, 8, torch::kFloat32)));
  CHECK(
      param(*m, g + "v_conv").select(2, 0).flatten().equal(torch::arange(8, 20, torch::kFloat32)));
  fs::remove_all(dir);
}

TEST_CASE(
    "qwen3_next import: zero-centred norms become 1 + w, the gated q_proj and partial "
    "rotary are kept",
    "[interop]") {
  const fs::path dir = fresh_dir("norms");
  write_tagged_qwen3_next(dir, 0.5f);
  auto host = test::test_host();
  auto m = import_from(dir, *host);
  for (const char* name :
       {"final_norm.weight", "layers_0.mixer_norm.weight", "layers_1.mlp_norm.weight",
        "layers_1.mixer.q_norm.weight", "layers_1.mixer.k_norm.weight"}) {
    INFO(name);
    CHECK(param(*m, name).equal(torch::full_like(param(*m, name), 1.5f)));
  }
  // The gated attention output norm is plain (Qwen3NextRMSNormGated): w as stored.
  CHECK(param(*m, "layers_0.mixer.o_norm.weight").equal(torch::full({3}, 0.5f)));
  // q_proj holds [q_h, gate_h] per head in both layouts: rows as stored.
  CHECK(tags(param(*m, "layers_1.mixer.q_proj.weight")) ==
        tags(torch::arange(32, torch::kFloat32).add(7000).unsqueeze(1).expand({32, 8})));
  // The model keys: gated attention with q/k norms and RoPE on a quarter of each head.
  const auto keys = hf_model_keys(dir.string());
  std::map<std::string, std::string> flat;
  for (const auto& [k, v] : keys) flat[k] = YAML::Dump(v);
  CHECK(flat["layers"] == "GA");
  CHECK(flat["attention.output_gate"] == "true");
  CHECK(flat["attention.qk_norm"] == "true");
  CHECK(flat["attention.position"].find("partial_rotary_factor: 0.25") != std::string::npos);
  CHECK(flat["gated_deltanet.expand_v"] == "1.5");
  fs::remove_all(dir);
}

TEST_CASE("qwen import: layouts this importer does not read are refused naming the key",
          "[interop]") {
  const fs::path dir = fresh_dir("refusals");
  write_tagged_qwen3_next(dir, 0.0f);
  struct Case {
    std::string what;
    std::function<void(json&)> edit;
    std::string expect;
  };
  const std::vector<Case> cases{
      {"experts", [](json& c) { c.erase("num_experts"); },
       "num_experts: 512: layer 0 would be a mixture of experts"},
      {"bias", [](json& c) { c["attention_bias"] = true; }, "attention_bias: is set (true)"},
      {"yarn", [](json& c) { c["rope_parameters"]["rope_type"] = "yarn"; },
       "rope_type: 'yarn': only default RoPE is read"},
      {"layer types", [](json& c) { c["layer_types"] = {"linear_attention"}; },
       "layer_types: expected a list of 2 layer types"},
      {"composite without text", [](json& c) { c["model_type"] = "qwen3_5"; },
       "text_config: the composite qwen3_5 config has no text_config object"},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    json cfg = tiny_qwen3_next();
    c.edit(cfg);
    std::ofstream(dir / "config.json") << cfg.dump();
    auto host = test::test_host();
    std::string err;
    try {
      import_from(dir, *host);
    } catch (const UserError& e) {
      err = e.what();
    }
    INFO(err);
    CHECK(err.find(c.expect) != std::string::npos);
    CHECK(err.find("config.json") != std::string::npos);
  }
  fs::remove_all(dir);
}

namespace {

// A tiny hybrid (GGGA, GVA 2:4 key:value heads, GQA 4:2, partial rotary) in `type`'s config form.
json tiny_random_config(const std::string& type) {
  json text = json::parse(R"({
    "hidden_size": 32, "linear_num_key_heads": 2, "linear_num_value_heads": 4,
    "linear_key_head_dim": 8, "linear_value_head_dim": 8, "num_attention_heads": 4,
    "num_key_value_heads": 2, "head_dim": 16, "num_hidden_layers": 4, "vocab_size": 50,
    "intermediate_size": 64,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0,
                        "partial_rotary_factor": 0.25}})");
  if (type == "qwen3_next") {
    text["model_type"] = type;
    text["num_experts"] = 0;
    return text;
  }
  text["layer_types"] = {"linear_attention", "linear_attention", "linear_attention",
                         "full_attention"};
  text["rope_parameters"]["mrope_section"] = {1, 1, 0};
  if (type == "qwen3_5_text") {
    text["model_type"] = type;
    return text;
  }
  return json{{"model_type", "qwen3_5"}, {"tie_word_embeddings", false}, {"text_config", text}};
}

}  // namespace

TEST_CASE(
    "qwen import: random Qwen3-Next, Qwen3.5 and Qwen3.5-text checkpoints give the "
    "transcription's logits and greedy continuation",
    "[interop]") {
  for (const auto& [type, dtype] : std::vector<std::pair<std::string, std::string>>{
           {"qwen3_next", "F32"}, {"qwen3_5", "F32"}, {"qwen3_5_text", "BF16"}}) {
    INFO(type << " " << dtype);
    const fs::path dir = fresh_dir("random_" + type);
    std::ofstream(dir / "in.json") << tiny_random_config(type).dump();
    interoptest::run_oracle("qwen_reference.py",
                            fmt::format("random '{}' --config '{}' --seed 4 --dtype {}",
                                        (dir / "ckpt").string(), (dir / "in.json").string(), dtype),
                            dir / "random.log");
    auto host = test::test_host();
    auto model = import_from(dir / "ckpt", *host);
    torch::manual_seed(9);
    const torch::Tensor tokens = torch::randint(0, 50, {2, 16});
    const auto c =
        interoptest::compare_with_oracle(*model, "qwen_reference.py", dir / "ckpt", tokens, dir);
    INFO("KL " << c.kl << ", largest logit difference " << c.diff);
    CHECK(c.kl < 1e-6);
    CHECK(c.diff < 1e-4);  // the (1 + w) norms are rounded to the model's fp32 parameters
    CHECK(c.greedy_equal);
    fs::remove_all(dir);
  }
}

}  // namespace hf_qwen_import_test
