// The checked hook calls the layers make: a hook's output of the wrong shape, dtype or device is
// a PluginError naming the scheme, the hook, expected and got, never broadcast or converted.

#include <torch/torch.h>

#include <catch2/catch.hpp>

#include "hybridlab/error.h"
#include "hybridlab/position_hooks.h"

using namespace hybridlab;

// A named namespace per test file keeps its helpers apart in a unity build.
namespace position_hooks_test {
namespace {

// Returns whatever the test sets, for every hook.
class Returns : public PositionScheme {
 public:
  torch::Tensor out;
  std::string name() const override { return "returns"; }
  uint32_t hooks() const override { return kHookEmbed | kHookLogitBias | kHookRelative; }
  torch::Tensor embed(const torch::Tensor&, const torch::Tensor&) override { return out; }
  torch::Tensor logit_bias(const torch::Tensor&, const torch::Tensor&) override { return out; }
  torch::Tensor relative_values(const torch::Tensor&, const torch::Tensor&,
                                const torch::Tensor&) override {
    return out;
  }
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const PluginError& e) {
    return e.what();
  }
  return "<no PluginError>";
}

}  // namespace

TEST_CASE("position hooks: outputs are checked for shape, dtype and presence", "[layers]") {
  Returns s;
  const torch::Tensor qp = torch::arange(3), kp = torch::arange(5);
  const auto bias = [&] {
    return checked_logit_bias(s, qp, kp, 4, torch::kFloat, torch::kFloat, torch::kCPU);
  };
  s.out = torch::zeros({4, 3, 5});
  CHECK(bias().sizes() == s.out.sizes());
  s.out = torch::zeros({1, 3, 5});  // would broadcast over the heads
  CHECK(error_of(bias) ==
        "positional scheme 'returns': its logit_bias hook returned [1,3,5] Float on cpu, "
        "expected [4,3,5] (H,Tq,Tk) Float on cpu");
  s.out = torch::zeros({4, 3, 5}, torch::kDouble);  // would be converted silently
  CHECK_THAT(error_of(bias), Catch::Contains("returned [4,3,5] Double on cpu"));
  s.out = torch::Tensor();
  CHECK_THAT(error_of(bias), Catch::Contains("returned an undefined tensor"));
  // A half-precision model computes its scores in float32: either is accepted.
  s.out = torch::zeros({4, 3, 5});
  CHECK_NOTHROW(checked_logit_bias(s, qp, kp, 4, torch::kBFloat16, torch::kFloat, torch::kCPU));
  // embed keeps x's shape; relative_values may be undefined (no value table) but not misshapen.
  const torch::Tensor x = torch::zeros({2, 3, 8});
  s.out = torch::zeros({2, 3, 4});
  CHECK_THAT(error_of([&] { checked_embed(s, x, qp); }),
             Catch::Contains("its embed hook returned [2,3,4] Float on cpu, expected [2,3,8]"));
  const torch::Tensor probs = torch::zeros({2, 4, 3, 5});
  s.out = torch::Tensor();
  CHECK_FALSE(checked_relative_values(s, probs, qp, kp, 6, torch::kFloat).defined());
  s.out = torch::zeros({2, 4, 3, 5});
  CHECK_THAT(error_of([&] { checked_relative_values(s, probs, qp, kp, 6, torch::kFloat); }),
             Catch::Contains("expected [2,4,3,6] (B,H,Tq,Dh)"));
}

}  // namespace position_hooks_test
