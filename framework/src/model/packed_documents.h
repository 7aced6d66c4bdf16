#pragma once
// Packed rows cut at document boundaries: the layout that runs every document of a packed batch as
// its own row (Mixer's DocumentBoundaries::kSeparateRows, hybridlab/mixer.h), and the same layout
// for the state-reset knock-out (a boundary every w tokens).

#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <vector>

namespace hybridlab {

/// Pieces of similar length run together: each group is a [S_g, L_g] batch of pieces, each piece a
/// row from its first token, zero padded to the group's longest L_g.
struct PieceGroup {
  int64_t pieces = 0;    ///< S_g
  int64_t longest = 0;   ///< L_g
  torch::Tensor gather;  ///< [S_g·L_g] int64: flat index b·T + t of each slot, B·T for padding
};

/// Where the pieces (documents) of B packed rows of T tokens lie once each is its own row. The
/// pieces are sorted by length and cut into at most three groups so that the padding of short
/// pieces to the longest one stays small (a row holding two pieces would otherwise run as two
/// rows of T).
struct PackedDocuments {
  int64_t rows = 0;                ///< B
  int64_t length = 0;              ///< T
  int64_t pieces = 0;              ///< documents over all rows (a row's first token starts one)
  torch::Tensor starts;            ///< [B,T] bool: true at each piece's first token
  std::vector<PieceGroup> groups;  ///< non-empty, longest group first
  /// [B·T] int64: each token's slot in the groups' slots laid end to end (group g's slot s·L_g + j
  /// at offset Σ_{h<g} S_h·L_h).
  torch::Tensor place;

  /// x [B,T,...] → one [S_g,L_g,...] per group. Differentiable (index_select).
  std::vector<torch::Tensor> split(const torch::Tensor& x) const;
  /// One [S_g,L_g,...] per group → [B,T,...]: each token's output from its piece's row; padding
  /// is dropped. Differentiable.
  torch::Tensor merge(const std::vector<torch::Tensor>& ys) const;
  /// f applied to every group of x's pieces with positions 0..L_g−1 (int64 on x's device), the
  /// outputs merged back: what a layer sees when each document is alone.
  torch::Tensor map(const torch::Tensor& x,
                    const std::function<torch::Tensor(const torch::Tensor& pieces,
                                                      const torch::Tensor& positions)>& f) const;
};

/// The layout of `starts` [B,T] bool: true where a token begins a document (a row's first token
/// always begins one, whatever starts[b][0] says). Throws c10::Error unless starts is 2-D bool.
PackedDocuments packed_documents(const torch::Tensor& starts);

/// The group boundaries for pieces of `sorted` lengths (longest first): the indices where each
/// group after the first begins, chosen to minimise Σ_g S_g·L_g plus a quarter of the longest
/// length per extra group (one more mixer call), with at most three groups. Exposed for tests.
std::vector<size_t> piece_group_starts(const std::vector<int64_t>& sorted);

/// starts [B,T] bool with a boundary every `window` tokens (t % window == 0): the state-reset
/// knock-out's pieces. window > 0.
torch::Tensor window_starts(int64_t rows, int64_t length, int64_t window,
                            const torch::Device& device);

}  // namespace hybridlab
