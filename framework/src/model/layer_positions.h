#pragma once
// The layer graph's PositionService (hybridlab/mixer.h): the positional schemes of its mixers,
// from the plugins of its host, with one instance for the layers that may share one.

#include <map>
#include <memory>
#include <string>

#include "hybridlab/mixer.h"
#include "hybridlab/model.h"
#include "hybridlab/plugin_host.h"

namespace hybridlab {

class LayerPositions : public PositionService {
 public:
  /// host: builds the schemes (outlives this); lengths: what the model serves, which every
  /// scheme must encode (check_scheme_length).
  LayerPositions(PluginHost& host, const ModelBuildContext& lengths)
      : host_(host), lengths_(lengths) {}
  /// See PositionService::build. A scheme that asks for it (shared_across_layers) is one
  /// instance for every layer with the same settings and head layout (n_heads, n_kv_heads,
  /// head_dim, causal); shared() holds those, for the model to register once.
  BuiltPosition build(Section& position, const PositionContext& ctx) override;
  /// The shared instances, by their settings and head layout.
  const std::map<std::string, std::shared_ptr<PositionScheme>>& shared() const { return shared_; }

 private:
  PluginHost& host_;
  ModelBuildContext lengths_;
  std::map<std::string, std::shared_ptr<PositionScheme>> shared_;
};

}  // namespace hybridlab
