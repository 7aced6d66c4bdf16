#pragma once
// SwiGLU feed-forward block (Shazeer 2020, "GLU Variants Improve Transformer", eq. FFN_SwiGLU;
// the Llama / Qwen MLP): down(SiLU(gate(x)) ⊙ up(x)), no biases.

#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/types.h>

#include <cstdint>

namespace hybridlab {

/// The `model.mlp` section.
struct MlpOptions {
  /// Hidden width of the gate/up projections; 0 = round_up(8·d_model/3, multiple_of) (Llama).
  int64_t intermediate_size = 0;
  int64_t multiple_of = 64;  ///< rounding of the automatic width
};

/// The hidden width used for a model of width d_model.
int64_t mlp_hidden_size(const MlpOptions& opts, int64_t d_model);

/// The SwiGLU block. For fp32/fp64 CPU inputs that need gradients, the gating runs as
/// swiglu_fused_cpu (layers/kernels/swiglu_cpu.h); otherwise (and with fused_kernels false, the
/// reference) as LibTorch ops.
class SwiGLU : public torch::nn::Module {
 public:
  SwiGLU(int64_t d_model, int64_t hidden, bool fused_kernels = true);
  /// x [..., d_model] → [..., d_model].
  torch::Tensor forward(const torch::Tensor& x);
  int64_t hidden() const { return hidden_; }

 private:
  int64_t hidden_;
  bool fused_kernels_;
  torch::nn::Linear gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};
};

}  // namespace hybridlab
