// The `qwen3_next`, `qwen3_5` and `qwen3_5_text` import layouts: the dense (no mixture of
// experts) text models of Qwen3-Next and Qwen3.5 as hybridlab models (huggingface/transformers
// models/qwen3_next/modular_qwen3_next.py and models/qwen3_5/modular_qwen3_5.py):
// - Gated DeltaNet layers (`linear_attn.`) with separate key and value head counts; Qwen3-Next
//   fuses q, k, v, z into `in_proj_qkvz` and b, a into `in_proj_ba`, grouped per key head
//   (`fix_query_key_value_ordering`); Qwen3.5 stores `in_proj_qkv` (q | k | v), `in_proj_z`,
//   `in_proj_b`, `in_proj_a`. Both convolve [q | k | v] with one `conv1d`, and normalise each value
//   head with a plain-weight RMSNorm gated by SiLU(z): hybridlab's Gated DeltaNet as it is.
// - Gated attention (`self_attn.`): q_proj holds [q_h, gate_h] per head (hybridlab's
//   output_gate layout), q/k RMSNorm before RoPE, rotate-half RoPE on the first
//   partial_rotary_factor of each head. Qwen3.5's M-RoPE gives text tokens the same position in
//   its three sections, which is plain RoPE.
// - Every other RMSNorm is zero-centred, y = x̂·(1 + w): the weight imported is 1 + w.

#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "hybridlab/error.h"
#include "model/builtin_mixers.h"
#include "model/hf_layout.h"

namespace hybridlab {
using nlohmann::json;

namespace {

// Defaults of the transformers configs (Qwen3NextConfig; Qwen3_5TextConfig changes five).
struct QwenDefaults {
  int64_t vocab = 151936, hidden = 2048, intermediate = 5632, layers = 48, kv_heads = 2;
};

// The text config of a layout: the file itself, or its `text_config` for the composite qwen3_5.
HfConfig text_config(const HfConfig& c) {
  if (c.get<std::string>("model_type", "") != "qwen3_5") return c;
  if (!c.doc.contains("text_config") || !c.doc["text_config"].is_object()) {
    c.bad("text_config", "the composite qwen3_5 config has no text_config object");
  }
  return HfConfig{c.doc["text_config"], c.file + " (text_config)"};
}

QwenDefaults defaults_of(const HfConfig& c) {
  QwenDefaults d;
  const std::string type = c.get<std::string>("model_type", "");
  if (type == "qwen3_5" || type == "qwen3_5_text") {
    d.vocab = 248320;
    d.hidden = 4096;
    d.intermediate = 12288;
    d.layers = 32;
    d.kv_heads = 4;
  }
  return d;
}

// "linear_attention" or "full_attention" per layer: `layer_types`, else every
// full_attention_interval-th layer is attention (Qwen3NextConfig.__post_init__).
std::vector<bool> attention_layers(const HfConfig& t, int64_t n) {
  std::vector<bool> out(static_cast<size_t>(n), false);
  if (t.doc.contains("layer_types") && !t.doc["layer_types"].is_null()) {
    const json& types = t.doc["layer_types"];
    if (!types.is_array() || static_cast<int64_t>(types.size()) != n) {
      t.bad("layer_types", fmt::format("expected a list of {} layer types", n));
    }
    for (size_t i = 0; i < types.size(); ++i) {
      std::string kind = types[i].is_string() ? types[i].get<std::string>() : "";
      // Older configs' names (Qwen3NextConfig remaps them): mamba, attention.
      if (kind == "mamba") kind = "linear_attention";
      if (kind == "attention") kind = "full_attention";
      if (kind != "linear_attention" && kind != "full_attention") {
        t.bad("layer_types", fmt::format("entry {} is {}: expected linear_attention or "
                                         "full_attention",
                                         i, types[i].dump()));
      }
      out[i] = kind == "full_attention";
    }
    return out;
  }
  const int64_t interval = t.get<int64_t>("full_attention_interval", 4);
  if (interval < 1) t.bad("full_attention_interval", "must be >= 1");
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = (i + 1) % interval == 0;
  return out;
}

// Refuses the mixture-of-experts layers Qwen3-Next builds when num_experts > 0
// (Qwen3NextDecoderLayer: not in mlp_only_layers and (i+1) % decoder_sparse_step == 0).
void refuse_experts(const HfConfig& t, int64_t n) {
  if (!t.doc.contains("num_experts") && t.get<std::string>("model_type", "") != "qwen3_next") {
    return;
  }
  const int64_t experts = t.get<int64_t>("num_experts", 512);
  if (experts <= 0) return;
  const int64_t step = t.get<int64_t>("decoder_sparse_step", 1);
  const std::vector<int64_t> dense = t.get<std::vector<int64_t>>("mlp_only_layers", {});
  for (int64_t i = 0; i < n; ++i) {
    if (std::find(dense.begin(), dense.end(), i) == dense.end() && step > 0 &&
        (i + 1) % step == 0) {
      t.bad("num_experts", fmt::format("{}: layer {} would be a mixture of experts; this importer "
                                       "reads dense models only",
                                       experts, i));
    }
  }
}

// rope_theta and partial_rotary_factor, from rope_parameters (transformers v5) or the top level.
std::pair<double, double> rope_of(const HfConfig& t) {
  const json rp = t.doc.contains("rope_parameters") && t.doc["rope_parameters"].is_object()
                      ? t.doc["rope_parameters"]
                      : json::object();
  const HfConfig r{rp, t.file + " (rope_parameters)"};
  const std::string type = r.get<std::string>("rope_type", r.get<std::string>("type", "default"));
  if (type != "default") r.bad("rope_type", fmt::format("'{}': only default RoPE is read", type));
  t.refuse_set({"rope_scaling"}, "RoPE scaling is not read");
  const double theta = r.get<double>("rope_theta", t.get<double>("rope_theta", 10000.0));
  const double partial =
      r.get<double>("partial_rotary_factor", t.get<double>("partial_rotary_factor", 0.25));
  return {theta, partial};
}

HfModelKeys qwen_model_keys(const HfConfig& c) {
  const HfConfig t = text_config(c);
  const QwenDefaults d = defaults_of(c);
  const int64_t n = t.get<int64_t>("num_hidden_layers", d.layers);
  if (t.get<std::string>("hidden_act", "silu") != "silu") t.bad("hidden_act", "only silu is read");
  t.refuse_set({"attention_bias", "q_lora_rank", "kv_lora_rank"},
               "this importer reads bias-free, full-rank attention");
  if (!t.get<bool>("attn_output_gate", true)) t.bad("attn_output_gate", "false is not read");
  refuse_experts(t, n);
  const std::vector<bool> attn = attention_layers(t, n);
  std::string pattern;
  for (bool a : attn) pattern += a ? 'A' : 'G';
  const double eps = t.get<double>("rms_norm_eps", 1e-6);
  const int64_t dk = t.get<int64_t>("linear_key_head_dim", 128);
  const int64_t dv = t.get<int64_t>("linear_value_head_dim", 128);
  const auto [theta, partial] = rope_of(t);
  YAML::Node position;
  position["scheme"] = "rope";
  position["rope_theta"] = theta;
  position["partial_rotary_factor"] = partial;
  const auto y = [](auto v) { return YAML::Node(v); };
  HfModelKeys keys{
      {"d_model", y(t.get<int64_t>("hidden_size", d.hidden))},
      {"vocab_size", y(t.get<int64_t>("vocab_size", d.vocab))},
      {"layers", y(pattern)},
      {"norm_eps", y(eps)},
      {"tie_embeddings",
       y(c.get<bool>("tie_word_embeddings", t.get<bool>("tie_word_embeddings", false)))},
      {"init_std", y(t.get<double>("initializer_range", 0.02))},
      {"mlp.intermediate_size", y(t.get<int64_t>("intermediate_size", d.intermediate))}};
  if (pattern.find('G') != std::string::npos) {
    keys.insert(keys.end(),
                {{"gated_deltanet.n_heads", y(t.get<int64_t>("linear_num_key_heads", 16))},
                 {"gated_deltanet.n_v_heads", y(t.get<int64_t>("linear_num_value_heads", 32))},
                 {"gated_deltanet.head_dim", y(dk)},
                 {"gated_deltanet.expand_v", y(static_cast<double>(dv) / static_cast<double>(dk))},
                 {"gated_deltanet.conv_size", y(t.get<int64_t>("linear_conv_kernel_dim", 4))},
                 {"gated_deltanet.norm_eps", y(eps)}});
  }
  if (pattern.find('A') != std::string::npos) {
    keys.insert(keys.end(),
                {{"attention.n_heads", y(t.get<int64_t>("num_attention_heads", 16))},
                 {"attention.n_kv_heads", y(t.get<int64_t>("num_key_value_heads", d.kv_heads))},
                 {"attention.head_dim", y(t.get<int64_t>("head_dim", 256))},
                 {"attention.qk_norm", y(true)},
                 {"attention.output_gate", y(true)},
                 {"attention.norm_eps", y(eps)},
                 {"attention.position", position}});
  }
  return keys;
}

// Tensor reads of one model, with the shapes of its parameters.
struct QwenLoader {
  HybridModel& model;
  HfTensorSource& tensors;
  std::string prefix;  // "model." or "model.language_model."
  torch::OrderedDict<std::string, torch::Tensor> params = model.named_parameters(true);

  std::vector<int64_t> shape(const std::string& p) const { return params[p].sizes().vec(); }
  // As stored (F32, BF16, F16): set_parameter converts once, so the largest transient is one
  // tensor in its stored dtype plus its parameter-dtype copy.
  torch::Tensor read(const std::string& name, const std::vector<int64_t>& s, const std::string& p) {
    return tensors.load(name, s, p);
  }
  // A parameter from one tensor of the same shape.
  void copy(const std::string& p, const std::string& name) { tensors.load_into(name, model, p); }
  // A zero-centred norm: the parameter is 1 + w.
  void norm(const std::string& p, const std::string& name) {
    set_parameter(model, p, read(name, shape(p), p).to(torch::kFloat64) + 1.0);
  }
};

void load_gated_deltanet(QwenLoader& l, size_t i, const std::string& at, bool fused) {
  const ModelOptions& o = l.model.options();
  const GatedDeltaNetOptions g = gated_deltanet_options(o.layers[i], o);
  const int64_t d = o.d_model, hk = g.n_heads, hv = g.n_v_heads > 0 ? g.n_v_heads : g.n_heads;
  const int64_t dk = g.head_dim, dv = std::llround(static_cast<double>(dk) * g.expand_v);
  const int64_t group = hv / hk, kd = hk * dk, vd = hv * dv;
  const std::string m = fmt::format("layers_{}.mixer.", i), la = at + "linear_attn.";
  const std::string needs = m + "q_proj.weight";
  if (fused) {
    // Per key head: [q dk, k dk, v group·dv, z group·dv] rows, then [b group, a group].
    const torch::Tensor w = l.read(la + "in_proj_qkvz.weight", {2 * kd + 2 * vd, d}, needs)
                                .view({hk, 2 * dk + 2 * group * dv, d});
    const auto parts = w.split_with_sizes({dk, dk, group * dv, group * dv}, 1);
    set_parameter(l.model, m + "q_proj.weight", parts[0].reshape({kd, d}));
    set_parameter(l.model, m + "k_proj.weight", parts[1].reshape({kd, d}));
    set_parameter(l.model, m + "v_proj.weight", parts[2].reshape({vd, d}));
    set_parameter(l.model, m + "g_proj.weight", parts[3].reshape({vd, d}));
    const torch::Tensor ba =
        l.read(la + "in_proj_ba.weight", {2 * hv, d}, m + "b_proj.weight").view({hk, 2 * group, d});
    set_parameter(l.model, m + "b_proj.weight", ba.narrow(1, 0, group).reshape({hv, d}));
    set_parameter(l.model, m + "a_proj.weight", ba.narrow(1, group, group).reshape({hv, d}));
  } else {
    const torch::Tensor w = l.read(la + "in_proj_qkv.weight", {2 * kd + vd, d}, needs);
    set_parameter(l.model, m + "q_proj.weight", w.narrow(0, 0, kd));
    set_parameter(l.model, m + "k_proj.weight", w.narrow(0, kd, kd));
    set_parameter(l.model, m + "v_proj.weight", w.narrow(0, 2 * kd, vd));
    l.copy(m + "g_proj.weight", la + "in_proj_z.weight");
    l.copy(m + "b_proj.weight", la + "in_proj_b.weight");
    l.copy(m + "a_proj.weight", la + "in_proj_a.weight");
  }
  const torch::Tensor conv =
      l.read(la + "conv1d.weight", {2 * kd + vd, 1, g.conv_size}, m + "q_conv");
  set_parameter(l.model, m + "q_conv", conv.narrow(0, 0, kd));
  set_parameter(l.model, m + "k_conv", conv.narrow(0, kd, kd));
  set_parameter(l.model, m + "v_conv", conv.narrow(0, 2 * kd, vd));
  l.copy(m + "A_log", la + "A_log");
  l.copy(m + "dt_bias", la + "dt_bias");
  l.copy(m + "o_norm.weight", la + "norm.weight");  // plain weight (Qwen3NextRMSNormGated)
  l.copy(m + "o_proj.weight", la + "out_proj.weight");
}

void load_attention(QwenLoader& l, size_t i, const std::string& at) {
  const std::string m = fmt::format("layers_{}.mixer.", i), sa = at + "self_attn.";
  for (const char* p : {"q_proj", "k_proj", "v_proj", "o_proj"}) {
    l.copy(m + p + ".weight", sa + p + ".weight");
  }
  l.norm(m + "q_norm.weight", sa + "q_norm.weight");
  l.norm(m + "k_norm.weight", sa + "k_norm.weight");
}

void load_qwen(HybridModel& model, HfTensorSource& tensors, const HfConfig& c, bool fused) {
  const bool composite = c.get<std::string>("model_type", "") == "qwen3_5";
  QwenLoader l{model, tensors, composite ? "model.language_model." : "model."};
  const ModelOptions& o = model.options();
  l.copy("embedding.weight", l.prefix + "embed_tokens.weight");
  if (!o.tie_embeddings) l.copy("head_weight", "lm_head.weight");
  l.norm("final_norm.weight", l.prefix + "norm.weight");
  for (size_t i = 0; i < o.layers.size(); ++i) {
    const std::string at = fmt::format("{}layers.{}.", l.prefix, i),
                      b = fmt::format("layers_{}.", i);
    l.norm(b + "mixer_norm.weight", at + "input_layernorm.weight");
    l.norm(b + "mlp_norm.weight", at + "post_attention_layernorm.weight");
    for (const char* p : {"gate_proj", "up_proj", "down_proj"}) {
      l.copy(b + "mlp." + p + ".weight", at + "mlp." + p + ".weight");
    }
    if (o.layers[i].type->name == "attention") {
      load_attention(l, i, at);
    } else {
      load_gated_deltanet(l, i, at, fused);
    }
  }
  // transformers ignores the multi-token-prediction head on load (_keys_to_ignore_on_load_
  // unexpected); the vision tower of the composite Qwen3.5 is not part of the text model.
  tensors.finish(
      o.tie_embeddings ? std::set<std::string>{"lm_head.weight"} : std::set<std::string>{},
      {"mtp.", "model.visual."});
}

}  // namespace

HfLayout qwen3_next_layout() {
  HfLayout l;
  l.description = "Qwen3-Next dense text model (fused in_proj_qkvz / in_proj_ba)";
  l.model_keys = qwen_model_keys;
  l.load = [](HybridModel& m, HfTensorSource& t, const HfConfig& c) { load_qwen(m, t, c, true); };
  return l;
}

HfLayout qwen3_5_layout() {
  HfLayout l;
  l.description = "Qwen3.5 text model (in_proj_qkv, in_proj_z, in_proj_b, in_proj_a)";
  l.model_keys = qwen_model_keys;
  l.load = [](HybridModel& m, HfTensorSource& t, const HfConfig& c) { load_qwen(m, t, c, false); };
  return l;
}

}  // namespace hybridlab
