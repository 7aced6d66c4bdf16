#include "layers/norm.h"

#include <torch/torch.h>

namespace hybridlab {

namespace {
torch::Tensor rms_normalize(const torch::Tensor& x, double eps) {
  const torch::Tensor xs = x.scalar_type() == torch::kDouble ? x : x.to(torch::kFloat);
  return xs * torch::rsqrt(xs.pow(2).mean(-1, /*keepdim=*/true) + eps);
}
}  // namespace

RMSNorm::RMSNorm(int64_t dim, double eps) : dim_(dim), eps_(eps) {
  TORCH_CHECK(dim > 0, "RMSNorm: dim must be > 0, got ", dim);
  weight = register_parameter("weight", torch::ones({dim}));
}

torch::Tensor RMSNorm::forward(const torch::Tensor& x) {
  TORCH_CHECK(x.size(-1) == dim_, "RMSNorm: expected last dim ", dim_, ", got ", x.sizes());
  return (rms_normalize(x, eps_) * weight).to(x.scalar_type());
}

GatedRMSNorm::GatedRMSNorm(int64_t dim, double eps) : dim_(dim), eps_(eps) {
  TORCH_CHECK(dim > 0, "GatedRMSNorm: dim must be > 0, got ", dim);
  weight = register_parameter("weight", torch::ones({dim}));
}

torch::Tensor GatedRMSNorm::forward(const torch::Tensor& x, const torch::Tensor& z) {
  TORCH_CHECK(x.size(-1) == dim_ && z.sizes() == x.sizes(), "GatedRMSNorm: x ", x.sizes(), " z ",
              z.sizes(), " last dim ", dim_);
  const torch::Tensor n = rms_normalize(x, eps_) * weight;
  const torch::Tensor zf = z.scalar_type() == torch::kDouble ? z : z.to(torch::kFloat);
  return (n * torch::silu(zf)).to(x.scalar_type());
}

torch::Tensor l2_normalize(const torch::Tensor& x, double eps) {
  return x * torch::rsqrt(x.pow(2).sum(-1, /*keepdim=*/true) + eps);
}

}  // namespace hybridlab
