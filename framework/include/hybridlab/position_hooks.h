#pragma once
// The positional-scheme hooks as the layers call them: each output checked against the shape,
// dtype and device its caller needs before it is used. LibTorch would broadcast a [1,Tq,Tk] bias
// over the heads, convert a double tensor without a word, or fail deep inside with a message that
// does not name the plugin; these throw PluginError naming the scheme, the hook, what it should
// have returned and what it returned. A check compares a few integers: it runs on every call.

#include <torch/types.h>

#include <utility>

#include "hybridlab/position.h"

namespace hybridlab {

/// embed: x [B,T,D], pos [T] -> [B,T,D] of x's dtype and device.
torch::Tensor checked_embed(PositionScheme& s, const torch::Tensor& x, const torch::Tensor& pos);

/// rotate: q [B,H,Tq,Dh], k [B,Hkv,Tk,Dh] -> the same shapes, dtypes and device.
std::pair<torch::Tensor, torch::Tensor> checked_rotate(PositionScheme& s, const torch::Tensor& q,
                                                       const torch::Tensor& k,
                                                       const torch::Tensor& q_pos,
                                                       const torch::Tensor& k_pos);

/// logit_bias: q_pos [Tq], k_pos [Tk] -> [heads,Tq,Tk] of dtype `dtype` or `alt` (the layer's
/// dtype, or the float32 of scores computed above a half-precision model), on `device`.
torch::Tensor checked_logit_bias(PositionScheme& s, const torch::Tensor& q_pos,
                                 const torch::Tensor& k_pos, int64_t heads, c10::ScalarType dtype,
                                 c10::ScalarType alt, const torch::Device& device);

/// relative_logits: q [B,H,Tq,Dh] -> [B,H,Tq,Tk] of q's dtype or `alt`, on q's device.
torch::Tensor checked_relative_logits(PositionScheme& s, const torch::Tensor& q,
                                      const torch::Tensor& q_pos, const torch::Tensor& k_pos,
                                      c10::ScalarType alt);

/// relative_values: probs [B,H,Tq,Tk] -> undefined (no value table) or [B,H,Tq,head_dim] of
/// probs' dtype or `alt`, on probs' device.
torch::Tensor checked_relative_values(PositionScheme& s, const torch::Tensor& probs,
                                      const torch::Tensor& q_pos, const torch::Tensor& k_pos,
                                      int64_t head_dim, c10::ScalarType alt);

/// data_bias (API v2): x [B,T,D], pos [T], state (undefined or the previous call's) -> query
/// and key terms, each [B,heads,T] of x's dtype or float32 on x's device; a state, if any, on
/// x's device.
DataBias checked_data_bias(PositionScheme& s, const torch::Tensor& x, const torch::Tensor& pos,
                           const torch::Tensor& state, int64_t heads);

/// content_bias (API v3): q [B,H,Tq,Dh], logits [B,H,Tq,Tk] -> [B,H,Tq,Tk] of logits' dtype on
/// its device.
torch::Tensor checked_content_bias(PositionScheme& s, const torch::Tensor& q,
                                   const torch::Tensor& logits, const torch::Tensor& q_pos,
                                   const torch::Tensor& k_pos, const torch::Tensor& visible);

}  // namespace hybridlab
