// FoX: the Forgetting Transformer's forget gate as a positional scheme (Lin, Nikishin, He &
// Courville, "Forgetting Transformer: Softmax Attention with a Forget Gate", ICLR 2025, arXiv
// 2503.02130, eqs. 3–4). Every token writes one forget gate per head from the layer input,
//   f_t = σ(w_fᵀ x_t + b_f),   c_i = Σ_{l≤i} ln f_l,   D_ij = c_i − c_j = Σ_{l=j+1..i} ln f_l,
// and the attention logits become q_i·k_j/√d + D_ij: a data-dependent, learned recency decay
// (a constant f is ALiBi with slope −ln f). FoX uses no other position encoding (`use_rope:
// false` in every configuration of zhixuan-lin/forgetting-transformer@883f260c).
//
// D_ij is separable (query term c_i, key term −c_j), which is what the data_bias hook returns:
// the attention kernels read two vectors per head, the decoding cache keeps each key's −c_j and
// this scheme's state is c of the last token per head. c is accumulated in fp32 (fp64 for an
// fp64 model), as the reference kernel does.
//
// Gates (`gate:`):
//  - data (the paper's): Linear(d_model, n_heads) with bias, weights N(0, 0.02), bias
//    `bias_init` (0 in the reference: f = 1/2 at initialisation);
//  - bias_only: a learned b per head, no projection; fixed: the same b, not learned. b =
//    −ln(expm1(1/τ)) with τ log-spaced over the heads in [tau_min, tau_max], so ln σ(b) = −1/τ
//    (the reference's data-independent variants).
// The "Pro" block's other parts are attention options: qk_norm, output_gate, use_short_conv
// (docs/position-schemes.md).

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "hybridlab/position.h"

namespace {

using hybridlab::DataBias;
using hybridlab::PositionContext;
using hybridlab::PositionTable;
using hybridlab::Section;

enum class Gate { kData, kBiasOnly, kFixed };

constexpr double kFloatMax = std::numeric_limits<float>::max();

struct FoxOptions {
  Gate gate = Gate::kData;
  double bias_init = 0.0;  // data gate: the projection's bias
  double tau_min = 1.0;    // bias_only / fixed: the shortest and longest time constants, tokens
  double tau_max = 512.0;
};

/// b_h = −ln(expm1(1/τ_h)) for τ log-spaced in [tau_min, tau_max] over `heads` heads:
/// ln σ(b_h) = −1/τ_h.
torch::Tensor bias_for_time_constants(int64_t heads, double tau_min, double tau_max) {
  const torch::Tensor tau = heads == 1 ? torch::full({1}, tau_min, torch::kDouble)
                                       : torch::logspace(std::log10(tau_min), std::log10(tau_max),
                                                         heads, 10.0, torch::kDouble);
  return -torch::log(torch::expm1(1.0 / tau)).to(torch::kFloat);
}

class Fox : public hybridlab::PositionScheme {
 public:
  Fox(const FoxOptions& o, int64_t d_model, int64_t n_heads)
      : gate_(o.gate), heads_(n_heads), d_model_(d_model) {
    if (gate_ == Gate::kData) {
      fgate_proj_ = register_module(
          "fgate_proj", torch::nn::Linear(torch::nn::LinearOptions(d_model, n_heads).bias(true)));
      torch::NoGradGuard no_grad;
      fgate_proj_->weight.normal_(0.0, 0.02);
      fgate_proj_->bias.fill_(o.bias_init);
    } else {
      const torch::Tensor b = bias_for_time_constants(n_heads, o.tau_min, o.tau_max);
      if (gate_ == Gate::kBiasOnly) {
        fgate_bias_ = register_parameter("fgate_bias", b);
      } else {
        fgate_bias_ = register_buffer("fgate_bias", b);
      }
    }
  }

  std::string name() const override { return "fox"; }
  uint32_t hooks() const override { return hybridlab::kHookDataBias | hybridlab::kHookFlops; }

  /// The data gate's projection (2·d_model per head), ln σ and the running sum (a few per head),
  /// and per key the query and key terms added to the logit (2 per head).
  double flops_per_token(int64_t, double keys) const override {
    const double H = static_cast<double>(heads_);
    return (gate_ == Gate::kData ? 2.0 * static_cast<double>(d_model_) * H : 0.0) + 5.0 * H +
           2.0 * H * keys;
  }

  /// x [B,T,D] -> ln f [B,H,T] in fp32 (fp64 for an fp64 x).
  torch::Tensor log_forget(const torch::Tensor& x) {
    const auto dtype = x.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
    torch::Tensor logit;
    if (gate_ == Gate::kData) {
      logit = fgate_proj_(x).to(dtype);  // [B,T,H]
    } else {
      logit = fgate_bias_.to(dtype).view({1, 1, heads_}).expand({x.size(0), x.size(1), heads_});
    }
    return torch::log_sigmoid(logit).transpose(1, 2);  // [B,H,T]
  }

  DataBias data_bias(const torch::Tensor& x, const torch::Tensor&,
                     const torch::Tensor& state) override {
    torch::Tensor c = torch::cumsum(log_forget(x), -1);  // [B,H,T]
    if (state.defined()) c = c + state.to(c.scalar_type()).unsqueeze(-1);
    DataBias out;
    out.query = c;
    out.key = -c;
    out.state = c.select(-1, c.size(-1) - 1).detach();  // [B,H]: c of the last token
    return out;
  }

  std::vector<PositionTable> inspect(int64_t length) override {
    torch::NoGradGuard no_grad;
    std::vector<PositionTable> out;
    // The gate at the zero input: the data gate's bias, or the bias_only / fixed constant.
    const torch::Tensor logf = log_forget(torch::zeros({1, length, d_model_}))[0];  // [H,T]
    PositionTable g;
    g.name = "log_forget";
    g.description = "FoX ln f per head at the zero input (time constant -1/ln f in tokens)";
    g.values = torch::stack({logf.select(1, 0), -1.0 / logf.select(1, 0)}, 1).to(torch::kFloat);
    g.columns = {"ln_f", "tau_tokens"};
    g.row_label = "head";
    out.push_back(g);
    const torch::Tensor c = torch::cumsum(logf, -1);          // [H,T]
    const torch::Tensor D = c.unsqueeze(2) - c.unsqueeze(1);  // [H,T,T]: c_i − c_j
    const torch::Tensor causal = torch::ones({length, length}).tril().to(torch::kBool);
    for (int64_t h = 0; h < heads_; ++h) {
      out.push_back(hybridlab::head_bias_table(
          h, D[h].masked_fill(causal.logical_not(), 0).to(torch::kFloat),
          "FoX bias c_i - c_j head " + std::to_string(h) + " at the zero input (j <= i)"));
    }
    return out;
  }

  static std::shared_ptr<hybridlab::PositionScheme> create(Section& params,
                                                           const PositionContext& ctx) {
    FoxOptions o;
    const std::string gate = params.get<std::string>("gate", "data");
    o.bias_init = params.get<double>("bias_init", o.bias_init);
    o.tau_min = params.get<double>("tau_min", o.tau_min);
    o.tau_max = params.get<double>("tau_max", o.tau_max);
    params.check(ctx.n_heads > 0 && ctx.d_model > 0, "scheme",
                 "FoX needs an attention layer's input and heads (d_model, n_heads); it cannot be "
                 "the model-level input scheme");
    params.check(ctx.n_heads <= 0 || ctx.causal, "scheme",
                 "FoX's forget gate decays the past (D_ij sums the gates from key j to query i, "
                 "for j <= i only); with bidirectional attention future keys would get no decay "
                 "at all: use it with causal attention");
    // Keys the chosen gate does not read are refused, so that a setting never looks applied.
    const bool data = gate == "data";
    for (const char* key : {"tau_min", "tau_max"}) {
      params.check(!(data && params.has(key)), key,
                   "applies only to gate: bias_only or fixed (the data gate's bias starts at "
                   "bias_init); set gate, or remove it");
    }
    params.check(data || !params.has("bias_init"), "bias_init",
                 "applies only to gate: data (bias_only and fixed start from tau_min..tau_max); "
                 "remove it");
    params.check(gate == "data" || gate == "bias_only" || gate == "fixed", "gate",
                 "expected data (σ(w·x + b), the paper's), bias_only (a learned b per head) or "
                 "fixed (b not learned), got '" +
                     gate + "'");
    // The gate's bias is a float parameter: a larger value would be stored as infinity, and
    // log σ(±inf) turns the first backward into NaN.
    params.check(std::isfinite(o.bias_init) && std::fabs(o.bias_init) <= kFloatMax, "bias_init",
                 fmt::format("must be a finite number a float holds (|b| <= {:g}), got {}",
                             kFloatMax, o.bias_init));
    params.check(std::isfinite(o.tau_min) && o.tau_min > 0, "tau_min",
                 fmt::format("must be a finite number of tokens > 0, got {}", o.tau_min));
    // b = −ln(expm1(1/τ)) is −inf once expm1 overflows (1/τ > ln DBL_MAX, τ below ~0.0014).
    params.check(!(o.tau_min > 0) || std::isfinite(std::log(std::expm1(1.0 / o.tau_min))),
                 "tau_min",
                 fmt::format("{} tokens makes the gate's bias -ln(expm1(1/tau)) infinite; use "
                             "tau_min >= 0.01",
                             o.tau_min));
    params.check(std::isfinite(o.tau_max) && o.tau_max >= o.tau_min, "tau_max",
                 fmt::format("must be finite and >= tau_min ({}), got {}", o.tau_min, o.tau_max));
    params.done();
    o.gate = gate == "bias_only" ? Gate::kBiasOnly : gate == "fixed" ? Gate::kFixed : Gate::kData;
    return std::make_shared<Fox>(o, ctx.d_model, ctx.n_heads);
  }

 private:
  Gate gate_;
  int64_t heads_, d_model_;
  torch::nn::Linear fgate_proj_{nullptr};
  torch::Tensor fgate_bias_;  // [H], bias_only and fixed gates
};

}  // namespace

HYBRIDLAB_POSITION_PLUGIN("fox", "1.0",
                          "Forgetting Transformer: data-dependent forget-gate logit bias (Lin et "
                          "al. 2025)",
                          Fox::create)
