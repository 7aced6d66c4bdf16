// The chunked gated delta rule, forward only, head by head on raw CPU buffers: the same WY/UT
// algorithm as chunk_gated_delta_rule's tensor form (gated_deltanet_kernels.cpp), with each
// chunk's blocks (64×64, 64×d_k, 64×d_v) kept in cache and handed straight to BLAS, so the
// per-op cost of LibTorch (dispatch, allocation, one BLAS call per batch entry) disappears.

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "layers/cpu_blas.h"
#include "layers/cpu_vector.h"
#include "layers/gated_deltanet_kernels.h"

namespace hybridlab {

namespace {

// Values below the smallest normal number are set to 0: decays that small contribute nothing,
// and denormal operands slow every later multiply-add many times over.
template <class S>
S flush(S x) {
  return x < std::numeric_limits<S>::min() ? S(0) : x;
}

// One head's inputs and outputs, contiguous: q, k [N·C, K] (q already scaled), kt [N, K, C]
// (each chunk's Kᵀ), v [N·C, V], g, beta [N·C]; o [N·C, V] written; h [K, V] read (the initial
// state) and overwritten (the final state).
template <class S>
struct HeadBuffers {
  const S *q, *k, *kt, *v, *g, *beta;
  S *o, *h;
};

// One head's scratch for one chunk; reused across the chunks and heads of one worker.
template <class S>
struct ChunkScratch {
  std::vector<S> decay, A, QK, U, QH, Xt, alpha, eg, to_end, Tinv, VN;
  ChunkScratch(int64_t C, int64_t K, int64_t V)
      : decay(C * C), A(C * C), QK(C * C), U(C * V), QH(C * V), Xt(K * C), alpha(C), eg(C),
        to_end(C), Tinv(C * C), VN(C * V) {}
};

// One head, all chunks. Shapes in comments are per chunk; i indexes rows (tokens), j columns.
// Every GEMM runs untransposed (OpenBLAS's small-matrix kernels cover that case best).
template <class S>
inline __attribute__((always_inline)) void chunk_one_head(const HeadBuffers<S>& x, int64_t N,
                                                          int64_t C, int64_t K, int64_t V,
                                                          ChunkScratch<S>& w) {
  S* D = w.decay.data();  // [C,C] e^{Γ_i − Γ_j}, lower triangle incl. diagonal
  S* A = w.A.data();      // [C,C] K Kᵀ, then the gated Gram matrix
  S* QK = w.QK.data();    // [C,C] Q Kᵀ, then (Q Kᵀ) ⊙ D
  S* U = w.U.data();      // [C,V] K h, then v_new
  S* QH = w.QH.data();    // [C,V] Q h
  S* Xt = w.Xt.data();    // [K,C] (diag(e^{Γ_C − Γ}) K)ᵀ
  S* Tinv = w.Tinv.data();
  S* VN = w.VN.data();
  S* h = x.h;
  for (int64_t n = 0; n < N; ++n) {
    const S* qn = x.q + n * C * K;
    const S* kn = x.k + n * C * K;
    const S* Kt = x.kt + n * K * C;
    const S* vn = x.v + n * C * V;
    const S* gn = x.g + n * C;
    const S* bn = x.beta + n * C;
    S* on = x.o + n * C * V;

    // α_i, e^{Γ_i} = Π_{s≤i} α_s and e^{Γ_C − Γ_i} = Π_{s>i} α_s (Γ: chunk-local cumulative log
    // decay). Every decay below is a product of the α's, as in the recurrent form.
    for (int64_t i = 0; i < C; ++i) w.alpha[i] = std::exp(gn[i]);
    w.eg[0] = w.alpha[0];
    for (int64_t i = 1; i < C; ++i) w.eg[i] = flush(w.eg[i - 1] * w.alpha[i]);
    w.to_end[C - 1] = 1;
    for (int64_t i = C - 2; i >= 0; --i) w.to_end[i] = flush(w.to_end[i + 1] * w.alpha[i + 1]);
    const S chunk_decay = w.eg[C - 1];
    // D_ij = e^{Γ_i − Γ_j} = Π_{j<s≤i} α_s for j ≤ i, never a ratio of two cumulative decays;
    // row by row: D_i,: = α_i D_{i−1},: (j < i), D_ii = 1.
    D[0] = 1;
    for (int64_t i = 1; i < C; ++i) {
      const S a = w.alpha[i];
      const S* prev = D + (i - 1) * C;
      S* Di = D + i * C;
      for (int64_t j = 0; j < i; ++j) Di[j] = flush(a * prev[j]);
      Di[i] = 1;
    }

    // Kᵀ [K,C] and (diag(e^{Γ_C − Γ}) K)ᵀ: the GEMMs below then all run untransposed.
    for (int64_t d = 0; d < K; ++d) {
      for (int64_t i = 0; i < C; ++i) Xt[d * C + i] = w.to_end[i] * Kt[d * C + i];
    }
    cpu::gemm<S>(false, false, C, C, K, 1, kn, K, Kt, C, 0, A, C);  // [C,C] = K Kᵀ
    cpu::gemm<S>(false, false, C, C, K, 1, qn, K, Kt, C, 0, QK, C);  // [C,C] = Q Kᵀ
    cpu::gemm<S>(false, false, C, V, K, 1, kn, K, h, V, 0, U, V);   // [C,V] = K h
    cpu::gemm<S>(false, false, C, V, K, 1, qn, K, h, V, 0, QH, V);  // [C,V] = Q h

    // A_ij = β_i (k_i·k_j) D_ij for j < i; the solve reads only the strictly lower part.
    for (int64_t i = 1; i < C; ++i) {
      for (int64_t j = 0; j < i; ++j) A[i * C + j] *= bn[i] * D[i * C + j];
    }
    // Pseudo-values v_new = U − W h with U = T diag(β) V, W = T diag(β e^Γ) K, T = (I + A)⁻¹,
    // computed as one solve (I + A) v_new = diag(β)(V − diag(e^Γ) K h): T is never formed.
    for (int64_t i = 0; i < C; ++i) {
      const S b = bn[i], e = w.eg[i];
      for (int64_t d = 0; d < V; ++d) U[i * V + d] = b * (vn[i * V + d] - e * U[i * V + d]);
    }
    // T = (I + A)⁻¹ row by row, T_i = e_i − Σ_{m<i} A_im T_m (T_m is zero past column m), then
    // v_new = T Y by one GEMM.
    std::fill(Tinv, Tinv + C * C, S(0));
    for (int64_t i = 0; i < C; ++i) {
      S* __restrict Ti = Tinv + i * C;
      const S* Ai = A + i * C;
      for (int64_t m = 0; m < i; ++m) {
        const S a = -Ai[m];
        const S* __restrict Tm = Tinv + m * C;
        for (int64_t j = 0; j <= m; ++j) Ti[j] += a * Tm[j];
      }
      Ti[i] = 1;
    }
    cpu::gemm<S>(false, false, C, V, C, 1, Tinv, C, U, V, 0, VN, V);

    // o = diag(e^Γ) Q h + (Q Kᵀ ⊙ D) v_new [C,V].
    for (int64_t i = 0; i < C; ++i) {
      const S e = w.eg[i];
      for (int64_t d = 0; d < V; ++d) on[i * V + d] = e * QH[i * V + d];
      for (int64_t j = 0; j <= i; ++j) QK[i * C + j] *= D[i * C + j];
      std::fill(QK + i * C + i + 1, QK + (i + 1) * C, S(0));
    }
    cpu::gemm<S>(false, false, C, V, C, 1, QK, C, VN, V, 1, on, V);

    // h ← e^{Γ_C} h + (diag(e^{Γ_C − Γ}) K)ᵀ v_new [K,V].
    cpu::gemm<S>(false, false, K, V, C, 1, Xt, C, VN, V, chunk_decay, h, V);
  }
}

HYBRIDLAB_VECTOR_CLONES
void chunk_one_head_any(const HeadBuffers<float>& x, int64_t N, int64_t C, int64_t K, int64_t V,
                        ChunkScratch<float>& w) {
  chunk_one_head<float>(x, N, C, K, V, w);
}

HYBRIDLAB_VECTOR_CLONES
void chunk_one_head_any(const HeadBuffers<double>& x, int64_t N, int64_t C, int64_t K, int64_t V,
                        ChunkScratch<double>& w) {
  chunk_one_head<double>(x, N, C, K, V, w);
}

}  // namespace

GatedDeltaResult chunk_gated_delta_rule_cpu(const torch::Tensor& q_in, const torch::Tensor& k_in,
                                            const torch::Tensor& v_in, const torch::Tensor& g_in,
                                            const torch::Tensor& beta_in, double scale,
                                            const torch::Tensor& h0, int64_t chunk_size) {
  TORCH_CHECK(chunk_size > 0, "chunk_gated_delta_rule_cpu: chunk_size must be > 0, got ",
              chunk_size);
  TORCH_CHECK(v_in.device().is_cpu(), "chunk_gated_delta_rule_cpu: CPU tensors only, got ",
              v_in.device());
  TORCH_CHECK(!cpu::grad_needed({q_in, k_in, v_in, g_in, beta_in, h0}),
              "chunk_gated_delta_rule_cpu: forward only (no autograd); use "
              "chunk_gated_delta_rule when gradients are needed");
  const GatedDeltaShapes s =
      check_gated_delta_shapes("chunk_gated_delta_rule_cpu", q_in, k_in, v_in, g_in, beta_in, h0);
  const auto dt = v_in.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
  const int64_t B = s.B, H = s.Hv, T = s.T, K = s.K, V = s.V, C = chunk_size;
  const int64_t N = (T + C - 1) / C, pad = N * C - T, BH = B * H;
  const auto opts = v_in.options().dtype(dt);
  torch::Tensor h = h0.defined() ? h0.to(dt).clone().contiguous() : torch::zeros({B, H, K, V}, opts);
  if (T == 0) return {torch::zeros({B, H, 0, V}, v_in.options()), h};

  // Contiguous [B,H,N·C,·] inputs, zero-padded (exactly neutral, as in the tensor form).
  auto prep = [&](const torch::Tensor& x, bool per_key_head) {
    torch::Tensor y = x.to(dt);
    if (per_key_head && H != s.Hk) y = y.repeat_interleave(H / s.Hk, 1);
    if (pad) {
      y = y.dim() == 4 ? torch::constant_pad_nd(y, {0, 0, 0, pad}) : torch::constant_pad_nd(y, {0, pad});
    }
    return y.contiguous();
  };
  const torch::Tensor q = prep(q_in * scale, true), k = prep(k_in, true), v = prep(v_in, false);
  const torch::Tensor g = prep(g_in, false), beta = prep(beta_in, false);
  const torch::Tensor kt = k.view({B, H, N, C, K}).transpose(-1, -2).contiguous();  // [B,H,N,K,C]
  torch::Tensor o = torch::empty({B, H, N * C, V}, opts);

  AT_DISPATCH_FLOATING_TYPES(o.scalar_type(), "chunk_gated_delta_rule_cpu", [&] {
    const int64_t TT = N * C;
    // Heads are independent: one worker per range of (batch, head) pairs, each calling BLAS on
    // its own thread.
    const cpu::SingleThreadedBlas single_threaded_blas;
    at::parallel_for(0, BH, 1, [&](int64_t begin, int64_t end) {
      ChunkScratch<scalar_t> scratch(C, K, V);
      for (int64_t bh = begin; bh < end; ++bh) {
        const HeadBuffers<scalar_t> x{q.data_ptr<scalar_t>() + bh * TT * K,
                                      k.data_ptr<scalar_t>() + bh * TT * K,
                                      kt.data_ptr<scalar_t>() + bh * TT * K,
                                      v.data_ptr<scalar_t>() + bh * TT * V,
                                      g.data_ptr<scalar_t>() + bh * TT,
                                      beta.data_ptr<scalar_t>() + bh * TT,
                                      o.data_ptr<scalar_t>() + bh * TT * V,
                                      h.data_ptr<scalar_t>() + bh * K * V};
        chunk_one_head_any(x, N, C, K, V, scratch);
      }
    });
  });
  if (pad) o = o.narrow(2, 0, T);
  return {o.to(v_in.scalar_type()), h};
}

}  // namespace hybridlab
