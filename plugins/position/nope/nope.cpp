// NoPE: no positional information at all; order reaches the model only through the causal mask
// (Kazemnejad et al., "The Impact of Positional Encoding on Length Generalization in
// Transformers", NeurIPS 2023; Haviv et al. 2022).

#include "hybridlab/position.h"

namespace {

class NoPE : public hybridlab::PositionScheme {
 public:
  std::string name() const override { return "nope"; }
  uint32_t hooks() const override { return hybridlab::kHookNone; }

  static std::shared_ptr<hybridlab::PositionScheme> create(
      hybridlab::Section& /*params*/, const hybridlab::PositionContext& /*ctx*/) {
    return std::make_shared<NoPE>();
  }
};

}  // namespace

HYBRIDLAB_POSITION_PLUGIN("nope", "1.0", "no positional encoding: the causal mask alone",
                          NoPE::create)
