#include "model/autoencoder_head.h"

#include <torch/nn/functional/activation.h>

#include <cmath>
#include <stdexcept>
#include <string>

namespace hybridlab {

torch::Tensor sincos_positions(const torch::Tensor& positions, int64_t dim) {
  if (dim < 4) {
    throw std::invalid_argument("sincos_positions: dim " + std::to_string(dim) +
                                " is below 4 (two frequencies at least)");
  }
  const int64_t half = dim / 2;
  const double step = std::log(10000.0) / static_cast<double>(half - 1);
  const torch::Tensor freq = torch::exp(torch::arange(half, torch::kFloat) * -step);
  const torch::Tensor angle = positions.to(torch::kFloat).unsqueeze(1) * freq.unsqueeze(0);
  torch::Tensor table = torch::cat({torch::sin(angle), torch::cos(angle)}, 1);
  if (dim % 2 == 1) table = torch::cat({table, torch::zeros({table.size(0), 1})}, 1);
  return table;
}

AutoEncoderHead::AutoEncoderHead(int64_t d_model, int64_t vocab_size, double norm_eps,
                                 double init_std, bool fused_kernels)
    : d_model_(d_model), vocab_size_(vocab_size) {
  norm1_ = register_module("norm1", std::make_shared<RMSNorm>(d_model, norm_eps, fused_kernels));
  fc1_ = register_module("fc1", torch::nn::Linear(d_model, d_model));
  norm2_ = register_module("norm2", std::make_shared<RMSNorm>(d_model, norm_eps, fused_kernels));
  fc2_ = register_module("fc2", torch::nn::Linear(d_model, d_model));
  unembed_norm_ =
      register_module("unembed_norm", std::make_shared<RMSNorm>(d_model, norm_eps, fused_kernels));
  unembed_ = register_module("unembed", torch::nn::Linear(d_model, vocab_size));
  torch::NoGradGuard no_grad;
  for (torch::nn::Linear* l : {&fc1_, &fc2_, &unembed_}) {
    (*l)->weight.normal_(0.0, init_std);
    (*l)->bias.zero_();
  }
}

torch::Tensor AutoEncoderHead::forward(const torch::Tensor& h, const torch::Tensor& positions) {
  TORCH_CHECK(h.dim() == 3 && h.size(2) == d_model_, "autoencoder head: h must be [B,T,", d_model_,
              "], got ", h.sizes());
  TORCH_CHECK(positions.dim() == 1 && positions.size(0) == h.size(1),
              "autoencoder head: positions must be [T], got ", positions.sizes());
  const torch::Tensor encoding = h.select(1, h.size(1) - 1).unsqueeze(1);  // [B,1,D]
  torch::Tensor z = encoding + sincos_positions(positions.cpu(), d_model_).to(h.device());
  z = torch::gelu(fc1_->forward(norm1_->forward(z)));
  z = torch::gelu(fc2_->forward(norm2_->forward(z)));
  return unembed_->forward(unembed_norm_->forward(z));
}

double AutoEncoderHead::flops_per_token() const {
  const double d = static_cast<double>(d_model_), v = static_cast<double>(vocab_size_);
  return 2.0 * (2.0 * d * d + d * v);
}

}  // namespace hybridlab
