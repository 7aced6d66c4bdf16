// The `gated_deltanet` import layout: a checkpoint in flash-linear-attention's Hugging Face
// layout (fla-org/flash-linear-attention@bc3b101d) as a hybridlab model. config.json becomes
// `model:` keys, the safetensors tensors its parameters (hf_layout.h).
// Defaults of absent config keys are fla's (configuration_gated_deltanet.py, models/hybrid.py).

#include <fmt/format.h>
#include <torch/torch.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "hybridlab/error.h"
#include "hybridlab/interop.h"
#include "model/hf_fla_names.h"
#include "model/hf_layout.h"
#include "model/hybrid_model.h"

namespace hybridlab {
using nlohmann::json;

namespace {

// Keys of other layouts this importer does not read: a config naming one is not a dense fla
// gated_deltanet model (mixture of experts, multi-head latent attention, vision towers, RoPE
// scaling fla's spec has no field for).
const std::set<std::string>& unsupported_keys() {
  static const std::set<std::string> keys{
      "num_experts",      "num_experts_per_tok", "moe_intermediate_size", "n_routed_experts",
      "n_shared_experts", "q_lora_rank",         "kv_lora_rank",          "vision_config",
      "rope_scaling",     "attnres_block_size",  "layer_types",           "text_config"};
  return keys;
}

// The `attn` spec as a list of objects (fla accepts one object or a list).
std::vector<json> attention_specs(const HfConfig& r, int64_t layers) {
  std::vector<json> specs;
  if (!r.doc.contains("attn") || r.doc["attn"].is_null()) return specs;
  const json& a = r.doc["attn"];
  if (a.is_object()) specs.push_back(a);
  if (a.is_array()) specs.assign(a.begin(), a.end());
  if (specs.empty()) r.bad("attn", "expected an object or a list of objects");
  std::set<int64_t> seen;
  for (const json& s : specs) {
    if (!s.is_object() || !s.contains("layers") || !s["layers"].is_array() ||
        !s.contains("num_heads")) {
      r.bad("attn", "each spec needs `layers` (a list) and `num_heads`");
    }
    for (const json& l : s["layers"]) {
      if (!l.is_number_integer() || l.get<int64_t>() < 0 || l.get<int64_t>() >= layers ||
          !seen.insert(l.get<int64_t>()).second) {
        r.bad("attn.layers",
              fmt::format("{} is not a layer index in [0, {}) named once", l.dump(), layers));
      }
    }
    if (s.value("qkv_bias", false)) {
      r.bad("attn.qkv_bias", "true: hybridlab's attention has no projection biases");
    }
  }
  return specs;
}

// One attention spec as hybridlab attention keys under `prefix` ("attention.", "overrides.3.").
void add_attention_keys(const json& spec, const HfConfig& r, const std::string& prefix,
                        std::vector<std::pair<std::string, YAML::Node>>& keys) {
  const int64_t heads = spec["num_heads"].get<int64_t>();
  const json& w = spec.contains("window_size") ? spec["window_size"] : json(nullptr);
  const double theta = spec.value("rope_theta", 10000.0);
  if (!(theta > 0) || !std::isfinite(theta))
    r.bad("attn.rope_theta", "must be positive and finite");
  YAML::Node position;
  position["scheme"] = "rope";
  position["rope_theta"] = theta;
  keys.emplace_back(prefix + "n_heads", YAML::Node(heads));
  keys.emplace_back(prefix + "n_kv_heads", YAML::Node(spec.value("num_kv_heads", heads)));
  keys.emplace_back(prefix + "window", YAML::Node(w.is_null() ? int64_t{0} : w.get<int64_t>()));
  keys.emplace_back(prefix + "position", position);
}

// fla's MLP width when intermediate_size is null (fla/modules/mlp.py): 256·ceil(⌊d·r·2/3⌋/256).
int64_t fla_intermediate_size(const HfConfig& r, int64_t d) {
  const int64_t given = r.get<int64_t>("intermediate_size", 0);
  if (given > 0) return given;
  const double ratio = r.get<double>("hidden_ratio", 4.0);
  const auto inner = static_cast<int64_t>(static_cast<double>(d) * ratio * 2.0 / 3.0);
  return 256 * ((inner + 255) / 256);
}

// Refuses what this importer cannot read as the layout's semantics.
void check_supported(const HfConfig& r) {
  for (const auto& key : unsupported_keys()) {
    if (r.doc.contains(key) && !r.doc[key].is_null()) {
      r.bad(key,
            "is set: this importer reads dense gated_deltanet models only (no mixture of "
            "experts, latent attention, vision tower, attention residuals or RoPE scaling)");
    }
  }
  if (r.get<std::string>("hidden_act", "swish") != "swish") {
    r.bad("hidden_act", "only swish (SwiGLU) is read");
  }
  if (!r.get<bool>("use_gate", true))
    r.bad("use_gate", "false: hybridlab's Gated DeltaNet is gated");
}

HfModelKeys fla_model_keys(const HfConfig& r) {
  check_supported(r);
  const int64_t d = r.get<int64_t>("hidden_size", 2048);
  const int64_t n_layers = r.get<int64_t>("num_hidden_layers", 21);
  const double eps = r.get<double>("norm_eps", 1e-6);
  const std::vector<json> specs = attention_specs(r, n_layers);
  std::string pattern(static_cast<size_t>(n_layers), 'G');
  for (const json& s : specs) {
    for (const json& l : s["layers"]) pattern[l.get<size_t>()] = 'A';
  }
  std::vector<std::pair<std::string, YAML::Node>> keys{
      {"d_model", YAML::Node(d)},
      {"vocab_size", YAML::Node(r.get<int64_t>("vocab_size", 32000))},
      {"layers", YAML::Node(pattern)},
      {"norm_eps", YAML::Node(eps)},
      {"tie_embeddings", YAML::Node(r.get<bool>("tie_word_embeddings", false))},
      {"init_std", YAML::Node(r.get<double>("initializer_range", 0.02))},
      {"mlp.intermediate_size", YAML::Node(fla_intermediate_size(r, d))}};
  if (pattern.find('G') != std::string::npos) {
    const std::string g = "gated_deltanet.";
    keys.emplace_back(g + "n_heads", YAML::Node(r.get<int64_t>("num_heads", 6)));
    keys.emplace_back(g + "n_v_heads", YAML::Node(r.get<int64_t>("num_v_heads", 0)));
    keys.emplace_back(g + "head_dim", YAML::Node(r.get<int64_t>("head_dim", 256)));
    keys.emplace_back(g + "expand_v", YAML::Node(r.get<double>("expand_v", 2.0)));
    keys.emplace_back(g + "conv_size", YAML::Node(r.get<int64_t>("conv_size", 4)));
    keys.emplace_back(g + "use_short_conv", YAML::Node(r.get<bool>("use_short_conv", true)));
    keys.emplace_back(g + "allow_neg_eigval", YAML::Node(r.get<bool>("allow_neg_eigval", false)));
    keys.emplace_back(g + "norm_eps", YAML::Node(eps));  // fla's one norm_eps is its o_norm's too
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    if (i == 0) {
      add_attention_keys(specs[i], r, "attention.", keys);
      continue;
    }
    for (const json& l : specs[i]["layers"]) {
      add_attention_keys(specs[i], r, fmt::format("overrides.{}.", l.get<int64_t>()), keys);
    }
  }
  return keys;
}

// Every parameter from the tensor fla names it by (hf_fla_names.h).
void fla_load(HybridModel& model, HfTensorSource& tensors, const HfConfig& /*config*/) {
  std::vector<std::string> names;
  std::vector<std::vector<int64_t>> shapes;
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    names.push_back(item.key());
    shapes.push_back(item.value().sizes().vec());
  }
  const std::vector<HfFlaTensor> plan = hf_fla_tensors(names, hf_fla_layers(model.options()));
  for (size_t i = 0; i < plan.size(); ++i) {
    if (!plan[i].permute_rope) {
      tensors.load_into(plan[i].name, model, plan[i].parameter);
      continue;
    }
    const torch::Tensor w = tensors.load(plan[i].name, shapes[i], plan[i].parameter);
    set_parameter(model, plan[i].parameter, half_to_interleaved(w, plan[i].head_dim));
  }
  // A tied model's lm_head.weight is the embedding again (transformers ties it on load).
  tensors.finish(model.options().tie_embeddings ? std::set<std::string>{"lm_head.weight"}
                                                : std::set<std::string>{});
}

}  // namespace

HfLayout fla_gated_deltanet_layout() {
  HfLayout l;
  l.description = "flash-linear-attention gated_deltanet (Gated DeltaNet with hybrid attn layers)";
  l.model_keys = fla_model_keys;
  l.load = fla_load;
  return l;
}

}  // namespace hybridlab
