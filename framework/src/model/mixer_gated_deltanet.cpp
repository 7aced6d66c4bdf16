// The `gated_deltanet` mixer type (letter G): options from `model.gated_deltanet`.

#include "layers/gated_deltanet.h"
#include "model/layer_options.h"
#include "model/mixer.h"

namespace hybridlab {

MixerType gated_deltanet_mixer_type() {
  MixerType t;
  t.name = "gated_deltanet";
  t.letter = 'G';
  t.description = "Gated DeltaNet (Yang, Kautz & Hatamizadeh, ICLR 2025)";
  t.read = [](Section s, const ModelDims& dims, const std::any* base) -> std::any {
    return read_gated_deltanet_options(
        s, dims, base ? &std::any_cast<const GatedDeltaNetOptions&>(*base) : nullptr);
  };
  // The chunk is a way of computing the same map, not a parameter.
  t.eval_safe_keys = {"chunk_size"};
  t.build = [](const std::any& opts, const MixerBuildContext& ctx) -> std::shared_ptr<Mixer> {
    GatedDeltaNetOptions o = std::any_cast<const GatedDeltaNetOptions&>(opts);
    o.fused_kernels = ctx.fused_kernels;  // model.fused_kernels owns every fused kernel
    return std::make_shared<GatedDeltaNet>(o, ctx.d_model);
  };
  return t;
}

}  // namespace hybridlab
