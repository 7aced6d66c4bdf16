#include "model/hf_fla_names.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include <optional>

#include "hybridlab/error.h"
#include "model/builtin_mixers.h"

namespace hybridlab {

namespace {

// The fla name of a parameter of layer `i` (its name below "layers_i."), or nullopt.
std::optional<std::string> block_tensor_name(const std::string& rest, size_t i,
                                             const HfFlaLayer& p) {
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

torch::Tensor rows_permuted(const torch::Tensor& w, int64_t head_dim, const torch::Tensor& perm) {
  return w.reshape({-1, head_dim, w.size(1)}).index_select(1, perm).reshape({-1, w.size(1)});
}

}  // namespace

std::vector<HfFlaLayer> hf_fla_layers(const ModelOptions& opts) {
  std::vector<HfFlaLayer> out;
  for (size_t i = 0; i < opts.layers.size(); ++i) {
    const LayerSpec& l = opts.layers[i];
    HfFlaLayer p;
    if (l.type->name == "attention") {
      const AttentionMixerOptions m = attention_options(l, opts);
      p.attention = true;
      p.head_dim = resolved_head_dim(m.layer, opts.d_model);
      const YAML::Node layout =
          m.position.params ? m.position.params->node()["layout"] : YAML::Node();
      p.interleaved = m.position.scheme == "rope" && layout.IsDefined() &&
                      layout.as<std::string>() == "interleaved";
    } else if (l.type->name != "gated_deltanet") {
      throw UserError(fmt::format(
          "layer {} is a '{}' mixer; fla's gated_deltanet layout holds Gated DeltaNet and "
          "attention layers only",
          i, l.type->name));
    }
    out.push_back(p);
  }
  return out;
}

std::vector<HfFlaTensor> hf_fla_tensors(const std::vector<std::string>& named,
                                        const std::vector<HfFlaLayer>& layers) {
  std::vector<HfFlaTensor> out;
  for (const std::string& name : named) {
    HfFlaTensor t;
    t.parameter = name;
    std::optional<std::string> mapped;
    if (name == "embedding.weight") mapped = "model.embeddings.weight";
    if (name == "head_weight") mapped = "lm_head.weight";
    if (name == "final_norm.weight") mapped = "model.norm.weight";
    size_t i = 0;
    std::string rest;
    if (split_block_name(name, i, rest) && i < layers.size()) {
      mapped = block_tensor_name(rest, i, layers[i]);
      t.permute_rope =
          layers[i].interleaved && (rest == "mixer.q_proj.weight" || rest == "mixer.k_proj.weight");
      t.head_dim = layers[i].head_dim;
    }
    if (!mapped) {
      throw UserError(
          fmt::format("parameter '{}' has no place in fla's gated_deltanet layout", name));
    }
    t.name = *mapped;
    out.push_back(t);
  }
  return out;
}

torch::Tensor interleaved_to_half(const torch::Tensor& w, int64_t head_dim) {
  return rows_permuted(w, head_dim,
                       torch::cat({torch::arange(0, head_dim, 2), torch::arange(1, head_dim, 2)}));
}

torch::Tensor half_to_interleaved(const torch::Tensor& w, int64_t head_dim) {
  // Row 2i of the interleaved head is row i of the half layout, row 2i+1 is row D/2 + i.
  const int64_t half = head_dim / 2;
  const torch::Tensor i = torch::arange(half);
  return rows_permuted(w, head_dim, torch::stack({i, i + half}, 1).reshape({-1}));
}

}  // namespace hybridlab
