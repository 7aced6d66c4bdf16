#pragma once
// Helpers shared by the mixer plugin tests: build a plugin mixer from a YAML snippet, copy weights
// between two instances, and check a layer's chunked form against its recurrent one with
// finite-difference gradients.

#include <torch/torch.h>

#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "hybridlab/config.h"
#include "hybridlab/mixer.h"
#include "hybridlab/plugin_host.h"
#include "layers_test_util.h"

namespace hybridlab::test {

/// A mixer context of width d_model for tests (train and max length 64).
inline MixerContext small_mixer_context(int64_t d_model = 32) {
  MixerContext ctx;
  ctx.d_model = d_model;
  ctx.train_length = 64;
  ctx.max_length = 64;
  return ctx;
}

/// The plugin mixer `name` built from the YAML mapping `yaml` (file name test.yaml); throws
/// ConfigError as the host does.
inline std::shared_ptr<Mixer> make_mixer(PluginHost& host, const std::string& name,
                                         const std::string& yaml, int64_t d_model = 32,
                                         bool fused = true) {
  Config cfg = Config::parse(yaml, "test.yaml");
  Section params = cfg.root();
  MixerContext ctx = small_mixer_context(d_model);
  ctx.fused_kernels = fused;
  return host.create_mixer(name, params, ctx);
}

/// Copies every parameter of `from` into `to` (same plugin, same shapes).
inline void copy_parameters(Mixer& from, Mixer& to) {
  torch::NoGradGuard no_grad;
  auto src = from.named_parameters();
  for (auto& p : to.named_parameters()) p.value().copy_(src[p.key()]);
}

/// The mixer `name` with `settings` in chunk mode against mode: recurrent with the same weights
/// (fp32 1e-4, fp64 1e-10, T tokens), then the chunked layer's gradients in fp64 against finite
/// differences for its input and the parameters `params`.
inline void check_chunked_layer(PluginHost& host, const std::string& name,
                                const std::string& settings, int64_t d_model, int64_t T,
                                const std::vector<std::string>& params, bool fused = true) {
  auto chunk = make_mixer(host, name, "{" + settings + "}", d_model, fused);
  auto recurrent = make_mixer(host, name, "{" + settings + ", mode: recurrent}", d_model, fused);
  copy_parameters(*chunk, *recurrent);
  const torch::Tensor pos = torch::arange(T);
  for (const auto dtype : {torch::kFloat, torch::kDouble}) {
    CAPTURE(dtype);
    chunk->to(dtype);
    recurrent->to(dtype);
    torch::NoGradGuard no_grad;
    const torch::Tensor x = torch::randn({2, T, d_model}, dtype);
    CHECK(max_abs_diff(chunk->forward(x, pos, nullptr), recurrent->forward(x, pos, nullptr)) <
          (dtype == torch::kDouble ? 1e-10 : 1e-4));
  }
  const torch::Tensor x = torch::randn({1, 9, d_model}, torch::kDouble).requires_grad_(true);
  const torch::Tensor w = torch::randn({1, 9, d_model}, torch::kDouble);
  auto loss = [&] { return (chunk->forward(x, pos.slice(0, 0, 9), nullptr) * w).sum(); };
  loss().backward();
  CHECK(err_ratio(x.grad(), numeric_grad(loss, x.detach())) < 1e-6);
  for (const std::string& param : params) {
    CAPTURE(param);
    torch::Tensor p = chunk->named_parameters()[param];
    const torch::Tensor analytic = p.grad().clone();
    CHECK(err_ratio(analytic, numeric_grad(loss, p.detach())) < 1e-6);
  }
}

}  // namespace hybridlab::test
