#include "model/packed_documents.h"

#include <torch/torch.h>

#include <algorithm>
#include <limits>
#include <numeric>
#include <vector>

namespace hybridlab {

namespace {

constexpr size_t kMaxGroups = 3;

// `lead` followed by the dims of x after its first two: the shape of x with [B,T] or [S,L]
// replaced.
std::vector<int64_t> with_trailing(std::vector<int64_t> lead, const torch::Tensor& x) {
  for (int64_t d = 2; d < x.dim(); ++d) lead.push_back(x.size(d));
  return lead;
}

std::vector<int64_t> to_vector(const torch::Tensor& t) {
  const torch::Tensor c = t.to(torch::kCPU, torch::kLong).contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

}  // namespace

std::vector<size_t> piece_group_starts(const std::vector<int64_t>& sorted) {
  const size_t S = sorted.size();
  if (S == 0) return {};
  const double penalty = static_cast<double>(sorted[0]) / 4;
  const auto cost = [&](size_t j, size_t i) {  // group [j, i) padded to its first (longest)
    return static_cast<double>(i - j) * static_cast<double>(sorted[j]);
  };
  // best[g][i]: the least cost of the first i pieces in g + 1 groups; from[g][i]: where the last
  // group begins.
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(kMaxGroups, std::vector<double>(S + 1, inf));
  std::vector<std::vector<size_t>> from(kMaxGroups, std::vector<size_t>(S + 1, 0));
  for (size_t i = 1; i <= S; ++i) best[0][i] = cost(0, i);
  for (size_t g = 1; g < kMaxGroups; ++g) {
    for (size_t i = g + 1; i <= S; ++i) {
      for (size_t j = g; j < i; ++j) {
        const double c = best[g - 1][j] + cost(j, i) + penalty;
        if (c < best[g][i]) best[g][i] = c, from[g][i] = j;
      }
    }
  }
  size_t groups = 0;
  for (size_t g = 1; g < kMaxGroups; ++g)
    if (best[g][S] < best[groups][S]) groups = g;
  std::vector<size_t> starts;
  for (size_t g = groups, i = S; g > 0; --g) {
    i = from[g][i];
    starts.push_back(i);
  }
  std::reverse(starts.begin(), starts.end());
  return starts;
}

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
  const std::vector<int64_t> lengths = to_vector(end - begin);
  // Pieces longest first (ties in order), cut into groups; each piece's first slot.
  std::vector<size_t> order(lengths.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return lengths[a] > lengths[b]; });
  std::vector<int64_t> sorted;
  for (size_t i : order) sorted.push_back(lengths[i]);
  std::vector<size_t> bounds = piece_group_starts(sorted);
  bounds.insert(bounds.begin(), 0);
  bounds.push_back(order.size());
  std::vector<int64_t> first_slot(lengths.size()), group_of(lengths.size());
  int64_t base = 0;
  for (size_t g = 0; g + 1 < bounds.size(); ++g) {
    PieceGroup group;
    group.pieces = static_cast<int64_t>(bounds[g + 1] - bounds[g]);
    group.longest = sorted[bounds[g]];
    for (size_t k = bounds[g]; k < bounds[g + 1]; ++k) {
      first_slot[order[k]] = base + static_cast<int64_t>(k - bounds[g]) * group.longest;
      group_of[order[k]] = static_cast<int64_t>(g);
    }
    base += group.pieces * group.longest;
    p.groups.push_back(group);
  }
  const torch::Tensor offset = torch::arange(n, lopt) - begin.index_select(0, piece);
  p.place =
      torch::tensor(first_slot, torch::kLong).to(lopt.device()).index_select(0, piece) + offset;
  const torch::Tensor token_group =
      torch::tensor(group_of, torch::kLong).to(lopt.device()).index_select(0, piece);
  int64_t group_base = 0;
  for (size_t g = 0; g < p.groups.size(); ++g) {
    PieceGroup& group = p.groups[g];
    const torch::Tensor mine = token_group == static_cast<int64_t>(g);
    group.gather = torch::full({group.pieces * group.longest}, n, lopt);
    group.gather.index_put_({p.place.masked_select(mine) - group_base},
                            torch::arange(n, lopt).masked_select(mine));
    group_base += group.pieces * group.longest;
  }
  return p;
}

std::vector<torch::Tensor> PackedDocuments::split(const torch::Tensor& x) const {
  TORCH_CHECK(x.dim() >= 2 && x.size(0) == rows && x.size(1) == length,
              "packed documents: expected [", rows, ",", length, ",...], got ", x.sizes());
  const torch::Tensor flat = x.reshape(with_trailing({rows * length}, x));
  const torch::Tensor padded = torch::cat({flat, x.new_zeros(with_trailing({1}, x))});
  std::vector<torch::Tensor> out;
  for (const PieceGroup& g : groups) {
    out.push_back(
        padded.index_select(0, g.gather).reshape(with_trailing({g.pieces, g.longest}, x)));
  }
  return out;
}

torch::Tensor PackedDocuments::merge(const std::vector<torch::Tensor>& ys) const {
  TORCH_CHECK(ys.size() == groups.size(), "packed documents: expected ", groups.size(),
              " groups, got ", ys.size());
  std::vector<torch::Tensor> flat;
  for (size_t g = 0; g < ys.size(); ++g) {
    const torch::Tensor& y = ys[g];
    TORCH_CHECK(y.dim() >= 2 && y.size(0) == groups[g].pieces && y.size(1) == groups[g].longest,
                "packed documents: expected group ", g, " as [", groups[g].pieces, ",",
                groups[g].longest, ",...], got ", y.sizes());
    flat.push_back(y.reshape(with_trailing({groups[g].pieces * groups[g].longest}, y)));
  }
  const torch::Tensor all = flat.size() == 1 ? flat[0] : torch::cat(flat);
  return all.index_select(0, place).reshape(with_trailing({rows, length}, ys[0]));
}

torch::Tensor PackedDocuments::map(
    const torch::Tensor& x,
    const std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&)>& f) const {
  std::vector<torch::Tensor> ys;
  const std::vector<torch::Tensor> pieces_of = split(x);
  for (size_t g = 0; g < groups.size(); ++g) {
    const torch::Tensor positions = torch::arange(
        groups[g].longest, torch::TensorOptions().dtype(torch::kLong).device(x.device()));
    ys.push_back(f(pieces_of[g], positions));
  }
  return merge(ys);
}

torch::Tensor window_starts(int64_t rows, int64_t length, int64_t window,
                            const torch::Device& device) {
  TORCH_CHECK(window > 0, "window_starts: window must be > 0, got ", window);
  const torch::Tensor t =
      torch::arange(length, torch::TensorOptions().dtype(torch::kLong).device(device));
  return (t.remainder(window) == 0).unsqueeze(0).expand({rows, length}).contiguous();
}

}  // namespace hybridlab
