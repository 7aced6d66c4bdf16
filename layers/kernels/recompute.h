#pragma once
// Recomputation in the backward (activation checkpointing: Chen et al. 2016, "Training Deep Nets
// with Sublinear Memory Cost", arXiv 1604.06174; the reentrant form of torch.utils.checkpoint): a
// block of work runs without autograd in the forward and again, under autograd, in the backward,
// so between the two only its inputs are kept. The attention kernels use it for query blocks whose
// scores have no tiled form (PaTH, CoPE, stick-breaking with a bias).

#include <torch/types.h>

#include <functional>
#include <vector>

namespace hybridlab {

/// A deterministic, side-effect-free function of tensors to one tensor.
using RecomputedFn = std::function<torch::Tensor(const std::vector<torch::Tensor>& inputs)>;

/// fn(inputs), computed without autograd, whose backward recomputes fn under autograd on detached
/// copies of `inputs` and differentiates that: memory between forward and backward is `inputs`
/// and the output. `params`: tensors fn reads directly rather than through `inputs` (a positional
/// scheme's parameters); their gradients flow through this node too. Every input must be defined;
/// inputs and params that do not require grad get none. Not twice differentiable (the backward
/// throws under create_graph). Throws c10::Error when an input is undefined or fn returns an
/// undefined tensor.
torch::Tensor recompute_in_backward(RecomputedFn fn, const std::vector<torch::Tensor>& inputs,
                                    const std::vector<torch::Tensor>& params);

}  // namespace hybridlab
