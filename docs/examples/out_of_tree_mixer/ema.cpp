// An out-of-tree mixer plugin: a per-channel exponential moving average (the damped EMA of MEGA,
// Ma et al., ICLR 2023, eq. 2, without its multi-dimensional expansion):
//   u = W_in x;  h_t = α ⊙ h_{t−1} + (1 − α) ⊙ u_t;  y = W_out h,   α = sigmoid(a) per channel
// A sequence runs in chunks of 64 tokens (no per-token loop); a decoding step carries h. Pattern
// letter 'E' in `model.layers`, settings under `model.ema`.

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "hybridlab/mixer.h"

namespace {

struct EmaCache : hybridlab::MixerCache {
  torch::Tensor h;  // [B, width], undefined before the first token
  int64_t nbytes() const override { return h.defined() ? static_cast<int64_t>(h.nbytes()) : 0; }
};

class Ema : public hybridlab::Mixer {
 public:
  Ema(int64_t d_model, int64_t width, double decay) : d_model_(d_model), width_(width) {
    in_proj = register_module(
        "in_proj", torch::nn::Linear(torch::nn::LinearOptions(d_model, width).bias(false)));
    out_proj = register_module(
        "out_proj", torch::nn::Linear(torch::nn::LinearOptions(width, d_model).bias(false)));
    // α starts at `decay` in every channel: a = logit(decay).
    a = register_parameter("a", torch::full({width}, std::log(decay / (1 - decay))));
  }

  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& /*positions*/,
                        hybridlab::MixerCache* cache_base) override {
    auto* cache = dynamic_cast<EmaCache*>(cache_base);
    TORCH_CHECK(!cache_base || cache, "ema: the cache was not made by this mixer");
    const torch::Tensor u = (1 - torch::sigmoid(a)) * in_proj(x);          // [B,T,W]
    const torch::Tensor log_alpha = torch::nn::functional::logsigmoid(a);  // [W], < 0
    const int64_t B = x.size(0), T = x.size(1), C = 64;
    torch::Tensor h =
        cache && cache->h.defined() ? cache->h : torch::zeros({B, width_}, u.options());
    // Chunks of C tokens: inside one, h_i = Σ_{j≤i} α^{i−j} u_j + α^{i+1} h_start, with the
    // weights α^{i−j} ≤ 1 built from masked differences (never a growing power, so no overflow).
    const torch::Tensor idx = torch::arange(C, u.options());
    const torch::Tensor diff = idx.unsqueeze(1) - idx.unsqueeze(0);  // [C,C]: i − j
    std::vector<torch::Tensor> pieces;
    for (int64_t start = 0; start < T; start += C) {
      const int64_t n = std::min(C, T - start);
      const torch::Tensor d = diff.slice(0, 0, n).slice(1, 0, n);
      const torch::Tensor weights =
          (d.clamp_min(0).unsqueeze(-1) * log_alpha).exp() * (d >= 0).unsqueeze(-1);  // [n,n,W]
      const torch::Tensor carry = ((idx.slice(0, 0, n) + 1).unsqueeze(-1) * log_alpha).exp();
      const torch::Tensor piece =
          torch::einsum("ijw,bjw->biw", {weights, u.slice(1, start, start + n)}) +
          carry * h.unsqueeze(1);  // [B,n,W]
      h = piece.select(1, n - 1);
      pieces.push_back(piece);
    }
    if (cache) cache->h = h;
    const torch::Tensor all = torch::cat(pieces, 1);
    return out_proj(all);
  }

  std::unique_ptr<hybridlab::MixerCache> make_cache() const override {
    return std::make_unique<EmaCache>();
  }

  hybridlab::MixerInfo info(int64_t /*length*/) const override {
    hybridlab::MixerInfo m;
    m.state_floats = width_;
    m.flops_per_token = 4.0 * d_model_ * width_ + 4.0 * width_;
    m.details = "width=" + std::to_string(width_);
    return m;
  }

  torch::Tensor recurrent_state(const hybridlab::MixerCache& cache) const override {
    const auto* c = dynamic_cast<const EmaCache*>(&cache);
    return c && c->h.defined() ? c->h.unsqueeze(1) : torch::Tensor();  // [B, 1 head, W]
  }

  torch::nn::Linear in_proj{nullptr}, out_proj{nullptr};
  torch::Tensor a;

 private:
  int64_t d_model_, width_;
};

std::shared_ptr<hybridlab::Mixer> create(hybridlab::Section& s,
                                         const hybridlab::MixerContext& ctx) {
  const int64_t width = s.get<int64_t>("width", ctx.d_model);
  const double decay = s.get<double>("decay", 0.9);
  s.check(width >= 1, "width", "must be >= 1");
  s.check(decay > 0 && decay < 1, "decay", "must be in (0, 1)");
  s.done();  // reports unknown keys and every problem above at its file:line
  return std::make_shared<Ema>(ctx.d_model, width, decay);
}

}  // namespace

HYBRIDLAB_MIXER_PLUGIN("ema", 'E', "1.0", "per-channel exponential moving average (MEGA's EMA)",
                       create)
