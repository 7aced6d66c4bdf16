// The chunked gated delta rule, forward only, head by head on raw CPU buffers: the same WY/UT
// algorithm as chunk_gated_delta_rule_torch (gated_deltanet_kernels.cpp), with each chunk's
// blocks (64×64, 64×d_k, 64×d_v) kept in cache and handed straight to BLAS, so the per-op cost of
// LibTorch (dispatch, allocation, one BLAS call per batch entry) disappears. Inputs are read in
// place through their strides (the layer's [B,T,H,D] projections need no transposing copy), the
// output is written as [B,T,H,V] (what the output norm reads), and a short last chunk is
// computed at its own length instead of being padded.

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <vector>

#include "layers/kernels/cpu_blas.h"
#include "layers/kernels/cpu_parallel.h"
#include "layers/kernels/cpu_vector.h"
#include "layers/kernels/gated_deltanet_chunk_cpu.h"
#include "layers/kernels/gated_deltanet_kernels.h"

namespace hybridlab {

namespace {

// One (batch, value head)'s inputs and outputs. Row t of q, k, v, o starts at t·ld (elements
// within a row are contiguous); g and beta step by sg per token. q and k belong to the key head
// this value head reads. h [K, V] contiguous: read as the initial state, overwritten with the
// final one. When not null, hs [N,K,V] receives the state entering each chunk, vn [T,V] the
// pseudo-values and blocks [N,3,C,C] each chunk's T, P and (K Kᵀ) ⊙ D (what the backward needs).
template <class S>
struct HeadView {
  const S *q, *k, *v, *g, *beta;
  S *o, *h;
  int64_t ldq, ldk, ldv, ldo, sg, sb;
  S *hs = nullptr, *vn = nullptr, *blocks = nullptr;
};

// One worker's scratch for one chunk; reused across chunks and heads.
template <class S>
struct ChunkScratch {
  std::vector<S> decay, A, QK, U, QH, Kt, Xt, Tinv, alpha, eg, to_end, b;
  ChunkScratch(int64_t C, int64_t K, int64_t V)
      : decay(C * C),
        A(C * C),
        QK(C * C),
        U(C * V),
        QH(C * V),
        Kt(K * C),
        Xt(K * C),
        Tinv(C * C),
        alpha(C),
        eg(C),
        to_end(C),
        b(C) {}
};

// One head, all chunks. Within a chunk of n ≤ C tokens, i indexes rows (tokens) and j columns;
// every [·,C] scratch block has row stride C. All GEMMs run untransposed (OpenBLAS's small-matrix
// kernels cover that case best).
template <class S>
inline __attribute__((always_inline)) void chunk_one_head(const HeadView<S>& x, int64_t T,
                                                          int64_t C, int64_t K, int64_t V, S scale,
                                                          ChunkScratch<S>& w) {
  S* D = w.decay.data();    // [n,n] e^{Γ_i − Γ_j}, lower triangle incl. diagonal
  S* A = w.A.data();        // [n,n] K Kᵀ, then the gated Gram matrix
  S* QK = w.QK.data();      // [n,n] s·Q Kᵀ, then ⊙ D
  S* U = w.U.data();        // [n,V] K h, then diag(β)(V − diag(e^Γ) K h), then v_new
  S* QH = w.QH.data();      // [n,V] s·Q h
  S* Kt = w.Kt.data();      // [K,n] Kᵀ
  S* Xt = w.Xt.data();      // [K,n] (diag(e^{Γ_n − Γ}) K)ᵀ
  S* Tinv = w.Tinv.data();  // [n,n] (I + A)⁻¹
  S* h = x.h;
  for (int64_t t0 = 0; t0 < T; t0 += C) {
    const int64_t n = std::min(C, T - t0);
    const S* qn = x.q + t0 * x.ldq;
    const S* kn = x.k + t0 * x.ldk;
    const S* vn = x.v + t0 * x.ldv;
    S* on = x.o + t0 * x.ldo;

    // α_i, β_i, e^{Γ_i}, e^{Γ_n − Γ_i} and D_ij = e^{Γ_i − Γ_j} (Γ: chunk-local cumulative log
    // decay), every one a product of the α's.
    const S* gn = x.g + t0 * x.sg;
    const S* betan = x.beta + t0 * x.sb;
    detail::chunk_decays(gn, x.sg, betan, x.sb, n, C, w.alpha.data(), w.b.data(), w.eg.data(),
                         w.to_end.data(), D);
    const S chunk_decay = w.eg[n - 1];
    if (x.hs) std::copy(h, h + K * V, x.hs + (t0 / C) * K * V);
    for (int64_t i = 0; i < n; ++i) {
      const S* ki = kn + i * x.ldk;
      const S t = w.to_end[i];
      for (int64_t d = 0; d < K; ++d) {
        Kt[d * C + i] = ki[d];
        Xt[d * C + i] = t * ki[d];
      }
    }

    cpu::gemm<S>(false, false, n, n, K, 1, kn, x.ldk, Kt, C, 0, A, C);       // K Kᵀ
    cpu::gemm<S>(false, false, n, n, K, scale, qn, x.ldq, Kt, C, 0, QK, C);  // s·Q Kᵀ
    cpu::gemm<S>(false, false, n, V, K, 1, kn, x.ldk, h, V, 0, U, V);        // K h
    cpu::gemm<S>(false, false, n, V, K, scale, qn, x.ldq, h, V, 0, QH, V);   // s·Q h

    // A_ij = β_i (k_i·k_j) D_ij for j < i; (k_i·k_j) D_ij kept for the backward.
    S* blocks = x.blocks ? x.blocks + (t0 / C) * detail::kChunkBlocks * C * C : nullptr;
    S* gram_decay = blocks ? blocks + detail::kBlockGramDecay * C * C : nullptr;
    for (int64_t i = 1; i < n; ++i) {
      for (int64_t j = 0; j < i; ++j) A[i * C + j] *= D[i * C + j];
      if (gram_decay) std::copy(A + i * C, A + i * C + i, gram_decay + i * C);
      for (int64_t j = 0; j < i; ++j) A[i * C + j] *= w.b[i];
    }
    // v_new = U − W h with U = T diag(β) V, W = T diag(β e^Γ) K and T = (I + A)⁻¹, computed as
    // T · diag(β)(V − diag(e^Γ) K h).
    for (int64_t i = 0; i < n; ++i) {
      const S b = w.b[i], e = w.eg[i];
      const S* vi = vn + i * x.ldv;
      for (int64_t d = 0; d < V; ++d) U[i * V + d] = b * (vi[d] - e * U[i * V + d]);
    }
    // T = (I + A)⁻¹ by a unit lower-triangular solve on the identity, then v_new = T · rhs.
    for (int64_t i = 0; i < n; ++i) {
      std::fill(Tinv + i * C, Tinv + i * C + n, S(0));
      Tinv[i * C + i] = 1;
    }
    cpu::trsm_unit_lower<S>(n, n, A, C, Tinv, C);
    if (blocks) {
      for (int64_t i = 0; i < n; ++i) {
        std::copy(Tinv + i * C, Tinv + i * C + n, blocks + detail::kBlockTinv * C * C + i * C);
      }
    }
    cpu::trmm_unit_lower<S>(n, V, Tinv, C, U, V);  // U ← T U = v_new
    S* VN = U;
    if (x.vn) std::copy(VN, VN + n * V, x.vn + t0 * V);

    // o = diag(e^Γ) s·Q h + (s·Q Kᵀ ⊙ D) v_new.
    for (int64_t i = 0; i < n; ++i) {
      const S e = w.eg[i];
      S* oi = on + i * x.ldo;
      for (int64_t d = 0; d < V; ++d) oi[d] = e * QH[i * V + d];
      for (int64_t j = 0; j <= i; ++j) QK[i * C + j] *= D[i * C + j];
      std::fill(QK + i * C + i + 1, QK + i * C + n, S(0));
    }
    if (blocks) {
      for (int64_t i = 0; i < n; ++i) {
        std::copy(QK + i * C, QK + i * C + n, blocks + detail::kBlockP * C * C + i * C);
      }
    }
    cpu::gemm<S>(false, false, n, V, n, 1, QK, C, VN, V, 1, on, x.ldo);

    // h ← e^{Γ_n} h + (diag(e^{Γ_n − Γ}) K)ᵀ v_new.
    cpu::gemm<S>(false, false, K, V, n, 1, Xt, C, VN, V, chunk_decay, h, V);
  }
}

HYBRIDLAB_VECTOR_CLONES
void chunk_one_head_any(const HeadView<float>& x, int64_t T, int64_t C, int64_t K, int64_t V,
                        float scale, ChunkScratch<float>& w) {
  chunk_one_head<float>(x, T, C, K, V, scale, w);
}

HYBRIDLAB_VECTOR_CLONES
void chunk_one_head_any(const HeadView<double>& x, int64_t T, int64_t C, int64_t K, int64_t V,
                        double scale, ChunkScratch<double>& w) {
  chunk_one_head<double>(x, T, C, K, V, scale, w);
}

}  // namespace

namespace detail {

torch::Tensor rows_unit_stride(const torch::Tensor& x, torch::ScalarType dt) {
  torch::Tensor y = x.to(dt);
  return y.stride(-1) == 1 ? y : y.contiguous();
}

ChunkCpuForward chunk_gated_delta_forward_cpu(const torch::Tensor& q_in, const torch::Tensor& k_in,
                                              const torch::Tensor& v_in, const torch::Tensor& g_in,
                                              const torch::Tensor& beta_in, double scale,
                                              const torch::Tensor& h0, int64_t chunk_size,
                                              bool save) {
  const auto dt = v_in.scalar_type();
  const int64_t B = q_in.size(0), Hk = q_in.size(1), T = q_in.size(2), K = q_in.size(3);
  const int64_t H = v_in.size(1), V = v_in.size(3), C = chunk_size, N = (T + C - 1) / C;
  const auto opts = v_in.options();
  ChunkCpuForward r;
  r.state = h0.defined() ? h0.to(dt).clone(at::MemoryFormat::Contiguous)
                         : torch::zeros({B, H, K, V}, opts);
  if (save) {
    r.h_in = torch::empty({B, H, N, K, V}, opts);
    r.v_new = torch::empty({B, H, T, V}, opts);
    r.blocks = torch::empty({B, H, N, kChunkBlocks, C, C}, opts);
  }
  r.o = torch::empty({B, T, H, V}, opts);
  if (T == 0) return r;
  const torch::Tensor q = rows_unit_stride(q_in, dt), k = rows_unit_stride(k_in, dt);
  const torch::Tensor v = rows_unit_stride(v_in, dt);
  const torch::Tensor g = g_in.to(dt), beta = beta_in.to(dt);
  torch::Tensor& o = r.o;
  torch::Tensor& h = r.state;

  AT_DISPATCH_FLOATING_TYPES(dt, "chunk_gated_delta_rule_cpu", [&] {
    // Heads are independent: one worker per range of (batch, value head) pairs, each calling
    // BLAS on its own thread.
    const cpu::SingleThreadedBlas single_threaded_blas;
    cpu::parallel_for(0, B * H, 1, [&](int64_t begin, int64_t end) {
      ChunkScratch<scalar_t> scratch(C, K, V);
      for (int64_t bh = begin; bh < end; ++bh) {
        const int64_t b = bh / H, j = bh % H, kh = j / (H / Hk);  // value head j reads key head kh
        HeadView<scalar_t> x{q.data_ptr<scalar_t>() + b * q.stride(0) + kh * q.stride(1),
                             k.data_ptr<scalar_t>() + b * k.stride(0) + kh * k.stride(1),
                             v.data_ptr<scalar_t>() + b * v.stride(0) + j * v.stride(1),
                             g.data_ptr<scalar_t>() + b * g.stride(0) + j * g.stride(1),
                             beta.data_ptr<scalar_t>() + b * beta.stride(0) + j * beta.stride(1),
                             o.data_ptr<scalar_t>() + b * o.stride(0) + j * o.stride(2),
                             h.data_ptr<scalar_t>() + bh * K * V,
                             q.stride(2),
                             k.stride(2),
                             v.stride(2),
                             o.stride(1),
                             g.stride(2),
                             beta.stride(2)};
        if (save) {
          x.hs = r.h_in.data_ptr<scalar_t>() + bh * N * K * V;
          x.vn = r.v_new.data_ptr<scalar_t>() + bh * T * V;
          x.blocks = r.blocks.data_ptr<scalar_t>() + bh * N * kChunkBlocks * C * C;
        }
        chunk_one_head_any(x, T, C, K, V, static_cast<scalar_t>(scale), scratch);
      }
    });
  });
  return r;
}

}  // namespace detail

GatedDeltaResult chunk_gated_delta_rule_cpu(const torch::Tensor& q_in, const torch::Tensor& k_in,
                                            const torch::Tensor& v_in, const torch::Tensor& g_in,
                                            const torch::Tensor& beta_in, double scale,
                                            const torch::Tensor& h0, int64_t chunk_size) {
  TORCH_CHECK(chunk_size > 0, "chunk_gated_delta_rule_cpu: chunk_size must be > 0, got ",
              chunk_size);
  TORCH_CHECK(cpu::cpu_floating({q_in, k_in, v_in, g_in, beta_in, h0}),
              "chunk_gated_delta_rule_cpu: fp32/fp64 CPU tensors only, got ", v_in.device(), " ",
              v_in.scalar_type());
  TORCH_CHECK(!cpu::grad_needed({q_in, k_in, v_in, g_in, beta_in, h0}),
              "chunk_gated_delta_rule_cpu: forward only (no autograd); use "
              "chunk_gated_delta_rule when gradients are needed");
  check_gated_delta_shapes("chunk_gated_delta_rule_cpu", q_in, k_in, v_in, g_in, beta_in, h0);
  detail::ChunkCpuForward r = detail::chunk_gated_delta_forward_cpu(
      q_in, k_in, v_in, g_in, beta_in, scale, h0, chunk_size, /*save=*/false);
  return {r.o.transpose(1, 2), r.state};
}

}  // namespace hybridlab
