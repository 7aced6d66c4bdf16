#pragma once
// Helpers shared by the test_layers suite: finite-difference gradients, config snippets, plugins.

#include <torch/torch.h>

#include <catch2/catch.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "hybridlab/config.h"
#include "hybridlab/error.h"
#include "hybridlab/mixer.h"
#include "hybridlab/plugin_host.h"
#include "hybridlab/position.h"
#include "layers/attention.h"
#include "model/model_options.h"
#include "support/tensor_match.h"

namespace hybridlab::test {

/// A scheme with no hooks (NoPE without the plugin host).
class NoScheme : public PositionScheme {
 public:
  std::string name() const override { return "none"; }
  uint32_t hooks() const override { return kHookNone; }
};

/// Relative error RMSE(a-b)/RMS(b) (fla's get_err_ratio).
inline double err_ratio(const torch::Tensor& a, const torch::Tensor& b) {
  const torch::Tensor d = (a.to(torch::kDouble) - b.to(torch::kDouble));
  const double den = b.to(torch::kDouble).pow(2).mean().sqrt().item<double>();
  return d.pow(2).mean().sqrt().item<double>() / std::max(den, 1e-30);
}

/// Central-difference gradient of the scalar `f()` with respect to every element of `x` (double),
/// perturbing x in place (under NoGradGuard) and restoring it.
inline torch::Tensor numeric_grad(const std::function<torch::Tensor()>& f, torch::Tensor x,
                                  double eps = 1e-6) {
  torch::NoGradGuard no_grad;
  torch::Tensor flat = x.view(-1);
  torch::Tensor g = torch::zeros_like(flat);
  for (int64_t i = 0; i < flat.numel(); ++i) {
    const double orig = flat[i].item<double>();
    flat[i] = orig + eps;
    const double up = f().item<double>();
    flat[i] = orig - eps;
    const double down = f().item<double>();
    flat[i] = orig;
    g[i] = (up - down) / (2 * eps);
  }
  return g.view(x.sizes());
}

/// A plugin host over the build tree's plugin folder only.
inline std::unique_ptr<PluginHost> test_host() {
  auto host = std::make_unique<PluginHost>(test_plugin_dirs());
  host->discover();
  return host;
}

/// Every positional scheme the test plugin folder provides (at least nope), with its hooks probed
/// at default settings; mixer plugins are left out.
inline std::vector<PluginRecord> discovered_schemes(PluginHost& host) {
  std::vector<PluginRecord> out;
  for (const PluginRecord& r : host.plugins())
    if (r.kind == kPluginKindPosition) out.push_back(r);
  return out;
}

/// Every mixer plugin the test plugin folder provides (at least deltanet).
inline std::vector<PluginRecord> discovered_mixers(PluginHost& host) {
  std::vector<PluginRecord> out;
  for (const PluginRecord& r : host.plugins())
    if (r.kind == kPluginKindMixer) out.push_back(r);
  return out;
}

/// What an attention layer of H query heads and Hkv key/value heads of Dh channels tells its
/// scheme: d_model (H·Dh when 0), trained at 64 tokens, evaluated to 128, layer 0.
inline PositionContext attention_context(int64_t H, int64_t Hkv, int64_t Dh, bool causal = true,
                                         int64_t d_model = 0) {
  PositionContext ctx;
  ctx.d_model = d_model > 0 ? d_model : H * Dh;
  ctx.n_heads = H;
  ctx.n_kv_heads = Hkv;
  ctx.head_dim = Dh;
  ctx.causal = causal;
  ctx.train_length = 64;
  ctx.max_length = 128;
  ctx.layer_index = 0;
  return ctx;
}

/// The scheme `name` of the build tree's plugins with the params map `yaml` (file test.yaml);
/// throws the ConfigError a bad setting raises.
inline std::shared_ptr<PositionScheme> make_scheme(const std::string& name, const std::string& yaml,
                                                   const PositionContext& ctx) {
  Config cfg = Config::parse(yaml, "test.yaml");
  Section params = cfg.root();
  std::shared_ptr<PositionScheme> scheme = test_host()->create(name, params, ctx);
  cfg.raise_errors();
  return scheme;
}

/// `m` run on x [B,T,D] one token at a time (positions 0 … T−1) with its decoding cache: the
/// outputs concatenated, [B,T,D], to compare with one forward over the whole sequence.
inline torch::Tensor decode_token_by_token(Mixer& m, const torch::Tensor& x) {
  auto cache = m.make_cache();
  std::vector<torch::Tensor> steps;
  for (int64_t t = 0; t < x.size(1); ++t) {
    steps.push_back(m.forward(x.narrow(1, t, 1), torch::tensor({t}, torch::kLong), cache.get()));
  }
  return torch::cat(steps, 1);
}

/// Checks att.attend's gradients against central finite differences (fp64, tolerance `tol`) on
/// random q [1,H,6,Dh], k and v [1,Hkv,6,Dh] under a random weighting of the output, for q, k, v
/// and each tensor of `extra` (leaves that require grad, e.g. a scheme's parameters).
inline void check_attend_gradients(Attention& att, const std::vector<torch::Tensor*>& extra,
                                   double tol) {
  const int64_t H = att.n_heads(), Hkv = att.n_kv_heads(), Dh = att.head_dim();
  torch::Tensor q = torch::randn({1, H, 6, Dh}, torch::kDouble).requires_grad_();
  torch::Tensor k = torch::randn({1, Hkv, 6, Dh}, torch::kDouble).requires_grad_();
  torch::Tensor v = torch::randn({1, Hkv, 6, Dh}, torch::kDouble).requires_grad_();
  const torch::Tensor pos = torch::arange(6);
  const torch::Tensor w = torch::randn({1, H, 6, Dh}, torch::kDouble);
  const auto loss = [&] { return (att.attend(q, k, v, pos, pos, 512) * w).sum(); };
  loss().backward();
  std::vector<torch::Tensor*> leaves = {&q, &k, &v};
  leaves.insert(leaves.end(), extra.begin(), extra.end());
  for (torch::Tensor* x : leaves) {
    REQUIRE_TENSORS_CLOSE(x->grad(), numeric_grad(loss, x->detach()), tol);
  }
}

/// The ConfigError that reading `yaml`'s `model:` section raises ("" when it reads cleanly); the
/// file is named exp.yaml.
inline std::string model_options_error(const std::string& yaml) {
  Config cfg = Config::parse(yaml, "exp.yaml");
  try {
    read_model_options(cfg.section("model"));
    cfg.raise_errors();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace hybridlab::test
