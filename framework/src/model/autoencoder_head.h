#pragma once
// The output head of MAD's AutoEncoder (Poli et al. 2024, arXiv 2403.17844 §3.1;
// athms/mad-lab@6e7e4c9 mad/model/auto_encoder.py with global_pool "last"): the mixer stack's
// last position is the row's only summary, and a position-wise MLP decodes every position from it.
// `model.head: autoencoder`; the compression task needs it (Task::autoencoder).

#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/types.h>

#include <memory>

#include "layers/norm.h"

namespace hybridlab {

/// Sinusoidal decoder positions as fairseq and MAD write them (posemb_sincos_1d): for
/// half = dim / 2 frequencies w_i = 10000^(-i / (half - 1)), row p is
/// [sin(p w_0) … sin(p w_{half-1}), cos(p w_0) … cos(p w_{half-1})], zero-padded to an odd dim.
/// positions [T] int64 → [T, dim] float32. Throws std::invalid_argument when dim < 4 (half - 1
/// would be zero).
torch::Tensor sincos_positions(const torch::Tensor& positions, int64_t dim);

/// Decoder: e = h[:, -1] (the residual stream at the last position, no final norm);
/// z_t = e + sincos(t); z = GELU(W2 RMSNorm(GELU(W1 RMSNorm(z_t)))) (D → D → D, with biases);
/// logits_t = U RMSNorm(z) + b_U. Linear weights are drawn N(0, init_std²), biases zero (MAD's
/// _init_weights).
class AutoEncoderHead : public torch::nn::Module {
 public:
  AutoEncoderHead(int64_t d_model, int64_t vocab_size, double norm_eps, double init_std,
                  bool fused_kernels);
  /// h [B,T,D] (the last block's output), positions [T] int64 → logits [B,T,V] float32.
  /// Throws c10::Error on other shapes.
  torch::Tensor forward(const torch::Tensor& h, const torch::Tensor& positions);
  /// Multiply-adds ×2 per decoded position: 2·(2·D² + D·V).
  double flops_per_token() const;

 private:
  int64_t d_model_, vocab_size_;
  std::shared_ptr<RMSNorm> norm1_, norm2_, unembed_norm_;
  torch::nn::Linear fc1_{nullptr}, fc2_{nullptr}, unembed_{nullptr};
};

}  // namespace hybridlab
