#include "model/packed_documents.h"

#include <torch/torch.h>

#include <vector>

namespace hybridlab {

PackedDocuments packed_documents(const torch::Tensor& starts_in) {
  TORCH_CHECK(starts_in.dim() == 2 && starts_in.scalar_type() == torch::kBool,
              "packed documents: starts must be [B,T] bool, got ", starts_in.sizes(), " ",
              starts_in.scalar_type());
  PackedDocuments p;
  p.rows = starts_in.size(0);
  p.length = starts_in.size(1);
  const auto lopt = torch::TensorOptions().dtype(torch::kLong).device(starts_in.device());
  p.starts = starts_in.clone();
  if (p.length > 0) p.starts.select(1, 0).fill_(true);
  const torch::Tensor flat = p.starts.reshape({-1});
  const int64_t n = flat.numel();
  // Piece of each token and the flat index where each piece begins; pieces never cross rows
  // because every row's first token begins one.
  const torch::Tensor piece = flat.to(torch::kLong).cumsum(0) - 1;
  const torch::Tensor begin = flat.nonzero().reshape({-1});
  p.pieces = begin.numel();
  const torch::Tensor end = torch::cat({begin.slice(0, 1), torch::full({1}, n, lopt)});
  p.longest = p.pieces ? (end - begin).max().item<int64_t>() : 0;
  const torch::Tensor offset = torch::arange(n, lopt) - begin.index_select(0, piece);
  p.place = piece * p.longest + offset;
  p.gather = torch::full({p.pieces * p.longest}, n, lopt);
  p.gather.index_put_({p.place}, torch::arange(n, lopt));
  return p;
}

namespace {

// `lead` followed by the dims of x after its first two: the shape of x with [B,T] or [S,L]
// replaced.
std::vector<int64_t> with_trailing(std::vector<int64_t> lead, const torch::Tensor& x) {
  for (int64_t d = 2; d < x.dim(); ++d) lead.push_back(x.size(d));
  return lead;
}

}  // namespace

torch::Tensor PackedDocuments::split(const torch::Tensor& x) const {
  TORCH_CHECK(x.dim() >= 2 && x.size(0) == rows && x.size(1) == length,
              "packed documents: expected [", rows, ",", length, ",...], got ", x.sizes());
  const torch::Tensor flat = x.reshape(with_trailing({rows * length}, x));
  const torch::Tensor padded = torch::cat({flat, x.new_zeros(with_trailing({1}, x))});
  return padded.index_select(0, gather).reshape(with_trailing({pieces, longest}, x));
}

torch::Tensor PackedDocuments::merge(const torch::Tensor& y) const {
  TORCH_CHECK(y.dim() >= 2 && y.size(0) == pieces && y.size(1) == longest,
              "packed documents: expected [", pieces, ",", longest, ",...], got ", y.sizes());
  return y.reshape(with_trailing({pieces * longest}, y))
      .index_select(0, place)
      .reshape(with_trailing({rows, length}, y));
}

torch::Tensor window_starts(int64_t rows, int64_t length, int64_t window,
                            const torch::Device& device) {
  TORCH_CHECK(window > 0, "window_starts: window must be > 0, got ", window);
  const torch::Tensor t =
      torch::arange(length, torch::TensorOptions().dtype(torch::kLong).device(device));
  return (t.remainder(window) == 0).unsqueeze(0).expand({rows, length}).contiguous();
}

}  // namespace hybridlab
