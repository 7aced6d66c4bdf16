// export_hf_fla: a HybridModel in flash-linear-attention's `gated_deltanet` Hugging Face layout
// (fla-org/flash-linear-attention@bc3b101d: models/gated_deltanet/configuration_gated_deltanet.py
// for the config keys, modeling_gated_deltanet.py for the block and names, models/hybrid.py for
// the `attn` spec, layers/attn.py for the attention it builds: bias-free projections, head_dim =
// hidden_size / num_heads, RoPE in the rotate-half layout over the whole head, a window of
// window_size keys, no qk-norm, no output gate).
//
// The plan is read from the model's options, the tensors from its named parameters; every
// parameter must find its name, so nothing is dropped silently.

#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>

#include "hybridlab/error.h"
#include "hybridlab/interop.h"
#include "model/hybrid_model.h"
#include "model/layer_options.h"

namespace hybridlab {
using nlohmann::json;

namespace {

[[noreturn]] void cannot(const std::string& what) {
  throw UserError(fmt::format(
      "export --format hf-fla: {}; fla's gated_deltanet layout has no field for it, so the model "
      "cannot be exported without changing what it computes (nothing was written)",
      what));
}

// The fla keys of a Gated DeltaNet layer's settings (one set for the whole model).
json gated_deltanet_fields(const GatedDeltaNetOptions& o, int64_t d_model) {
  const int64_t head_dim = o.head_dim > 0 ? o.head_dim : d_model / o.n_heads;
  return json{{"head_dim", head_dim},
              {"num_heads", o.n_heads},
              {"num_v_heads", o.n_v_heads > 0 ? json(o.n_v_heads) : json(nullptr)},
              {"expand_v", o.expand_v},
              {"use_gate", true},
              {"use_short_conv", o.use_short_conv},
              {"conv_size", o.conv_size},
              {"allow_neg_eigval", o.allow_neg_eigval}};
}

// The RoPE settings of an attention layer's scheme, or the refusal naming what is not RoPE as fla
// applies it. Returns {rope_theta, interleaved}.
std::pair<double, bool> rope_settings(const PositionSpec& spec, const std::string& layer) {
  if (spec.scheme != "rope") {
    cannot(
        fmt::format("{} uses position scheme '{}' (fla's attention always applies RoPE, with "
                    "rope_theta as its only setting)",
                    layer, spec.scheme));
  }
  double theta = 10000.0;
  bool interleaved = false;
  if (!spec.params) return {theta, interleaved};
  for (const auto& kv : spec.params->node()) {
    const std::string key = kv.first.as<std::string>();
    const YAML::Node& v = kv.second;
    if (key == "scheme") continue;
    if (key == "rope_theta") {
      theta = v.as<double>();
    } else if (key == "layout") {
      interleaved = v.as<std::string>() == "interleaved";
    } else if (key == "partial_rotary_factor" && v.as<double>() == 1.0) {
      continue;
    } else if (key == "rotate_num_heads" && v.as<int64_t>() == 0) {
      continue;
    } else {
      cannot(fmt::format("{}: {}.{} is set ({})", layer, spec.path, key, YAML::Dump(v)));
    }
  }
  return {theta, interleaved};
}

// An attention layer's `attn` spec entry (without `layers`); `interleaved` is set from its scheme.
json attention_spec(const AttentionMixerOptions& m, int64_t d_model, const std::string& layer,
                    bool& interleaved) {
  const AttentionOptions& o = m.layer;
  if (!o.causal) cannot(layer + " is bidirectional (model.attention.causal false)");
  if (o.qk_norm) cannot(layer + " has model.attention.qk_norm");
  if (o.output_gate) cannot(layer + " has model.attention.output_gate");
  if (o.use_short_conv) cannot(layer + " has model.attention.use_short_conv");
  if (resolved_head_dim(o, d_model) * o.n_heads != d_model) {
    cannot(
        fmt::format("{}: head_dim {} × n_heads {} is not d_model {} (fla's head_dim is "
                    "hidden_size / num_heads)",
                    layer, resolved_head_dim(o, d_model), o.n_heads, d_model));
  }
  const auto [theta, inter] = rope_settings(m.position, layer);
  interleaved = inter;
  return json{{"num_heads", o.n_heads},
              {"num_kv_heads", resolved_kv_heads(o)},
              {"qkv_bias", false},
              {"window_size", o.window > 0 ? json(o.window) : json(nullptr)},
              {"rope_theta", theta}};
}

// Rows of a [heads·D, d] projection reordered per head from interleaved pairs (2i, 2i+1) to
// rotate-half pairs (i, i + D/2): channel i of the new head is old 2i, channel D/2+i old 2i+1.
torch::Tensor interleaved_to_half(const torch::Tensor& w, int64_t head_dim) {
  const torch::Tensor perm =
      torch::cat({torch::arange(0, head_dim, 2), torch::arange(1, head_dim, 2)});
  return w.view({-1, head_dim, w.size(1)}).index_select(1, perm).reshape({-1, w.size(1)});
}

// What the plan knows of one layer for naming its tensors.
struct LayerPlan {
  bool attention = false;
  bool interleaved = false;  // attention only: q/k rows to permute
  int64_t head_dim = 0;      // attention only
};

// The fla name of a parameter of layer `i` (its name below "layers_i."), or nullopt.
std::optional<std::string> block_tensor_name(const std::string& rest, size_t i,
                                             const LayerPlan& p) {
  const std::string at = fmt::format("model.layers.{}.", i);
  if (rest == "mixer_norm.weight") return at + "attn_norm.weight";
  if (rest == "mlp_norm.weight") return at + "mlp_norm.weight";
  for (const char* m : {"gate_proj", "up_proj", "down_proj"}) {
    if (rest == fmt::format("mlp.{}.weight", m)) return at + rest;
  }
  if (rest.rfind("mixer.", 0) != 0) return std::nullopt;
  const std::string r = rest.substr(6);
  for (const char* proj : {"q_proj", "k_proj", "v_proj", "o_proj"}) {
    if (r == fmt::format("{}.weight", proj)) return at + "attn." + r;
  }
  if (p.attention) return std::nullopt;
  for (const char* name :
       {"a_proj.weight", "b_proj.weight", "g_proj.weight", "A_log", "dt_bias", "o_norm.weight"}) {
    if (r == name) return at + "attn." + r;
  }
  for (const char* c : {"q", "k", "v"}) {
    if (r == fmt::format("{}_conv", c)) return at + "attn." + c + "_conv1d.weight";
  }
  return std::nullopt;
}

// "layers_<i>.<rest>" (HybridModel's module names) into i and rest.
bool split_block_name(const std::string& name, size_t& i, std::string& rest) {
  const std::string prefix = "layers_";
  if (name.rfind(prefix, 0) != 0) return false;
  const size_t dot = name.find('.', prefix.size());
  const std::string digits = name.substr(prefix.size(), dot - prefix.size());
  if (dot == std::string::npos || digits.empty() ||
      digits.find_first_not_of("0123456789") != std::string::npos) {
    return false;
  }
  i = std::stoul(digits);
  rest = name.substr(dot + 1);
  return true;
}

// Plans every layer and fills the config's mixer fields; refuses what fla cannot express.
std::vector<LayerPlan> plan_layers(const ModelOptions& opts, json& config) {
  std::vector<LayerPlan> plans;
  std::optional<json> gdn;  // the one Gated DeltaNet setting
  std::vector<json> specs;  // distinct attn specs, each with its layers, by first layer
  for (size_t i = 0; i < opts.layers.size(); ++i) {
    const LayerSpec& l = opts.layers[i];
    const std::string layer = fmt::format("layer {} ({})", i, l.type->name);
    LayerPlan p;
    if (l.type->name == "attention") {
      const auto& m = std::any_cast<const AttentionMixerOptions&>(l.options);
      json spec = attention_spec(m, opts.d_model, layer, p.interleaved);
      p.attention = true;
      p.head_dim = resolved_head_dim(m.layer, opts.d_model);
      auto same = std::find_if(specs.begin(), specs.end(), [&](const json& s) {
        json other = s;
        other.erase("layers");
        return other == spec;
      });
      if (same == specs.end()) same = specs.insert(specs.end(), spec);
      (*same)["layers"].push_back(i);
    } else if (l.type->name == "gated_deltanet") {
      const auto& o = std::any_cast<const GatedDeltaNetOptions&>(l.options);
      if (o.norm_eps != opts.norm_eps) {
        cannot(
            fmt::format("{}: model.gated_deltanet.norm_eps {} differs from model.norm_eps {} "
                        "(fla's config has one norm_eps for both)",
                        layer, o.norm_eps, opts.norm_eps));
      }
      const json fields = gated_deltanet_fields(o, opts.d_model);
      if (gdn && *gdn != fields) {
        cannot(
            fmt::format("{} has Gated DeltaNet settings {} where an earlier layer has {} (fla "
                        "has one set for every recurrent layer)",
                        layer, fields.dump(), gdn->dump()));
      }
      gdn = fields;
    } else {
      cannot(fmt::format("{} is a '{}' mixer", layer, l.type->name));
    }
    plans.push_back(p);
  }
  if (gdn) config.update(*gdn);
  if (!specs.empty()) {
    config["attn"] = specs.size() == 1 ? specs[0] : json(specs);
  }
  return plans;
}

json base_config(const ModelOptions& opts, int64_t max_position_embeddings) {
  return json{{"model_type", "gated_deltanet"},
              {"architectures", {"GatedDeltaNetForCausalLM"}},
              {"attn_mode", "chunk"},
              {"hidden_size", opts.d_model},
              {"num_hidden_layers", opts.layers.size()},
              {"vocab_size", opts.vocab_size},
              {"hidden_act", "swish"},
              {"hidden_ratio", nullptr},
              {"intermediate_size", mlp_hidden_size(opts.mlp, opts.d_model)},
              {"norm_eps", opts.norm_eps},
              {"max_position_embeddings", max_position_embeddings},
              {"tie_word_embeddings", opts.tie_embeddings},
              {"initializer_range", opts.init_std},
              {"bos_token_id", nullptr},
              {"eos_token_id", nullptr},
              {"pad_token_id", nullptr},
              {"attn", nullptr}};
}

}  // namespace

HfCheckpoint export_hf_fla(const LanguageModel& model, int64_t max_position_embeddings) {
  const auto* hybrid = dynamic_cast<const HybridModel*>(&model);
  if (!hybrid) cannot("the model is not a hybridlab layer graph");
  const ModelOptions& opts = hybrid->options();
  if (opts.head != ModelHead::kCausalLM) cannot("model.head is autoencoder");
  if (opts.position) {
    cannot(
        fmt::format("model.position is '{}' (an input-embedding scheme)", opts.position->scheme));
  }
  json config = base_config(opts, max_position_embeddings);
  const std::vector<LayerPlan> plans = plan_layers(opts, config);
  HfCheckpoint out;
  for (const auto& item : hybrid->named_parameters(/*recurse=*/true)) {
    const std::string& name = item.key();
    const torch::Tensor t = item.value().detach();
    std::optional<std::string> mapped;
    if (name == "embedding.weight") mapped = "model.embeddings.weight";
    if (name == "head_weight") mapped = "lm_head.weight";
    if (name == "final_norm.weight") mapped = "model.norm.weight";
    size_t i = 0;
    std::string rest;
    if (split_block_name(name, i, rest) && i < plans.size()) {
      mapped = block_tensor_name(rest, i, plans[i]);
      if (mapped && plans[i].interleaved &&
          (rest == "mixer.q_proj.weight" || rest == "mixer.k_proj.weight")) {
        out.tensors.emplace_back(*mapped, interleaved_to_half(t, plans[i].head_dim));
        continue;
      }
    }
    if (!mapped) cannot(fmt::format("parameter '{}' has no place in it", name));
    out.tensors.emplace_back(*mapped, t);
  }
  out.config_json = config.dump(2) + "\n";
  return out;
}

}  // namespace hybridlab
