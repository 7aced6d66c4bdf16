#pragma once
// The rotation every rotary scheme applies (RoFormer, Su et al. 2021, eq. 34): each channel pair
// (a, b) of a head turned by an angle, (a·c − b·s, b·c + a·s). Part of the positional SDK so that
// rotary plugins (rope, p_rope, xpos, ...) share one definition of the pairing.

#include <torch/torch.h>

#include <cstdint>

namespace hybridlab {

/// Rotates the first 2·P channels of x [..., T, D] by c, s [T, P] (cosines and sines, any
/// scaling folded in, broadcast over the leading dimensions) and passes the other D − 2·P
/// channels through. interleaved: pairs (2k, 2k+1) (RoFormer, GPT-J, x-transformers); otherwise
/// pairs (k, k + P) (GPT-NeoX / HF `rotate_half`). Returns x's shape and dtype. Throws c10::Error
/// when 2·P > D.
inline torch::Tensor rotate_pairs(const torch::Tensor& x, const torch::Tensor& c,
                                  const torch::Tensor& s, bool interleaved) {
  const int64_t h = c.size(-1), d = 2 * h, D = x.size(-1);
  TORCH_CHECK(d <= D, "rotate_pairs: ", d, " rotated channels of a ", D, "-channel head");
  torch::Tensor rotated;
  if (interleaved) {
    const torch::Tensor pairs = x.narrow(-1, 0, d).unflatten(-1, {h, 2});
    const torch::Tensor a = pairs.select(-1, 0), b = pairs.select(-1, 1);
    rotated = torch::stack({a * c - b * s, b * c + a * s}, -1).flatten(-2);
  } else {
    const torch::Tensor a = x.narrow(-1, 0, h), b = x.narrow(-1, h, h);
    rotated = torch::cat({a * c - b * s, b * c + a * s}, -1);
  }
  if (d == D) return rotated;
  return torch::cat({rotated, x.narrow(-1, d, D - d)}, -1);
}

}  // namespace hybridlab
