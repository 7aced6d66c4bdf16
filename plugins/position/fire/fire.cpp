// FIRE: functional interpolation for relative positions (Li et al., "Functional Interpolation for
// Relative Positions Improves Long Context Transformers", ICLR 2024, arXiv 2310.04418). A learned
// function of the progressively interpolated distance is added to the scaled logits:
//   b_h(i, j) = f_θ( ψ(i − j) / (ψ(max(i, L)) + ε) )_h,   ψ(x) = ln(|c·x| + 1),
// with i the query's absolute position, f_θ an MLP 1 → width → ReLU → H (one output per head;
// the output layer has no bias: a per-head constant on every logit of a row cancels in the
// softmax, so the reference's default nn.Linear bias there never gets a gradient),
// c learnable (init 0.1), L = |L_mult · 512| with L_mult learnable (init 1) and ε = 1e-6: the
// defaults of the paper's appendix code (as reproduced in mcleish7/arithmetic,
// cramming/architectures/embeddings.py). Dividing by ψ(i) maps every distance a query sees into
// [0, 1] whatever its position (progressive interpolation); the threshold L keeps short
// prefixes from being stretched to the whole range.
//
// The bias depends on the query's absolute position, so it is not Toeplitz: a shift of all
// positions changes it, and a decoding step must be called with the true position i (the
// attention layer passes absolute positions to every hook). Keys after the query (bidirectional
// attention) get ψ(|i − j|) like those before it. Positions, ψ and the MLP are computed in fp32
// (fp64 for an fp64 model) whatever the model's dtype: a bf16 position is exact only up to 256.
// Whether the paper shares FIRE across layers is unverified (the reference notes mention a shared
// variant); it is per layer by default, and `shared_across_layers: true` shares one instance.

#include <cmath>

#include <torch/nn/modules/linear.h>

#include "hybridlab/position.h"

namespace {

using hybridlab::PositionContext;
using hybridlab::PositionTable;
using hybridlab::Section;

struct FireSettings {
  int64_t mlp_width = 32;
  double c_init = 0.1;
  double length = 512.0;  // the reference's init_L (fixed)
  double length_mult_init = 1.0;
  double eps = 1e-6;
  bool shared = false;
};

class Fire : public hybridlab::PositionScheme {
 public:
  Fire(const FireSettings& s, int64_t n_heads)
      : length_(s.length), eps_(s.eps), shared_(s.shared), width_(s.mlp_width), heads_(n_heads) {
    c_ = register_parameter("c", torch::full({1}, s.c_init));
    length_mult_ = register_parameter("L_mult", torch::full({1}, s.length_mult_init));
    mlp_in_ = register_module("mlp_in", torch::nn::Linear(1, s.mlp_width));
    mlp_out_ = register_module(
        "mlp_out", torch::nn::Linear(torch::nn::LinearOptions(s.mlp_width, n_heads).bias(false)));
  }

  std::string name() const override { return "fire"; }
  uint32_t hooks() const override { return hybridlab::kHookLogitBias | hybridlab::kHookFlops; }

  /// Per (query, key) pair: ψ of the distance and of the threshold and their ratio (~6), the MLP
  /// 1 → W (2W) → ReLU (W) → H (2WH), and the bias added to H logits.
  double flops_per_token(int64_t, double keys) const override {
    const double W = static_cast<double>(width_), H = static_cast<double>(heads_);
    return keys * (6.0 + 3.0 * W + 2.0 * W * H + H);
  }
  bool shared_across_layers() const override { return shared_; }

  /// fp32, or fp64 for fp64 parameters: positions in bf16 are exact only up to 256.
  torch::ScalarType compute_dtype() const {
    return c_.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
  }

  /// The MLP input ψ(i − j)/(ψ(max(i, L)) + ε) [Tq,Tk] in compute_dtype().
  torch::Tensor normalised_distance(const torch::Tensor& q_pos, const torch::Tensor& k_pos) const {
    const auto dtype = compute_dtype();
    const torch::Tensor i = q_pos.to(dtype).unsqueeze(1);  // [Tq,1]
    const torch::Tensor rel = i - k_pos.to(dtype).unsqueeze(0);
    const torch::Tensor c = c_.to(dtype);
    auto psi = [&](const torch::Tensor& x) { return torch::log1p((c * x).abs()); };
    const torch::Tensor threshold = (length_mult_.to(dtype) * length_).abs();
    return psi(rel) / (psi(torch::maximum(i, threshold)) + eps_);
  }

  // q_pos [Tq], k_pos [Tk] -> [H,Tq,Tk] in the parameters' dtype; the MLP runs in
  // compute_dtype() (the reference notes recommend fp32).
  torch::Tensor logit_bias(const torch::Tensor& q_pos, const torch::Tensor& k_pos) override {
    const auto dtype = compute_dtype();
    const torch::Tensor x = normalised_distance(q_pos, k_pos).unsqueeze(-1);  // [Tq,Tk,1]
    const torch::Tensor h = torch::relu(
        torch::linear(x, mlp_in_->weight.to(dtype), mlp_in_->bias.to(dtype)));  // [Tq,Tk,W]
    return torch::linear(h, mlp_out_->weight.to(dtype)).permute({2, 0, 1}).to(c_.scalar_type());
  }

  std::vector<PositionTable> inspect(int64_t length) override {
    torch::NoGradGuard no_grad;
    std::vector<PositionTable> out;
    PositionTable p;
    p.name = "parameters";
    p.description = "FIRE c and the threshold L = |L_mult * " + std::to_string(length_) + "|";
    p.values = torch::stack({c_, (length_mult_ * length_).abs()}, 1).to(torch::kFloat);
    p.columns = {"c", "L"};
    p.row_label = "index";
    out.push_back(p);
    const torch::Tensor pos = torch::arange(length, torch::kLong).to(c_.device());
    PositionTable x;
    x.name = "mlp_input";
    x.description = "FIRE MLP input psi(i-j)/psi(max(i,L)), psi(x) = ln(|c x| + 1)";
    x.values = normalised_distance(pos, pos).to(torch::kFloat);
    x.row_label = "query position i";
    x.column_label = "key position j";
    out.push_back(x);
    const torch::Tensor bias = logit_bias(pos, pos).to(torch::kFloat);
    for (int64_t h = 0; h < bias.size(0); ++h) {
      out.push_back(
          hybridlab::head_bias_table(h, bias[h].clone(), "FIRE bias head " + std::to_string(h)));
    }
    return out;
  }

  static std::shared_ptr<hybridlab::PositionScheme> create(Section& params,
                                                           const PositionContext& ctx) {
    FireSettings s;
    s.mlp_width = params.get<int64_t>("mlp_width", s.mlp_width);
    s.c_init = params.get<double>("c_init", s.c_init);
    s.length = params.get<double>("L", s.length);
    s.length_mult_init = params.get<double>("L_mult_init", s.length_mult_init);
    s.eps = params.get<double>("eps", s.eps);
    s.shared = params.get<bool>("shared_across_layers", s.shared);
    params.check(
        ctx.n_heads > 0, "scheme",
        "FIRE needs the number of attention heads (n_heads), got " + std::to_string(ctx.n_heads));
    params.check(s.mlp_width > 0, "mlp_width",
                 "must be > 0 (hidden units of the MLP; the paper uses 32), got " +
                     std::to_string(s.mlp_width));
    auto positive = [&](const char* key, double v, const char* what) {
      params.check(
          std::isfinite(v) && v > 0, key,
          std::string("must be a finite number > 0 (") + what + "), got " + std::to_string(v));
    };
    positive("c_init", s.c_init, "c in psi(x) = ln(|c x| + 1); the paper uses 0.1");
    positive("L", s.length, "the threshold length; the paper uses 512");
    positive("L_mult_init", s.length_mult_init, "L_mult in |L_mult * L|; the paper uses 1");
    positive("eps", s.eps, "added to the normaliser; the paper uses 1e-6");
    params.done();
    return std::make_shared<Fire>(s, ctx.n_heads);
  }

 private:
  double length_, eps_;
  bool shared_;
  int64_t width_, heads_;          // the MLP's hidden width, its outputs (one bias per head)
  torch::Tensor c_, length_mult_;  // [1] each
  torch::nn::Linear mlp_in_{nullptr}, mlp_out_{nullptr};
};

}  // namespace

HYBRIDLAB_POSITION_PLUGIN("fire", "1.0",
                          "FIRE: MLP over progressively interpolated relative positions "
                          "(Li et al. 2024)",
                          Fire::create)
