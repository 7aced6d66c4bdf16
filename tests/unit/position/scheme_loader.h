#pragma once
// Loading positional schemes in tests the way a user does: by name, from the build tree's plugin
// folder, with the scheme's keys written as YAML.

#include <memory>
#include <string>

#include "hybridlab/config.h"
#include "hybridlab/plugin_host.h"
#include "hybridlab/position.h"
#include "support/tensor_match.h"

namespace hybridlab::test {

/// The context the tests use unless they say otherwise.
inline PositionContext test_context(int64_t n_heads = 4, int64_t head_dim = 16,
                                    bool causal = true) {
  PositionContext ctx;
  ctx.n_heads = n_heads;
  ctx.n_kv_heads = n_heads;
  ctx.head_dim = head_dim;
  ctx.d_model = n_heads * head_dim;
  ctx.causal = causal;
  ctx.train_length = 128;
  ctx.max_length = 128;
  ctx.layer_index = 0;
  return ctx;
}

/// One host for the test binary (plugins stay loaded for the process anyway).
inline PluginHost& test_host() {
  static PluginHost host(test_plugin_dirs());
  return host;
}

/// Builds scheme `name` with `params` (a YAML flow map such as "{rope_theta: 500000}", the keys
/// beside `scheme:`) as if it came from the file "test.yaml" under `position:`.
inline std::shared_ptr<PositionScheme> make_scheme(const std::string& name,
                                                   const std::string& params,
                                                   const PositionContext& ctx) {
  Config cfg = Config::parse("position: " + (params.empty() ? std::string("{}") : params) + "\n",
                             "test.yaml");
  Section s = cfg.section("position");
  return test_host().create(name, s, ctx);
}

/// The message of the ConfigError that building the scheme throws ("" if none is thrown).
inline std::string config_error(const std::string& name, const std::string& params,
                                const PositionContext& ctx) {
  try {
    make_scheme(name, params, ctx);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

/// The inspect() table called `table` (REQUIREs that it exists).
inline torch::Tensor inspect_table(PositionScheme& scheme, int64_t length,
                                   const std::string& table) {
  for (const auto& t : scheme.inspect(length)) {
    if (t.name == table) return t.values;
  }
  FAIL("scheme " << scheme.name() << " has no inspect table '" << table << "'");
  return {};
}

inline torch::Tensor positions(std::initializer_list<int64_t> p) {
  return torch::tensor(std::vector<int64_t>(p), torch::kLong);
}

/// Unscaled attention logits q·kᵀ: q [..., Tq, D], k [..., Tk, D] → [..., Tq, Tk].
inline torch::Tensor scores(const torch::Tensor& q, const torch::Tensor& k) {
  return torch::matmul(q, k.transpose(-2, -1));
}

/// Whether `text` contains `part` (for error messages).
inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace hybridlab::test
