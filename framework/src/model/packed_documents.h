#pragma once
// Packed rows cut at document boundaries: the layout that runs every document of a packed batch as
// its own row (Mixer's DocumentBoundaries::kSeparateRows, hybridlab/mixer.h), and the same layout
// for the state-reset knock-out (a boundary every w tokens).

#include <torch/types.h>

#include <cstdint>

namespace hybridlab {

/// Where the pieces (documents) of B packed rows of T tokens lie once each is its own row of a
/// [S, L] batch (S pieces, L the longest), left-aligned and zero padded at the end.
struct PackedDocuments {
  int64_t rows = 0;      ///< B
  int64_t length = 0;    ///< T
  int64_t pieces = 0;    ///< S: documents over all rows (a row's first token starts one)
  int64_t longest = 0;   ///< L: tokens of the longest piece
  torch::Tensor starts;  ///< [B,T] bool: true at each piece's first token (every row's first)
  torch::Tensor gather;  ///< [S·L] int64: flat index b·T + t of each slot, B·T for padding
  torch::Tensor place;   ///< [B·T] int64: flat slot s·L + j of each token

  /// x [B,T,...] → [S,L,...]: each piece a row from its first token, zeros after its end.
  /// Differentiable (index_select).
  torch::Tensor split(const torch::Tensor& x) const;
  /// y [S,L,...] → [B,T,...]: each token's output from its piece's row; padding is dropped.
  torch::Tensor merge(const torch::Tensor& y) const;
};

/// The layout of `starts` [B,T] bool: true where a token begins a document (a row's first token
/// always begins one, whatever starts[b][0] says). Throws c10::Error unless starts is 2-D bool.
PackedDocuments packed_documents(const torch::Tensor& starts);

/// starts [B,T] bool with a boundary every `window` tokens (t % window == 0): the state-reset
/// knock-out's pieces. window > 0.
torch::Tensor window_starts(int64_t rows, int64_t length, int64_t window,
                            const torch::Device& device);

}  // namespace hybridlab
