// The chunked gated delta rule's backward, head by head on raw CPU buffers (the forward's blocks,
// the same CBLAS calls), and the autograd Function that pairs it with the fused forward.
//
// Derivation (one head, one chunk of n tokens; notation of gated_deltanet_kernels.h and the
// reference notes §2.1; s the scale, γ_i = e^{Γ_i}, ρ_i = e^{Γ_{n−1} − Γ_i}, D the decay mask):
//   A = β⊙(K Kᵀ)⊙D (strictly lower), T = (I + A)⁻¹, W = T diag(βγ) K, U = T diag(β) V,
//   v_new = U − W h, O = s diag(γ) Q h + P v_new with P = s (Q Kᵀ) ⊙ D (diagonal included),
//   h' = γ_{n−1} h + (diag(ρ) K)ᵀ v_new.
// Given dO and dh' (the gradient of the state leaving the chunk), in reverse chunk order:
//   dv_new = Pᵀ dO + diag(ρ) K dh'
//   dh     = γ_{n−1} dh' + s (diag(γ) Q)ᵀ dO − (diag(βγ) K)ᵀ dṼ,   dṼ = Tᵀ dv_new
//   dQ     = s diag(γ) dO hᵀ + s (dO v_newᵀ ⊙ D) K
//   dA     = −dṼ v_newᵀ (strictly lower; dT = dU Ṽᵀ + dW K̃ᵀ with dW = −dv_new hᵀ collapses to it
//            because U − W h = v_new), dK̃ = −dṼ hᵀ for K̃ = diag(βγ) K, dV = diag(β) dṼ
//   dK     = s (dO v_newᵀ ⊙ D)ᵀ Q + diag(ρ) v_new dh'ᵀ + diag(βγ) dK̃ + (dG + dGᵀ) K,
//            dG = dA ⊙ β D (the Gram matrix's gradient)
//   dβ_i   = dṼ_i·v_i + γ_i dK̃_i·k_i + Σ_j dA_ij (k_i·k_j) D_ij
// fla (fla-org/flash-linear-attention@bc3b101d: fla/ops/common/chunk_delta_h.py for dh,
// chunk_o.py for dq/dk/dg, gated_delta_rule/wy_fast.py for the WY part) computes the same
// quantities on GPU tiles.
//
// The log-decay gradient is assembled per g_s directly rather than as a reverse cumulative sum of
// per-position terms with opposite signs: γ_i depends on g_s for s ≤ i, ρ_i for s > i, γ_{n−1}
// on every s of the chunk, D_ij for j < s ≤ i. So
//   dg_s = Σ_{i≥s} e_i + Σ_{i<s} r_i + c + Σ_{i≥s>j} X_ij,
// with e_i = γ_i ∂/∂γ_i (= q_i·dQ_inter,i + β_i γ_i dK̃_i·k_i), r_i = ρ_i ∂/∂ρ_i, c = γ_{n−1}⟨h,dh'⟩
// and X_ij = D_ij ∂/∂D_ij. Every term carries its decay factor, so under strong decay the
// gradient is small with a small error rather than an O(1) cancellation (the diagonal D_ii = 1
// never enters: QwenLM/FlashQLA PR #28 is the failure this avoids).

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

// One (batch, value head). Row t of q, k, v, d_o starts at t·ld (rows contiguous), g and beta
// step by sg and sb per token. hs [N,K,V] and vn [T,V] come from the forward. dq, dk [T,K] (row
// stride ldd_qk) are this value head's contributions (summed over the heads of a key group by the
// caller); dv [T,V] (row stride ldd_v); dg, dbeta step by sdg, sdb; dh [K,V]: the gradient of
// the final state on entry, of the initial state on exit.
template <class S>
struct HeadGrad {
  const S *q, *k, *v, *g, *beta, *hs, *vn, *blocks, *d_o;
  S *dq, *dk, *dv, *dg, *dbeta, *dh;
  int64_t ldq, ldk, ldv, ldo, sg, sb, ldd_qk, ldd_v, sdg, sdb;
};

template <class S>
struct BackScratch {
  std::vector<S> D, M, X, dA, dvn, dvt, dkt, Qg, Kb, Kr, alpha, b, eg, to_end, e, r, colsum, Rx;
  BackScratch(int64_t C, int64_t K, int64_t V)
      : D(C * C),
        M(C * C),
        X(C * C),
        dA(C * C),
        dvn(C * V),
        dvt(C * V),
        dkt(C * K),
        Qg(C * K),
        Kb(C * K),
        Kr(C * K),
        alpha(C),
        b(C),
        eg(C),
        to_end(C),
        e(C),
        r(C),
        colsum(C),
        Rx(C) {}
};

template <class S>
inline __attribute__((always_inline)) void backward_one_head(const HeadGrad<S>& x, int64_t T,
                                                             int64_t C, int64_t K, int64_t V,
                                                             S scale, BackScratch<S>& w) {
  S *D = w.D.data(), *M = w.M.data(), *X = w.X.data(), *dA = w.dA.data();
  S *dvn = w.dvn.data(), *dvt = w.dvt.data(), *dkt = w.dkt.data();
  S *Qg = w.Qg.data(), *Kb = w.Kb.data(), *Kr = w.Kr.data();
  S *alpha = w.alpha.data(), *b = w.b.data(), *eg = w.eg.data(), *to_end = w.to_end.data();
  S *e = w.e.data(), *r = w.r.data(), *colsum = w.colsum.data(), *Rx = w.Rx.data();
  S* dh = x.dh;
  const int64_t N = (T + C - 1) / C;
  for (int64_t c = N - 1; c >= 0; --c) {
    const int64_t t0 = c * C, n = std::min(C, T - t0);
    const S* qn = x.q + t0 * x.ldq;
    const S* kn = x.k + t0 * x.ldk;
    const S* vn_in = x.v + t0 * x.ldv;
    const S* don = x.d_o + t0 * x.ldo;
    const S* h = x.hs + c * K * V;  // state entering the chunk
    const S* vn = x.vn + t0 * V;    // v_new [n,V]
    S* dqn = x.dq + t0 * x.ldd_qk;
    S* dkn = x.dk + t0 * x.ldd_qk;
    S* dvn_out = x.dv + t0 * x.ldd_v;

    const S* gn = x.g + t0 * x.sg;
    const S* betan = x.beta + t0 * x.sb;
    detail::chunk_decays(gn, x.sg, betan, x.sb, n, C, alpha, b, eg, to_end, D);
    const S chunk_decay = eg[n - 1];

    // The forward's T = (I + A)⁻¹, P = s (Q Kᵀ) ⊙ D (lower incl. diagonal) and the decayed Gram
    // matrix GD = (K Kᵀ) ⊙ D (strictly lower), each [n,n] with row stride C.
    const S* blocks = x.blocks + c * detail::kChunkBlocks * C * C;
    const S* Tinv = blocks + detail::kBlockTinv * C * C;
    const S* P = blocks + detail::kBlockP * C * C;
    const S* GD = blocks + detail::kBlockGramDecay * C * C;

    // ---- the read-out O = s diag(γ) Q h + P v_new and the state update h' -------------------
    // M = dO v_newᵀ; its lower part ⊙ P gives the D-terms of dg, ⊙ D the intra-chunk dQ, dK.
    cpu::gemm<S>(false, true, n, n, V, 1, don, x.ldo, vn, V, 0, M, C);
    // Kr = diag(ρ) K, then dv_new = Pᵀ dO + Kr dh'.
    for (int64_t i = 0; i < n; ++i) {
      const S* ki = kn + i * x.ldk;
      for (int64_t d = 0; d < K; ++d) Kr[i * K + d] = to_end[i] * ki[d];
    }
    cpu::gemm<S>(true, false, n, V, n, 1, P, C, don, x.ldo, 0, dvn, V);
    cpu::gemm<S>(false, false, n, V, K, 1, Kr, K, dh, V, 1, dvn, V);
    // dK = diag(ρ) v_new dh'ᵀ; r_i = ρ_i ∂L/∂ρ_i = k_i · dK_i.
    cpu::gemm<S>(false, true, n, K, V, 1, vn, V, dh, V, 0, dkn, x.ldd_qk);
    for (int64_t i = 0; i < n; ++i) {
      S* dki = dkn + i * x.ldd_qk;
      for (int64_t d = 0; d < K; ++d) dki[d] *= to_end[i];
      r[i] = cpu::dot(kn + i * x.ldk, dki, K);
    }
    // dQ = s diag(γ) dO hᵀ; e_i (γ_i's share) starts as q_i · dQ_i.
    cpu::gemm<S>(false, true, n, K, V, scale, don, x.ldo, h, V, 0, dqn, x.ldd_qk);
    for (int64_t i = 0; i < n; ++i) {
      S* dqi = dqn + i * x.ldd_qk;
      for (int64_t d = 0; d < K; ++d) dqi[d] *= eg[i];
      e[i] = cpu::dot(qn + i * x.ldq, dqi, K);
    }
    // X = M ⊙ P (strictly lower: the D-terms of dg); M ← M ⊙ D (lower incl.), then
    // dQ += s M K and dK += s Mᵀ Q.
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < i; ++j) X[i * C + j] = M[i * C + j] * P[i * C + j];
      for (int64_t j = 0; j <= i; ++j) M[i * C + j] *= D[i * C + j];
      std::fill(M + i * C + i + 1, M + i * C + n, S(0));
    }
    cpu::gemm<S>(false, false, n, K, n, scale, M, C, kn, x.ldk, 1, dqn, x.ldd_qk);
    cpu::gemm<S>(true, false, n, K, n, scale, M, C, qn, x.ldq, 1, dkn, x.ldd_qk);

    // ---- the WY representation ---------------------------------------------------------------
    // dṼ = Tᵀ dv_new; dK̃ = −dṼ hᵀ; dA = −dṼ v_newᵀ (strictly lower part used).
    cpu::gemm<S>(true, false, n, V, n, 1, Tinv, C, dvn, V, 0, dvt, V);
    cpu::gemm<S>(false, true, n, K, V, -1, dvt, V, h, V, 0, dkt, K);
    cpu::gemm<S>(false, true, n, n, V, -1, dvt, V, vn, V, 0, dA, C);
    for (int64_t i = 0; i < n; ++i) {
      const S* ki = kn + i * x.ldk;
      const S bg = b[i] * eg[i];
      S* dki = dkn + i * x.ldd_qk;
      const S* dkti = dkt + i * K;
      const S kdk = cpu::dot(ki, dkti, K);
      for (int64_t d = 0; d < K; ++d) dki[d] += bg * dkti[d];
      e[i] += bg * kdk;
      // dβ_i, and dG = dA ⊙ βD in place of dA, mirrored: dA becomes dG + dGᵀ (zero diagonal;
      // row i's upper part is written by the rows after it, once its fill below is done).
      // X += dG ⊙ G.
      S db = cpu::dot(dvt + i * V, vn_in + i * x.ldv, V) + eg[i] * kdk;
      for (int64_t j = 0; j < i; ++j) {
        const S gd = GD[i * C + j];
        const S da = dA[i * C + j];
        db += da * gd;
        const S dg = da * b[i] * D[i * C + j];
        dA[i * C + j] = dg;
        dA[j * C + i] = dg;
        X[i * C + j] += da * b[i] * gd;  // dG ⊙ G = dA β D ⊙ G
      }
      std::fill(dA + i * C + i, dA + i * C + n, S(0));
      x.dbeta[(t0 + i) * x.sdb] = db;
      S* dvi = dvn_out + i * x.ldd_v;
      const S* dvti = dvt + i * V;
      for (int64_t d = 0; d < V; ++d) dvi[d] = b[i] * dvti[d];
    }
    // dK += (dG + dGᵀ) K, one GEMM.
    cpu::gemm<S>(false, false, n, K, n, 1, dA, C, kn, x.ldk, 1, dkn, x.ldd_qk);

    // ---- the log decays ----------------------------------------------------------------------
    const S c_term = chunk_decay * cpu::dot(h, dh, K * V);
    {
      // Σ_{i≥s} e_i as a suffix sum, Σ_{i<s} r_i as a prefix sum, and Σ_{i≥s>j} X_ij as
      // Σ_{j<s} (column suffix sums of X), rows added while s descends.
      for (int64_t i = n - 2; i >= 0; --i) e[i] += e[i + 1];
      std::fill(colsum, colsum + n, S(0));
      Rx[0] = 0;
      for (int64_t s = n - 1; s >= 1; --s) {
        const S* Xs = X + s * C;
        S acc = 0;
        for (int64_t j = 0; j < s; ++j) {
          colsum[j] += Xs[j];
          acc += colsum[j];
        }
        Rx[s] = acc;
      }
      S prefix_r = 0;
      for (int64_t s = 0; s < n; ++s) {
        x.dg[(t0 + s) * x.sdg] = e[s] + prefix_r + c_term + Rx[s];
        prefix_r += r[s];
      }
    }

    // ---- the state gradient entering the chunk -----------------------------------------------
    // dh ← γ_{n−1} dh' + s (diag(γ) Q)ᵀ dO − (diag(βγ) K)ᵀ dṼ.
    for (int64_t i = 0; i < n; ++i) {
      const S* qi = qn + i * x.ldq;
      const S* ki = kn + i * x.ldk;
      const S bg = b[i] * eg[i];
      for (int64_t d = 0; d < K; ++d) {
        Qg[i * K + d] = eg[i] * qi[d];
        Kb[i * K + d] = bg * ki[d];
      }
    }
    for (int64_t i = 0; i < K * V; ++i) dh[i] *= chunk_decay;
    cpu::gemm<S>(true, false, K, V, n, scale, Qg, K, don, x.ldo, 1, dh, V);
    cpu::gemm<S>(true, false, K, V, n, -1, Kb, K, dvt, V, 1, dh, V);
  }
}

HYBRIDLAB_VECTOR_CLONES
void backward_one_head_any(const HeadGrad<float>& x, int64_t T, int64_t C, int64_t K, int64_t V,
                           float scale, BackScratch<float>& w) {
  backward_one_head<float>(x, T, C, K, V, scale, w);
}

HYBRIDLAB_VECTOR_CLONES
void backward_one_head_any(const HeadGrad<double>& x, int64_t T, int64_t C, int64_t K, int64_t V,
                           double scale, BackScratch<double>& w) {
  backward_one_head<double>(x, T, C, K, V, scale, w);
}

}  // namespace

namespace detail {

ChunkCpuGrads chunk_gated_delta_backward_cpu(
    const torch::Tensor& q_in, const torch::Tensor& k_in, const torch::Tensor& v_in,
    const torch::Tensor& g_in, const torch::Tensor& beta_in, const torch::Tensor& h0, double scale,
    int64_t chunk_size, const torch::Tensor& h_in, const torch::Tensor& v_new,
    const torch::Tensor& blocks, const torch::Tensor& d_o_in, const torch::Tensor& d_state) {
  const auto dt = v_in.scalar_type();
  const int64_t B = q_in.size(0), Hk = q_in.size(1), T = q_in.size(2), K = q_in.size(3);
  const int64_t H = v_in.size(1), V = v_in.size(3), C = chunk_size, N = (T + C - 1) / C;
  const auto opts = v_in.options();
  // Gradients are written token-major, as the layer's projections lay out their inputs.
  torch::Tensor dq_v = torch::empty({B, T, H, K}, opts);  // per value head; summed per key head
  torch::Tensor dk_v = torch::empty({B, T, H, K}, opts);
  torch::Tensor dv = torch::empty({B, T, H, V}, opts);
  torch::Tensor dg = torch::empty({B, T, H}, opts), dbeta = torch::empty({B, T, H}, opts);
  torch::Tensor dh = d_state.defined() ? d_state.to(dt).clone(at::MemoryFormat::Contiguous)
                                       : torch::zeros({B, H, K, V}, opts);
  if (T > 0) {
    const torch::Tensor q = rows_unit_stride(q_in, dt), k = rows_unit_stride(k_in, dt);
    const torch::Tensor v = rows_unit_stride(v_in, dt);
    const torch::Tensor g = g_in.to(dt), beta = beta_in.to(dt);
    const torch::Tensor d_o =
        d_o_in.defined() ? rows_unit_stride(d_o_in, dt) : torch::zeros({B, H, T, V}, opts);
    TORCH_CHECK(h_in.is_contiguous() && v_new.is_contiguous() && blocks.is_contiguous() &&
                    h_in.size(2) == N && blocks.size(2) == N && blocks.size(4) == C,
                "chunk_gated_delta_backward_cpu: saved tensors have the wrong layout");
    AT_DISPATCH_FLOATING_TYPES(dt, "chunk_gated_delta_backward_cpu", [&] {
      const cpu::SingleThreadedBlas single_threaded_blas;
      cpu::parallel_for(0, B * H, 1, [&](int64_t begin, int64_t end) {
        BackScratch<scalar_t> scratch(C, K, V);
        for (int64_t bh = begin; bh < end; ++bh) {
          const int64_t bi = bh / H, j = bh % H, kh = j / (H / Hk);
          const HeadGrad<scalar_t> x{
              q.data_ptr<scalar_t>() + bi * q.stride(0) + kh * q.stride(1),
              k.data_ptr<scalar_t>() + bi * k.stride(0) + kh * k.stride(1),
              v.data_ptr<scalar_t>() + bi * v.stride(0) + j * v.stride(1),
              g.data_ptr<scalar_t>() + bi * g.stride(0) + j * g.stride(1),
              beta.data_ptr<scalar_t>() + bi * beta.stride(0) + j * beta.stride(1),
              h_in.data_ptr<scalar_t>() + bh * N * K * V,
              v_new.data_ptr<scalar_t>() + bh * T * V,
              blocks.data_ptr<scalar_t>() + bh * N * detail::kChunkBlocks * C * C,
              d_o.data_ptr<scalar_t>() + bi * d_o.stride(0) + j * d_o.stride(1),
              dq_v.data_ptr<scalar_t>() + bi * dq_v.stride(0) + j * dq_v.stride(2),
              dk_v.data_ptr<scalar_t>() + bi * dk_v.stride(0) + j * dk_v.stride(2),
              dv.data_ptr<scalar_t>() + bi * dv.stride(0) + j * dv.stride(2),
              dg.data_ptr<scalar_t>() + bi * dg.stride(0) + j * dg.stride(2),
              dbeta.data_ptr<scalar_t>() + bi * dbeta.stride(0) + j * dbeta.stride(2),
              dh.data_ptr<scalar_t>() + bh * K * V,
              q.stride(2),
              k.stride(2),
              v.stride(2),
              d_o.stride(2),
              g.stride(2),
              beta.stride(2),
              dq_v.stride(1),
              dv.stride(1),
              dg.stride(1),
              dbeta.stride(1)};
          backward_one_head_any(x, T, C, K, V, static_cast<scalar_t>(scale), scratch);
        }
      });
    });
  }
  // dq and dk of a key head: the sum over the value heads that read it (repeat_interleave order).
  const int64_t rep = H / Hk;
  auto per_key_head = [&](const torch::Tensor& d) {
    return rep == 1 ? d : d.view({B, T, Hk, rep, K}).sum(3);
  };
  ChunkCpuGrads r;
  r.dq = per_key_head(dq_v).transpose(1, 2).to(q_in.scalar_type());
  r.dk = per_key_head(dk_v).transpose(1, 2).to(k_in.scalar_type());
  r.dv = dv.transpose(1, 2).to(v_in.scalar_type());
  r.dg = dg.transpose(1, 2).to(g_in.scalar_type());
  r.dbeta = dbeta.transpose(1, 2).to(beta_in.scalar_type());
  if (h0.defined()) r.dh0 = dh.to(h0.scalar_type());
  return r;
}

}  // namespace detail

namespace {

// Forward: the fused kernel, keeping the state entering each chunk and the pseudo-values.
// Backward: the fused reverse pass. Not twice differentiable. Autograd Functions take defined
// tensors only: without an initial state, h0 is an empty placeholder and has_h0 is false.
class ChunkGatedDeltaRuleFused : public torch::autograd::Function<ChunkGatedDeltaRuleFused> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx,
                                                const torch::Tensor& q, const torch::Tensor& k,
                                                const torch::Tensor& v, const torch::Tensor& g,
                                                const torch::Tensor& beta,
                                                const torch::Tensor& h0_or_empty, bool has_h0,
                                                double scale, int64_t chunk_size) {
    const torch::Tensor h0 = has_h0 ? h0_or_empty : torch::Tensor();
    detail::ChunkCpuForward f =
        detail::chunk_gated_delta_forward_cpu(q, k, v, g, beta, scale, h0, chunk_size, true);
    ctx->save_for_backward({q, k, v, g, beta, h0_or_empty, f.h_in, f.v_new, f.blocks});
    ctx->saved_data["has_h0"] = has_h0;
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["chunk_size"] = chunk_size;
    return {f.o, f.state};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    TORCH_CHECK(!torch::GradMode::is_enabled(),
                "chunk_gated_delta_rule_fused: the fused backward is not differentiable "
                "(create_graph); use chunk_gated_delta_rule_torch for higher derivatives");
    const auto s = ctx->get_saved_variables();
    // grads[0] is the gradient of o as returned by forward, [B,T,Hv,V]: viewed as [B,Hv,T,V].
    const torch::Tensor d_o = grads[0].defined() ? grads[0].transpose(1, 2) : torch::Tensor();
    const torch::Tensor h0 = ctx->saved_data["has_h0"].toBool() ? s[5] : torch::Tensor();
    detail::ChunkCpuGrads d = detail::chunk_gated_delta_backward_cpu(
        s[0], s[1], s[2], s[3], s[4], h0, ctx->saved_data["scale"].toDouble(),
        ctx->saved_data["chunk_size"].toInt(), s[6], s[7], s[8], d_o, grads[1]);
    auto keep = [&](size_t i, torch::Tensor t) {
      return ctx->needs_input_grad(i) ? t : torch::Tensor();
    };
    return {keep(0, d.dq),
            keep(1, d.dk),
            keep(2, d.dv),
            keep(3, d.dg),
            keep(4, d.dbeta),
            keep(5, d.dh0),
            {},
            {},
            {}};
  }
};

}  // namespace

GatedDeltaResult chunk_gated_delta_rule_fused(const torch::Tensor& q, const torch::Tensor& k,
                                              const torch::Tensor& v, const torch::Tensor& g,
                                              const torch::Tensor& beta, double scale,
                                              const torch::Tensor& h0, int64_t chunk_size) {
  TORCH_CHECK(chunk_size > 0, "chunk_gated_delta_rule_fused: chunk_size must be > 0, got ",
              chunk_size);
  TORCH_CHECK(cpu::cpu_floating({q, k, v, g, beta, h0}),
              "chunk_gated_delta_rule_fused: fp32/fp64 CPU tensors only, got ", v.device(), " ",
              v.scalar_type());
  check_gated_delta_shapes("chunk_gated_delta_rule_fused", q, k, v, g, beta, h0);
  const torch::autograd::variable_list out = ChunkGatedDeltaRuleFused::apply(
      q, k, v, g, beta, h0.defined() ? h0 : torch::empty({0}, v.options()), h0.defined(), scale,
      chunk_size);
  return {out[0].transpose(1, 2), out[1]};
}

}  // namespace hybridlab
