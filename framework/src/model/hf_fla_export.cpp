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
#include "model/builtin_mixers.h"
#include "model/hf_fla_names.h"
#include "model/hybrid_model.h"

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

// rope_theta of an attention layer's scheme, or the refusal naming what is not RoPE as fla
// applies it. The interleaved layout is allowed: the export permutes q/k rows (hf_fla_names.h).
double rope_settings(const PositionSpec& spec, const std::string& layer) {
  if (spec.scheme != "rope") {
    cannot(
        fmt::format("{} uses position scheme '{}' (fla's attention always applies RoPE, with "
                    "rope_theta as its only setting)",
                    layer, spec.scheme));
  }
  double theta = 10000.0;
  if (!spec.params) return theta;
  for (const auto& kv : spec.params->node()) {
    const std::string key = kv.first.as<std::string>();
    const YAML::Node& v = kv.second;
    if (key == "scheme") continue;
    if (key == "rope_theta") {
      theta = v.as<double>();
    } else if (key == "layout") {
      continue;
    } else if (key == "partial_rotary_factor" && v.as<double>() == 1.0) {
      continue;
    } else if (key == "rotate_num_heads" && v.as<int64_t>() == 0) {
      continue;
    } else if (key == "rope_scaling" && v.IsMap() && v.size() == 1 &&
               (v["type"] ? v["type"] : v["rope_type"]).as<std::string>("") == "default") {
      continue;  // what a resolved config writes for no scaling
    } else {
      cannot(fmt::format("{}: {}.{} is set ({})", layer, spec.path, key, YAML::Dump(v)));
    }
  }
  return theta;
}

// An attention layer's `attn` spec entry (without `layers`).
json attention_spec(const AttentionMixerOptions& m, int64_t d_model, const std::string& layer) {
  const AttentionOptions& o = m.layer;
  if (!o.causal) cannot(layer + " is bidirectional (model.attention.causal false)");
  if (o.qk_norm) cannot(layer + " has model.attention.qk_norm");
  if (o.output_gate) cannot(layer + " has model.attention.output_gate");
  if (o.use_short_conv) cannot(layer + " has model.attention.use_short_conv");
  if (o.normalization != AttentionNormalization::kSoftmax) {
    cannot(layer + " has model.attention.normalization: " + normalization_name(o.normalization));
  }
  // fla's PaTH is a model of its own (PaTHAttentionConfig), not an `attn` layer of a hybrid.
  if (o.path) cannot(layer + " has model.attention.path (PaTH)");
  if (resolved_head_dim(o, d_model) * o.n_heads != d_model) {
    cannot(
        fmt::format("{}: head_dim {} × n_heads {} is not d_model {} (fla's head_dim is "
                    "hidden_size / num_heads)",
                    layer, resolved_head_dim(o, d_model), o.n_heads, d_model));
  }
  const double theta = rope_settings(m.position, layer);
  return json{{"num_heads", o.n_heads},
              {"num_kv_heads", resolved_kv_heads(o)},
              {"qkv_bias", false},
              {"window_size", o.window > 0 ? json(o.window) : json(nullptr)},
              {"rope_theta", theta}};
}

// Fills the config's mixer fields from every layer; refuses what fla cannot express.
void fill_mixer_fields(const ModelOptions& opts, json& config) {
  std::optional<json> gdn;  // the one Gated DeltaNet setting
  std::vector<json> specs;  // distinct attn specs, each with its layers, by first layer
  for (size_t i = 0; i < opts.layers.size(); ++i) {
    const LayerSpec& l = opts.layers[i];
    const std::string layer = fmt::format("layer {} ({})", i, l.type->name);
    if (l.type->name == "attention") {
      const AttentionMixerOptions m = attention_options(l, opts);
      const json spec = attention_spec(m, opts.d_model, layer);
      auto same = std::find_if(specs.begin(), specs.end(), [&](const json& s) {
        json other = s;
        other.erase("layers");
        return other == spec;
      });
      if (same == specs.end()) same = specs.insert(specs.end(), spec);
      (*same)["layers"].push_back(i);
    } else if (l.type->name == "gated_deltanet") {
      const GatedDeltaNetOptions o = gated_deltanet_options(l, opts);
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
  }
  if (gdn) config.update(*gdn);
  if (!specs.empty()) {
    config["attn"] = specs.size() == 1 ? specs[0] : json(specs);
  }
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
  fill_mixer_fields(opts, config);
  std::vector<std::string> names;
  std::vector<torch::Tensor> values;
  for (const auto& item : hybrid->named_parameters(/*recurse=*/true)) {
    names.push_back(item.key());
    values.push_back(item.value().detach());
  }
  std::vector<HfFlaTensor> tensors;
  try {
    tensors = hf_fla_tensors(names, hf_fla_layers(opts));
  } catch (const UserError& e) {
    cannot(e.what());
  }
  HfCheckpoint out;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const HfFlaTensor& t = tensors[i];
    out.tensors.emplace_back(
        t.name, t.permute_rope ? interleaved_to_half(values[i], t.head_dim) : values[i]);
  }
  out.config_json = config.dump(2) + "\n";
  return out;
}

}  // namespace hybridlab
