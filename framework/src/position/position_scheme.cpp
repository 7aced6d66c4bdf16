// Defaults of the PositionScheme interface.

#include <stdexcept>

#include "hybridlab/position.h"

namespace hybridlab {

PositionScheme::~PositionScheme() = default;

namespace {
[[noreturn]] void not_implemented(const PositionScheme& s, const char* hook) {
  throw std::logic_error("positional scheme '" + s.name() + "' does not implement the " + hook +
                         " hook (its hooks: " + hook_names(s.hooks()) + ")");
}
}  // namespace

torch::Tensor PositionScheme::embed(const torch::Tensor&, const torch::Tensor&) {
  not_implemented(*this, "embed");
}
std::pair<torch::Tensor, torch::Tensor> PositionScheme::rotate(const torch::Tensor&,
                                                               const torch::Tensor&,
                                                               const torch::Tensor&,
                                                               const torch::Tensor&) {
  not_implemented(*this, "rotate");
}
torch::Tensor PositionScheme::logit_bias(const torch::Tensor&, const torch::Tensor&) {
  not_implemented(*this, "logit_bias");
}
torch::Tensor PositionScheme::relative_logits(const torch::Tensor&, const torch::Tensor&,
                                              const torch::Tensor&) {
  not_implemented(*this, "relative");
}
torch::Tensor PositionScheme::relative_values(const torch::Tensor&, const torch::Tensor&,
                                              const torch::Tensor&) {
  not_implemented(*this, "relative");
}
std::vector<PositionTable> PositionScheme::inspect(int64_t) { return {}; }
DataBias PositionScheme::data_bias(const torch::Tensor&, const torch::Tensor&,
                                   const torch::Tensor&) {
  not_implemented(*this, "data_bias");
}
double PositionScheme::flops_per_token(int64_t, double) const { return 0.0; }
torch::Tensor PositionScheme::content_bias(const torch::Tensor&, const torch::Tensor&,
                                           const torch::Tensor&, const torch::Tensor&,
                                           const torch::Tensor&) {
  not_implemented(*this, "content_bias");
}

std::string hook_names(uint32_t hooks) {
  std::string out;
  auto add = [&](uint32_t bit, const char* name) {
    if (hooks & bit) out += (out.empty() ? "" : ",") + std::string(name);
  };
  add(kHookEmbed, "embed");
  add(kHookRotate, "rotate");
  add(kHookLogitBias, "logit_bias");
  add(kHookRelative, "relative");
  add(kHookDataBias, "data_bias");
  add(kHookFlops, "flops");
  add(kHookContentBias, "content_bias");
  return out.empty() ? "none" : out;
}

uint32_t known_hooks(int api_version) {
  constexpr uint32_t v1 = kHookEmbed | kHookRotate | kHookLogitBias | kHookRelative;
  if (api_version == 1) return v1;
  constexpr uint32_t v2 = v1 | kHookDataBias | kHookFlops;
  if (api_version == 2) return v2;
  if (api_version == 3) return v2 | kHookContentBias;
  return 0;
}

PluginInfo host_plugin_info() {
  return PluginInfo{kPluginApiVersion, "", "", "", TORCH_VERSION, HYBRIDLAB_CXX11_ABI_FLAG};
}

}  // namespace hybridlab
