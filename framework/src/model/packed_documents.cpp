#include "model/packed_documents.h"

#include <torch/torch.h>

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

torch::Tensor PackedDocuments::split(const torch::Tensor& x) const {
  TORCH_CHECK(x.dim() >= 2 && x.size(0) == rows && x.size(1) == length,
              "packed documents: expected [", rows, ",", length, ",...], got ", x.sizes());
  std::vector<int64_t> flat_shape{rows * length};
  std::vector<int64_t> out_shape{pieces, longest};
  for (int64_t d = 2; d < x.dim(); ++d) {
    flat_shape.push_back(x.size(d));
    out_shape.push_back(x.size(d));
  }
  std::vector<int64_t> pad_shape = flat_shape;
  pad_shape[0] = 1;
  const torch::Tensor padded = torch::cat({x.reshape(flat_shape), x.new_zeros(pad_shape)});
  return padded.index_select(0, gather).reshape(out_shape);
}

torch::Tensor PackedDocuments::merge(const torch::Tensor& y) const {
  TORCH_CHECK(y.dim() >= 2 && y.size(0) == pieces && y.size(1) == longest,
              "packed documents: expected [", pieces, ",", longest, ",...], got ", y.sizes());
  std::vector<int64_t> flat_shape{pieces * longest};
  std::vector<int64_t> out_shape{rows, length};
  for (int64_t d = 2; d < y.dim(); ++d) {
    flat_shape.push_back(y.size(d));
    out_shape.push_back(y.size(d));
  }
  return y.reshape(flat_shape).index_select(0, place).reshape(out_shape);
}

torch::Tensor window_starts(int64_t rows, int64_t length, int64_t window,
                            const torch::Device& device) {
  TORCH_CHECK(window > 0, "window_starts: window must be > 0, got ", window);
  const torch::Tensor t =
      torch::arange(length, torch::TensorOptions().dtype(torch::kLong).device(device));
  return (t.remainder(window) == 0).unsqueeze(0).expand({rows, length}).contiguous();
}

}  // namespace hybridlab
