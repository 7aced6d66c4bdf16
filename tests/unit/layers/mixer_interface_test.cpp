// The analysis side of the Mixer interface (layers/mixer.h): what a mixer without a scheme or a
// state answers by default, and what attention and Gated DeltaNet answer, so that knock-outs and
// head statistics need no cast to a concrete mixer.

#include <torch/torch.h>

#include <catch2/catch.hpp>

#include "layers/attention.h"
#include "layers/gated_deltanet.h"
#include "layers_test_util.h"

using namespace hybridlab;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace mixer_interface_test {
namespace {

// A mixer that implements only the required part: the identity.
class Identity : public Mixer {
 public:
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor&, MixerCache*) override {
    return x;
  }
  std::unique_ptr<MixerCache> make_cache() const override { return nullptr; }
  MixerInfo info(int64_t) const override { return {}; }
};

class Biased : public PositionScheme {
 public:
  std::string name() const override { return "biased"; }
  uint32_t hooks() const override { return kHookLogitBias; }
  torch::Tensor logit_bias(const torch::Tensor& q_pos, const torch::Tensor& k_pos) override {
    return (k_pos.unsqueeze(0) - q_pos.unsqueeze(1))
        .to(torch::kFloat)
        .unsqueeze(0)
        .expand({2, q_pos.size(0), k_pos.size(0)});
  }
};

}  // namespace

TEST_CASE("mixer interface: the defaults describe no scheme, no state, no observers",
          "[layers][mixer]") {
  Identity m;
  CHECK(m.position_scheme() == nullptr);
  CHECK(m.state_reset_window() == 0);
  m.set_ablation(AttentionAblation{});
  m.set_probes(MixerProbes{});
  GatedDeltaNetCache unrelated;
  CHECK_FALSE(m.recurrent_state(unrelated).defined());
}

TEST_CASE("mixer interface: attention names its scheme, takes ablations and its probe",
          "[layers][mixer]") {
  torch::manual_seed(0);
  AttentionOptions o;
  o.n_heads = 2;
  auto scheme = std::make_shared<Biased>();
  Attention att(o, 16, scheme, true);
  Mixer& m = att;
  CHECK(m.position_scheme() == scheme.get());
  CHECK(m.state_reset_window() == 0);
  const torch::Tensor x = torch::randn({1, 6, 16});
  const torch::Tensor pos = torch::arange(6);
  torch::NoGradGuard no_grad;
  const torch::Tensor trained = att.forward(x, pos, nullptr);
  // Through the interface: no position == NoPE; restoring gives the trained output back.
  AttentionAblation a;
  a.no_position = true;
  m.set_ablation(a);
  CHECK(test::max_abs_diff(att.forward(x, pos, nullptr), trained) > 1e-4);
  m.set_ablation(AttentionAblation{});
  CHECK(torch::equal(att.forward(x, pos, nullptr), trained));
  int64_t calls = 0;
  MixerProbes probes;
  probes.attention = [&](const torch::Tensor& p, const torch::Tensor&, const torch::Tensor&) {
    ++calls;
    CHECK(p.size(1) == 2);
  };
  probes.gates = [](const torch::Tensor&, const torch::Tensor&) { FAIL("attention has no gates"); };
  m.set_probes(probes);
  att.forward(x, pos, nullptr);
  CHECK(calls >= 1);
  m.set_probes({});
  att.forward(x, pos, nullptr);
  CHECK(calls == 1);
}

TEST_CASE("mixer interface: Gated DeltaNet resets per chunk, shows its gates and its state",
          "[layers][mixer]") {
  torch::manual_seed(0);
  GatedDeltaNetOptions o;
  o.n_heads = 2;
  o.head_dim = 8;
  o.expand_v = 1.0;
  o.chunk_size = 16;
  GatedDeltaNet gdn(o, 16);
  Mixer& m = gdn;
  CHECK(m.position_scheme() == nullptr);
  CHECK(m.state_reset_window() == 16);
  torch::NoGradGuard no_grad;
  int64_t calls = 0;
  MixerProbes probes;
  probes.gates = [&](const torch::Tensor& g, const torch::Tensor& beta) {
    ++calls;
    CHECK(g.sizes() == torch::IntArrayRef({1, 2, 5}));
    CHECK(beta.sizes() == torch::IntArrayRef({1, 2, 5}));
  };
  m.set_probes(probes);
  auto cache = m.make_cache();
  CHECK_FALSE(m.recurrent_state(*cache).defined());
  gdn.forward(torch::randn({1, 5, 16}), torch::arange(5), cache.get());
  CHECK(calls == 1);
  const torch::Tensor state = m.recurrent_state(*cache);
  REQUIRE(state.defined());
  CHECK(state.sizes() == torch::IntArrayRef({1, 2, 8, 8}));
  CHECK(torch::equal(state, dynamic_cast<GatedDeltaNetCache&>(*cache).state));
}

}  // namespace mixer_interface_test
