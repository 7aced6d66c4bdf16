#include "layers/kernels/path_attention.h"

#include <torch/torch.h>

#include <algorithm>
#include <vector>

namespace hybridlab {

namespace {

/// [B,H,T,...] → [B,H,n_chunks,C,...], zero-padded at the end of T.
torch::Tensor to_chunks(const torch::Tensor& x, int64_t chunk, int64_t n_chunks) {
  const int64_t pad = n_chunks * chunk - x.size(2);
  std::vector<int64_t> shape = x.sizes().vec();
  torch::Tensor y = x;
  if (pad > 0) {
    std::vector<int64_t> widths(2 * (x.dim() - 3), 0);  // last dims first, then T
    widths.push_back(0);
    widths.push_back(pad);
    y = torch::constant_pad_nd(x, widths, 0);
  }
  shape[2] = chunk;
  shape.insert(shape.begin() + 2, n_chunks);
  return y.reshape(shape);
}

/// T⁻¹ = (I + StrictTril(D W Wᵀ))⁻¹ D of each chunk (§3.1, the UT transform): W [...,C,Dh],
/// beta [...,C] → [...,C,C], lower triangular.
torch::Tensor chunk_t_inv(const torch::Tensor& W, const torch::Tensor& beta) {
  const int64_t C = W.size(-2);
  const torch::Tensor strict =
      (beta.unsqueeze(-1) * torch::matmul(W, W.transpose(-1, -2))).tril(-1);
  const torch::Tensor L = strict + torch::eye(C, W.options());
  return at::linalg_solve_triangular(L, torch::diag_embed(beta), /*upper=*/false);
}

/// The keys of each chunk carried by the transforms after them in the chunk:
/// K̃ = K − (T⁻¹ StrictTril(W Kᵀ))ᵀ W.
torch::Tensor chunk_key_suffix(const torch::Tensor& K, const torch::Tensor& W,
                               const torch::Tensor& t_inv) {
  const torch::Tensor wk = torch::matmul(W, K.transpose(-1, -2)).tril(-1);
  return K - torch::matmul(torch::matmul(t_inv, wk).transpose(-1, -2), W);
}

void check_segment(const torch::Tensor& k, const torch::Tensor& w, const torch::Tensor& beta,
                   const char* who) {
  TORCH_CHECK(k.dim() == 4 && w.sizes() == k.sizes(), who, ": k and w must be [B,H,T,Dh], got ",
              k.sizes(), " and ", w.sizes());
  TORCH_CHECK(beta.dim() == 3 && beta.sizes() == k.sizes().slice(0, 3), who,
              ": beta must be [B,H,T], got ", beta.sizes());
  TORCH_CHECK(k.scalar_type() == w.scalar_type() && k.scalar_type() == beta.scalar_type() &&
                  at::isFloatingType(k.scalar_type()),
              who, ": k, w and beta must share one floating dtype");
}

// Whether k_cached holds keys; throws c10::Error unless it is undefined, empty or [B,H,Tc,D].
bool has_cached_keys(const torch::Tensor& k_cached, int64_t B, int64_t H, int64_t D,
                     const char* who) {
  if (!k_cached.defined() || (k_cached.dim() == 4 && k_cached.size(2) == 0)) return false;
  TORCH_CHECK(k_cached.dim() == 4 && k_cached.size(0) == B && k_cached.size(1) == H &&
                  k_cached.size(3) == D,
              who, ": k_cached must be [", B, ",", H, ",Tc,", D, "], got ", k_cached.sizes());
  return true;
}

}  // namespace

PathChunks path_prepare(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& w,
                        const torch::Tensor& beta, int64_t chunk) {
  check_segment(k, w, beta, "path_prepare");
  TORCH_CHECK(q.sizes() == k.sizes() && q.scalar_type() == k.scalar_type(),
              "path_prepare: q must match k, got ", q.sizes(), " and ", k.sizes());
  TORCH_CHECK(chunk >= 1, "path_prepare: chunk must be >= 1");
  PathChunks p;
  p.length = q.size(2);
  p.chunk = std::clamp<int64_t>(chunk, 1, std::max<int64_t>(p.length, 1));
  p.n_chunks = (p.length + p.chunk - 1) / p.chunk;
  const torch::Tensor Q = to_chunks(q, p.chunk, p.n_chunks);
  const torch::Tensor K = to_chunks(k, p.chunk, p.n_chunks);
  const torch::Tensor W = to_chunks(w, p.chunk, p.n_chunks);
  const torch::Tensor t_inv = chunk_t_inv(W, to_chunks(beta, p.chunk, p.n_chunks));
  p.u = torch::matmul(t_inv, W);
  // tril keeps s <= i (H_i itself acts on every earlier key); StrictTril keeps t > j.
  const torch::Tensor qw = torch::matmul(Q, W.transpose(-1, -2)).tril();
  const torch::Tensor wk = torch::matmul(W, K.transpose(-1, -2)).tril(-1);
  p.intra =
      torch::matmul(Q, K.transpose(-1, -2)).tril() - torch::matmul(torch::matmul(qw, t_inv), wk);
  p.q_tilde = Q - torch::matmul(qw, p.u);
  p.k_tilde_w = torch::cat({chunk_key_suffix(K, W, t_inv), W}, -2);
  return p;
}

torch::Tensor path_block_scores(const PathChunks& p, const torch::Tensor& k_cached, int64_t q0,
                                int64_t q1) {
  const int64_t C = p.chunk;
  TORCH_CHECK(C >= 1 && q0 % C == 0 && q0 >= 0 && q0 < q1 && q1 <= p.length,
              "path_block_scores: need 0 <= q0 < q1 <= ", p.length, " with q0 a multiple of ", C,
              ", got ", q0, " and ", q1);
  const int64_t B = p.q_tilde.size(0), H = p.q_tilde.size(1), D = p.q_tilde.size(-1);
  const bool cached = has_cached_keys(k_cached, B, H, D, "path_block_scores");
  const int64_t b0 = q0 / C, b1 = (q1 + C - 1) / C, n_q = b1 - b0;
  // Tiles [B,H,pair,C,C], gathered at the end into the [query chunk, key chunk] grid: tile
  // (b, b − δ) comes from step δ (δ = 0: the chunk's own intra tile), upper tiles from a zero one.
  std::vector<torch::Tensor> tiles = {p.intra.narrow(2, b0, n_q)};
  std::vector<int64_t> first_pair = {0};  // index of step δ's first tile (query chunk max(b0, δ))
  int64_t n_pairs = n_q;
  torch::Tensor q_cur = p.q_tilde.narrow(2, b0, n_q);
  int64_t lo = b0;                    // first query chunk still scanning
  std::vector<torch::Tensor> q_full;  // each chunk's queries carried through the whole segment
  if (cached && b0 == 0) q_full.push_back(q_cur.narrow(2, 0, 1));
  for (int64_t delta = 1; delta < b1; ++delta) {
    const int64_t next_lo = std::max(b0, delta);
    q_cur = q_cur.narrow(2, next_lo - lo, b1 - next_lo);
    lo = next_lo;
    const int64_t n = b1 - lo, key0 = lo - delta;
    // One matmul: the scores on K̃ of chunk key0, then q·Wᵀ to carry q across that chunk.
    const torch::Tensor both =
        torch::matmul(q_cur, p.k_tilde_w.narrow(2, key0, n).transpose(-1, -2));
    tiles.push_back(both.narrow(-1, 0, C));
    first_pair.push_back(n_pairs);
    n_pairs += n;
    if (!cached && delta + 1 == b1) break;
    q_cur = q_cur - torch::matmul(both.narrow(-1, C, C), p.u.narrow(2, key0, n));
    if (cached && lo == delta) q_full.push_back(q_cur.narrow(2, 0, 1));
  }
  tiles.push_back(torch::zeros({B, H, 1, C, C}, p.q_tilde.options()));
  std::vector<int64_t> grid(static_cast<size_t>(n_q * b1), n_pairs);  // the zero tile
  for (int64_t r = 0; r < n_q; ++r) {
    for (int64_t c = 0; c <= b0 + r; ++c) {
      const int64_t delta = b0 + r - c;
      grid[static_cast<size_t>(r * b1 + c)] =
          first_pair[static_cast<size_t>(delta)] + b0 + r - std::max(b0, delta);
    }
  }
  const torch::Tensor index = torch::tensor(grid, torch::kLong).to(p.q_tilde.device());
  torch::Tensor scores = torch::cat(tiles, 2)
                             .index_select(2, index)
                             .view({B, H, n_q, b1, C, C})
                             .permute({0, 1, 2, 4, 3, 5})
                             .reshape({B, H, n_q * C, b1 * C})
                             .narrow(2, 0, q1 - q0)
                             .narrow(3, 0, q1);
  if (!cached) return scores;
  const torch::Tensor q_all =
      torch::cat(q_full, 2).reshape({B, H, n_q * C, D}).narrow(2, 0, q1 - q0);
  return torch::cat({torch::matmul(q_all, k_cached.transpose(-1, -2)), scores}, 3);
}

torch::Tensor path_transform_keys(const torch::Tensor& k_cached, const torch::Tensor& k,
                                  const torch::Tensor& w, const torch::Tensor& beta,
                                  int64_t chunk) {
  check_segment(k, w, beta, "path_transform_keys");
  TORCH_CHECK(chunk >= 1, "path_transform_keys: chunk must be >= 1");
  const int64_t B = k.size(0), H = k.size(1), T = k.size(2), D = k.size(3);
  const bool cached = has_cached_keys(k_cached, B, H, D, "path_transform_keys");
  if (T == 0) return cached ? k_cached : k;
  const int64_t C = std::clamp<int64_t>(chunk, 1, T), n_chunks = (T + C - 1) / C;
  const torch::Tensor W = to_chunks(w, C, n_chunks);
  const torch::Tensor t_inv = chunk_t_inv(W, to_chunks(beta, C, n_chunks));
  const torch::Tensor k_tilde = chunk_key_suffix(to_chunks(k, C, n_chunks), W, t_inv);
  // P_c = I − Wᵀ T⁻¹ W, each chunk's whole product [B,H,n_chunks,D,D].
  const torch::Tensor P =
      torch::eye(D, k.options()) - torch::matmul(torch::matmul(W.transpose(-1, -2), t_inv), W);
  // M = P_last ⋯ P_{c+1} while chunk c is visited, right to left; rows are carried as k M^T.
  torch::Tensor M = torch::eye(D, k.options()).expand({B, H, D, D});
  std::vector<torch::Tensor> out(static_cast<size_t>(n_chunks));
  for (int64_t c = n_chunks - 1; c >= 0; --c) {
    out[static_cast<size_t>(c)] = torch::matmul(k_tilde.select(2, c), M.transpose(-1, -2));
    M = torch::matmul(M, P.select(2, c));
  }
  torch::Tensor keys = torch::cat(out, 2).narrow(2, 0, T);
  if (!cached) return keys;
  return torch::cat({torch::matmul(k_cached, M.transpose(-1, -2)), keys}, 2);
}

}  // namespace hybridlab
