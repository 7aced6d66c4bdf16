#include "layers/mlp.h"

#include "layers/kernels/linear_cpu.h"

#include <torch/torch.h>

#include "layers/kernels/cpu_vector.h"
#include "layers/kernels/swiglu_cpu.h"

namespace hybridlab {

int64_t mlp_hidden_size(const MlpOptions& opts, int64_t d_model) {
  if (opts.intermediate_size > 0) return opts.intermediate_size;
  const int64_t raw = (8 * d_model + 2) / 3;
  const int64_t m = std::max<int64_t>(opts.multiple_of, 1);
  return (raw + m - 1) / m * m;
}

SwiGLU::SwiGLU(int64_t d_model, int64_t hidden, bool fused_kernels)
    : hidden_(hidden), fused_kernels_(fused_kernels) {
  using torch::nn::LinearOptions;
  gate_proj =
      register_module("gate_proj", torch::nn::Linear(LinearOptions(d_model, hidden).bias(false)));
  up_proj =
      register_module("up_proj", torch::nn::Linear(LinearOptions(d_model, hidden).bias(false)));
  down_proj =
      register_module("down_proj", torch::nn::Linear(LinearOptions(hidden, d_model).bias(false)));
}

torch::Tensor SwiGLU::forward(const torch::Tensor& x) {
  const torch::Tensor a = project(gate_proj, x, fused_kernels_);
  const torch::Tensor b = project(up_proj, x, fused_kernels_);
  if (fused_kernels_ && cpu::cpu_floating({a, b}) && cpu::grad_needed({a, b})) {
    return project(down_proj, swiglu_fused_cpu(a, b), fused_kernels_);
  }
  return project(down_proj, torch::silu(a) * b, fused_kernels_);
}

}  // namespace hybridlab
