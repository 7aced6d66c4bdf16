// KERPLE: kernelized relative positional embedding (Chi, Fan, Ramadge & Rudnicky, "KERPLE:
// Kernelized Relative Positional Embedding for Length Extrapolation", NeurIPS 2022, arXiv
// 2205.09921; its "logarithmic" and "power" variants). A learned, per-head, conditionally positive
// definite kernel of the distance |i − j| is added to the scaled logits q·kᵀ/√Dh (GPT-NeoX adds it
// after 1/√d):
//   kernel log:    b_h(i, j) = −r1_h · ln(1 + r2_h·|i − j|),   r1, r2 > 0
//   kernel power:  b_h(i, j) = −r1_h · |i − j|^r2_h,           r1 > 0, 0 < r2 ≤ 2
//
// As in the reference (chijames/KERPLE, megatron/mpu/layers.py, ParallelKerpleLog/Power) the
// parameters are stored as they are and projected back into their domain before every use:
// r ≥ 0.01, and the power exponent ≤ 2. The projection is a clamp of the parameter data, not a
// differentiable op (the reference assigns `.data`); it runs under NoGradGuard on `.data()`,
// which shares the storage but not the version counter, so a bias already in an autograd graph
// (an earlier tile of the same step) does not see a version bump. After an optimizer step the
// first call of the next step clamps; later calls are no-ops.
//
// Initialisation follows the reference, which draws p = 2·U(0,1) and a = U(0,1) per head and
// uses −p·ln(1 + a·|i − j|) (log: r1 = p, r2 = a) and −a·|i − j|^p (power: r1 = a, r2 = p, the
// exponent), then projects; r1_init / r2_init set every head to one value instead.
// The kernel depends on |i − j| only, so it is the same for any shift of all positions and for
// a decoding step (one row of the matrix).

#include <cmath>

#include "hybridlab/position.h"

namespace {

using hybridlab::PositionContext;
using hybridlab::PositionTable;
using hybridlab::Section;

constexpr double kFloor = 0.01;       // reference clamp(min=0.01) on every parameter
constexpr double kMaxExponent = 2.0;  // power kernel: |i−j|^p is CPD only for 0 < p ≤ 2

enum class Kernel { kLog, kPower };

class Kerple : public hybridlab::PositionScheme {
 public:
  Kerple(Kernel kernel, int64_t n_heads, double r1_init, double r2_init) : kernel_(kernel) {
    // 0 (the default): the reference's random draw (see the file comment).
    auto init = [&](double value, double span) {
      return value == 0 ? torch::rand({n_heads}) * span : torch::full({n_heads}, value);
    };
    const bool log = kernel == Kernel::kLog;
    r1_ = register_parameter("r1", init(r1_init, log ? 2.0 : 1.0));
    r2_ = register_parameter("r2", init(r2_init, log ? 1.0 : 2.0));
    project();
  }

  std::string name() const override { return "kerple"; }
  uint32_t hooks() const override { return hybridlab::kHookLogitBias | hybridlab::kHookFlops; }

  /// Per key and head: the kernel of the distance (scale, log1p or pow, scale: 3) and its add.
  double flops_per_token(int64_t, double keys) const override {
    return 4.0 * static_cast<double>(r1_.size(0)) * keys;
  }

  /// Clamps the parameters into the kernel's domain (a projection, see the file comment).
  void project() {
    torch::NoGradGuard no_grad;
    r1_.data().clamp_min_(kFloor);
    if (kernel_ == Kernel::kPower) {
      r2_.data().clamp_(kFloor, kMaxExponent);
    } else {
      r2_.data().clamp_min_(kFloor);
    }
  }

  // q_pos [Tq], k_pos [Tk] -> [H,Tq,Tk] in the parameters' dtype. Computed in fp32 (fp64 for
  // fp64 parameters), so a bf16 or fp16 model rounds the bias once, not at every step.
  torch::Tensor logit_bias(const torch::Tensor& q_pos, const torch::Tensor& k_pos) override {
    project();
    const auto dtype = r1_.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
    const torch::Tensor dist =
        (q_pos.unsqueeze(1) - k_pos.unsqueeze(0)).abs().to(dtype).unsqueeze(0);  // [1,Tq,Tk]
    const torch::Tensor r1 = r1_.to(dtype).view({-1, 1, 1}), r2 = r2_.to(dtype).view({-1, 1, 1});
    // pow's backward masks d/dp 0^p = 0·ln 0 to 0 for p > 0 (the trap in the reference notes).
    const torch::Tensor bias =
        kernel_ == Kernel::kLog ? -r1 * torch::log1p(r2 * dist) : -r1 * torch::pow(dist, r2);
    return bias.to(r1_.scalar_type());
  }

  std::vector<PositionTable> inspect(int64_t length) override {
    torch::NoGradGuard no_grad;
    std::vector<PositionTable> out;
    const std::string kname = kernel_ == Kernel::kLog ? "log" : "power";
    PositionTable p;
    p.name = "parameters";
    p.description = kernel_ == Kernel::kLog
                        ? "KERPLE log kernel -r1 ln(1 + r2|i-j|): r1, r2 per head"
                        : "KERPLE power kernel -r1 |i-j|^r2: r1, r2 per head";
    p.values = torch::stack({r1_.detach(), r2_.detach()}, 1).to(torch::kFloat);
    p.columns = {"r1", "r2"};
    p.row_label = "head";
    out.push_back(p);
    const torch::Tensor pos = torch::arange(length, torch::kLong).to(r1_.device());
    const torch::Tensor bias = logit_bias(pos, pos).to(torch::kFloat);
    for (int64_t h = 0; h < bias.size(0); ++h) {
      out.push_back(hybridlab::head_bias_table(h, bias[h].clone(),
                                               "KERPLE " + kname + " bias head " +
                                                   std::to_string(h) + " (r1 " +
                                                   std::to_string(r1_[h].item<double>()) + ", r2 " +
                                                   std::to_string(r2_[h].item<double>()) + ")"));
    }
    return out;
  }

  static std::shared_ptr<hybridlab::PositionScheme> create(Section& params,
                                                           const PositionContext& ctx) {
    const std::string kernel = params.get<std::string>("kernel", "log");
    // 0 (the default, and what the resolved config writes) means the reference's random init.
    const double r1 = params.get<double>("r1_init", 0.0);
    const double r2 = params.get<double>("r2_init", 0.0);
    params.check(
        ctx.n_heads > 0, "scheme",
        "KERPLE needs the number of attention heads (n_heads), got " + std::to_string(ctx.n_heads));
    params.check(
        kernel == "log" || kernel == "power", "kernel",
        "expected log (-r1 ln(1 + r2|i-j|)) or power (-r1 |i-j|^r2), got '" + kernel + "'");
    // A given value must be 0 (random init) or a finite value in the projection's range.
    auto check_init = [&](const char* key, double v, double hi) {
      params.check(v == 0 || (std::isfinite(v) && v >= kFloor && v <= hi), key,
                   std::string("must be 0 (the reference's random init) or a finite number in "
                               "[0.01, ") +
                       (std::isinf(hi) ? "inf)" : "2]") +
                       " (the range the parameter is clamped to), got " + std::to_string(v));
    };
    check_init("r1_init", r1, HUGE_VAL);
    check_init("r2_init", r2, kernel == "power" ? kMaxExponent : HUGE_VAL);
    params.done();
    return std::make_shared<Kerple>(kernel == "power" ? Kernel::kPower : Kernel::kLog, ctx.n_heads,
                                    r1, r2);
  }

 private:
  Kernel kernel_;
  torch::Tensor r1_, r2_;  // [H]
};

}  // namespace

HYBRIDLAB_POSITION_PLUGIN("kerple", "1.0",
                          "KERPLE learned log / power distance kernel per head (Chi et al. 2022)",
                          Kerple::create)
