// KERPLE, logarithmic variant (Chi et al., "KERPLE: Kernelized Relative Positional Embedding for
// Length Extrapolation", NeurIPS 2022, eq. 9): a learned, per-head bias on the logits
//   b_h(i, j) = -r1_h * log(1 + r2_h * |i - j|),   r1_h, r2_h > 0.
// A complete out-of-tree hybridlab plugin: one .cpp and the CMakeLists.txt beside it.

#include <hybridlab/position.h>
#include <torch/torch.h>

namespace {

class KerpleLog : public hybridlab::PositionScheme {
 public:
  KerpleLog(int64_t n_heads, double r1_init, double r2_init) {
    // Parameters are stored through softplus^-1 so that r = softplus(raw) stays positive.
    auto inv_softplus = [](double r) { return std::log(std::expm1(r)); };
    raw_r1_ = register_parameter("raw_r1", torch::full({n_heads}, inv_softplus(r1_init)));
    raw_r2_ = register_parameter("raw_r2", torch::full({n_heads}, inv_softplus(r2_init)));
  }

  std::string name() const override { return "kerple_log"; }
  uint32_t hooks() const override { return hybridlab::kHookLogitBias; }

  // q_pos [Tq], k_pos [Tk] -> [H, Tq, Tk]
  torch::Tensor logit_bias(const torch::Tensor& q_pos, const torch::Tensor& k_pos) override {
    const auto dist = (q_pos.unsqueeze(1) - k_pos.unsqueeze(0)).abs().to(torch::kFloat);  // [Tq,Tk]
    const auto r1 = torch::softplus(raw_r1_).view({-1, 1, 1});                            // [H,1,1]
    const auto r2 = torch::softplus(raw_r2_).view({-1, 1, 1});
    return -r1 * torch::log1p(r2 * dist.unsqueeze(0));
  }

  static std::shared_ptr<hybridlab::PositionScheme> create(hybridlab::Section& params,
                                                           const hybridlab::PositionContext& ctx) {
    const double r1 = params.get<double>("r1_init", 1.0);
    const double r2 = params.get<double>("r2_init", 1.0);
    params.check(r1 > 0, "r1_init", "must be > 0");
    params.check(r2 > 0, "r2_init", "must be > 0");
    params.done();  // report bad or unknown keys now, before building anything
    return std::make_shared<KerpleLog>(ctx.n_heads, r1, r2);
  }

 private:
  torch::Tensor raw_r1_, raw_r2_;
};

}  // namespace

HYBRIDLAB_POSITION_PLUGIN("kerple_log", "1.0",
                          "KERPLE log bias -r1*log(1+r2|i-j|) (Chi et al. 2022)", KerpleLog::create)
