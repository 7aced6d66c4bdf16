// model.from: a checkpoint in flash-linear-attention's `gated_deltanet` Hugging Face layout
// (fla-org/flash-linear-attention@bc3b101d) as a hybridlab model. config.json becomes `model:`
// keys (expand_model_from), the safetensors tensors its parameters (load_hf_fla_weights).
// Defaults of absent config keys are fla's (configuration_gated_deltanet.py, models/hybrid.py).

#include <fmt/format.h>
#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "checkpoint/safetensors.h"
#include "hybridlab/error.h"
#include "hybridlab/interop.h"
#include "model/hf_fla_names.h"
#include "model/hybrid_model.h"
#include "util/atomic_file.h"

namespace hybridlab {
namespace fs = std::filesystem;
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

struct Reader {
  const json& doc;
  std::string file;
  [[noreturn]] void bad(const std::string& key, const std::string& why) const {
    throw ConfigError(fmt::format("{}: {}: {}", file, key, why));
  }
  template <class T>
  T get(const std::string& key, const T& fallback) const {
    if (!doc.contains(key) || doc[key].is_null()) return fallback;
    try {
      return doc[key].get<T>();
    } catch (const json::exception&) {
      bad(key, fmt::format("unexpected value {}", doc[key].dump()));
    }
  }
};

// The `attn` spec as a list of objects (fla accepts one object or a list).
std::vector<json> attention_specs(const Reader& r, int64_t layers) {
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
void add_attention_keys(const json& spec, const Reader& r, const std::string& prefix,
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
int64_t fla_intermediate_size(const Reader& r, int64_t d) {
  const int64_t given = r.get<int64_t>("intermediate_size", 0);
  if (given > 0) return given;
  const double ratio = r.get<double>("hidden_ratio", 4.0);
  const auto inner = static_cast<int64_t>(static_cast<double>(d) * ratio * 2.0 / 3.0);
  return 256 * ((inner + 255) / 256);
}

// Refuses what this importer cannot read as the layout's semantics.
void check_supported(const Reader& r) {
  const std::string type = r.get<std::string>("model_type", "");
  if (type != "gated_deltanet") {
    r.bad("model_type", fmt::format("'{}': this importer reads flash-linear-attention's "
                                    "gated_deltanet layout only",
                                    type));
  }
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

}  // namespace

std::vector<std::pair<std::string, YAML::Node>> hf_fla_model_keys(const std::string& dir) {
  const std::string file = (fs::path(dir) / "config.json").string();
  json doc;
  try {
    doc = json::parse(read_file(file));
  } catch (const json::exception& e) {
    throw ConfigError(fmt::format("{}: not valid JSON ({})", file, e.what()));
  }
  if (!doc.is_object()) throw ConfigError(file + ": not a JSON object");
  const Reader r{doc, file};
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

void expand_model_from(Config& cfg, const std::string& base_dir) {
  const YAML::Node from = cfg.lookup("model.from");
  if (!from.IsDefined() || from.IsNull()) return;
  const Location at = cfg.location("model.from");
  if (!from.IsScalar()) throw ConfigError(at.str() + ": model.from: expected a folder path");
  fs::path dir = from.as<std::string>();
  const fs::path base = !base_dir.empty()     ? fs::path(base_dir)
                        : !cfg.file().empty() ? fs::path(cfg.file()).parent_path()
                                              : fs::path();
  if (dir.is_relative() && !base.empty() && fs::exists(base / dir)) dir = base / dir;
  std::error_code ec;
  if (!fs::is_directory(dir, ec) || !fs::exists(dir / "config.json", ec)) {
    throw ConfigError(
        fmt::format("{}: model.from: '{}' is not a folder holding config.json "
                    "(a Hugging Face checkpoint)",
                    at.str(), from.as<std::string>()));
  }
  dir = fs::absolute(dir).lexically_normal();
  cfg.set("model.from", YAML::Node(dir.string()), at);
  std::vector<std::pair<std::string, YAML::Node>> keys;
  try {
    keys = hf_fla_model_keys(dir.string());
  } catch (const ConfigError& e) {
    throw ConfigError(fmt::format("{} (model.from at {})", e.what(), at.str()));
  }
  const Location origin{(dir / "config.json").string(), 0, 0};
  // The file's keys fill what the experiment leaves unset; a key it sets wins (an ablation of an
  // imported model), and so does a position map it sets (model.attention.position).
  for (const auto& [key, value] : keys) {
    if (!cfg.lookup("model." + key).IsDefined()) cfg.set("model." + key, value, origin);
  }
}

void load_hf_fla_weights(LanguageModel& model, const std::string& dir) {
  auto* hybrid = dynamic_cast<HybridModel*>(&model);
  if (!hybrid) throw UserError("model.from: the model is not a hybridlab layer graph");
  const SafetensorsCheckpoint ck(dir);
  std::vector<std::string> names;
  std::vector<torch::Tensor> params;
  for (const auto& item : hybrid->named_parameters(/*recurse=*/true)) {
    names.push_back(item.key());
    params.push_back(item.value());
  }
  const std::vector<HfFlaTensor> tensors = hf_fla_tensors(names, hf_fla_layers(hybrid->options()));
  std::set<std::string> used;
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const HfFlaTensor& t = tensors[i];
    if (!ck.contains(t.name)) {
      throw DataError(fmt::format("{}: no tensor '{}', which the model's parameter '{}' needs", dir,
                                  t.name, t.parameter));
    }
    const SafetensorsEntry& e = ck.entry(t.name);
    if (e.shape != params[i].sizes().vec()) {
      throw DataError(fmt::format("{}: tensor '{}' is {} where the config makes it {}",
                                  ck.file_of(t.name), t.name, json(e.shape).dump(),
                                  json(params[i].sizes().vec()).dump()));
    }
    torch::Tensor w = ck.load(t.name);
    if (!w.is_floating_point()) {
      throw DataError(fmt::format("{}: tensor '{}' is {}, not a floating-point dtype",
                                  ck.file_of(t.name), t.name, e.dtype));
    }
    if (t.permute_rope) w = half_to_interleaved(w, t.head_dim);
    params[i].copy_(w.to(params[i].scalar_type()));
    used.insert(t.name);
  }
  for (const std::string& name : ck.names()) {
    // A tied model's lm_head.weight is the embedding again (transformers ties it on load).
    if (used.count(name) || (name == "lm_head.weight" && hybrid->options().tie_embeddings)) {
      continue;
    }
    throw DataError(
        fmt::format("{}: tensor '{}' has no place in the model its config.json "
                    "describes (a layout this importer does not read?)",
                    ck.file_of(name), name));
  }
}

}  // namespace hybridlab
