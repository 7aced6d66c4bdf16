#include "layers/kernels/gated_deltanet_kernels.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "hybridlab/runtime.h"
#include "layers/kernels/cpu_parallel.h"
#include "layers/kernels/cpu_vector.h"

#include <limits>
#include <vector>

namespace hybridlab {

namespace {

torch::ScalarType compute_dtype(const torch::Tensor& t) {
  return t.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
}

}  // namespace

GatedDeltaShapes check_gated_delta_shapes(const char* who, const torch::Tensor& q,
                                          const torch::Tensor& k, const torch::Tensor& v,
                                          const torch::Tensor& g, const torch::Tensor& beta,
                                          const torch::Tensor& h0) {
  TORCH_CHECK(q.dim() == 4 && k.sizes() == q.sizes(), who, ": q and k must be [B,Hk,T,K], got ",
              q.sizes(), " and ", k.sizes());
  const int64_t B = q.size(0), Hk = q.size(1), T = q.size(2), K = q.size(3);
  TORCH_CHECK(v.dim() == 4 && v.size(0) == B && v.size(2) == T && v.size(1) % Hk == 0, who,
              ": v must be [B,Hv,T,V] with Hv a multiple of Hk=", Hk, ", got ", v.sizes());
  const int64_t Hv = v.size(1), V = v.size(3);
  TORCH_CHECK(g.dim() == 3 && g.size(0) == B && g.size(1) == Hv && g.size(2) == T, who,
              ": g must be [B,Hv,T], got ", g.sizes());
  TORCH_CHECK(beta.sizes() == g.sizes(), who, ": beta must be [B,Hv,T], got ", beta.sizes());
  if (h0.defined()) {
    TORCH_CHECK(
        h0.dim() == 4 && h0.size(0) == B && h0.size(1) == Hv && h0.size(2) == K && h0.size(3) == V,
        who, ": h0 must be [B,Hv,K,V] = [", B, ",", Hv, ",", K, ",", V, "], got ", h0.sizes());
  }
  return {B, Hk, Hv, T, K, V};
}

namespace {

// Value head j reads key head j / (Hv/Hk): repeat_interleave, not tile.
torch::Tensor expand_heads(const torch::Tensor& x, int64_t Hk, int64_t Hv) {
  return Hv == Hk ? x : x.repeat_interleave(Hv / Hk, 1);
}

}  // namespace

GatedDeltaResult recurrent_gated_delta_rule(const torch::Tensor& q_in, const torch::Tensor& k_in,
                                            const torch::Tensor& v_in, const torch::Tensor& g_in,
                                            const torch::Tensor& beta_in, double scale,
                                            const torch::Tensor& h0) {
  NoAutocast no_autocast;  // state, decays and gates in fp32 (hybridlab/runtime.h)
  const GatedDeltaShapes s =
      check_gated_delta_shapes("recurrent_gated_delta_rule", q_in, k_in, v_in, g_in, beta_in, h0);
  const auto dt = compute_dtype(v_in);
  const torch::Tensor q = expand_heads(q_in.to(dt), s.Hk, s.Hv) * scale;
  const torch::Tensor k = expand_heads(k_in.to(dt), s.Hk, s.Hv);
  const torch::Tensor v = v_in.to(dt);
  const torch::Tensor alpha = g_in.to(dt).exp();
  const torch::Tensor beta = beta_in.to(dt);
  torch::Tensor h = h0.defined() ? h0.to(dt) : torch::zeros({s.B, s.Hv, s.K, s.V}, v.options());
  std::vector<torch::Tensor> outs;
  outs.reserve(s.T);
  for (int64_t t = 0; t < s.T; ++t) {
    const torch::Tensor kt = k.select(2, t).unsqueeze(-1);   // [B,H,K,1]
    const torch::Tensor vt = v.select(2, t).unsqueeze(-2);   // [B,H,1,V]
    const torch::Tensor qt = q.select(2, t).unsqueeze(-2);   // [B,H,1,K]
    h = h * alpha.select(2, t).unsqueeze(-1).unsqueeze(-1);  // decay before the error term
    const torch::Tensor u = (vt - torch::matmul(kt.transpose(-1, -2), h)) *
                            beta.select(2, t).unsqueeze(-1).unsqueeze(-1);  // [B,H,1,V]
    h = h + torch::matmul(kt, u);                                           // [B,H,K,V]
    outs.push_back(torch::matmul(qt, h));  // [B,H,1,V], post-update read-out
  }
  torch::Tensor o = s.T > 0 ? torch::cat(outs, 2) : torch::zeros({s.B, s.Hv, 0, s.V}, v.options());
  return {o.to(v_in.scalar_type()), h};
}

GatedDeltaResult chunk_gated_delta_rule(const torch::Tensor& q_in, const torch::Tensor& k_in,
                                        const torch::Tensor& v_in, const torch::Tensor& g_in,
                                        const torch::Tensor& beta_in, double scale,
                                        const torch::Tensor& h0, int64_t chunk_size, bool fused) {
  NoAutocast no_autocast;  // state, decays and gates in fp32 (hybridlab/runtime.h)
  if (fused && cpu::cpu_floating({q_in, k_in, v_in, g_in, beta_in, h0})) {
    if (cpu::grad_needed({q_in, k_in, v_in, g_in, beta_in, h0})) {
      return chunk_gated_delta_rule_fused(q_in, k_in, v_in, g_in, beta_in, scale, h0, chunk_size);
    }
    return chunk_gated_delta_rule_cpu(q_in, k_in, v_in, g_in, beta_in, scale, h0, chunk_size);
  }
  return chunk_gated_delta_rule_torch(q_in, k_in, v_in, g_in, beta_in, scale, h0, chunk_size);
}

GatedDeltaResult chunk_gated_delta_rule_torch(const torch::Tensor& q_in, const torch::Tensor& k_in,
                                              const torch::Tensor& v_in, const torch::Tensor& g_in,
                                              const torch::Tensor& beta_in, double scale,
                                              const torch::Tensor& h0, int64_t chunk_size) {
  NoAutocast no_autocast;  // state, decays and gates in fp32 (hybridlab/runtime.h)
  const GatedDeltaShapes s =
      check_gated_delta_shapes("chunk_gated_delta_rule", q_in, k_in, v_in, g_in, beta_in, h0);
  TORCH_CHECK(chunk_size > 0, "chunk_gated_delta_rule: chunk_size must be > 0, got ", chunk_size);
  const auto dt = compute_dtype(v_in);
  const int64_t B = s.B, H = s.Hv, T = s.T, K = s.K, V = s.V, C = chunk_size;
  torch::Tensor h = h0.defined() ? h0.to(dt) : torch::zeros({B, H, K, V}, v_in.options().dtype(dt));
  if (T == 0) return {torch::zeros({B, H, 0, V}, v_in.options()), h};
  const int64_t N = (T + C - 1) / C, pad = N * C - T;
  const int64_t BH = B * H, BN = BH * N;  // every chunk of every head is one batch entry

  // Zero padding (g = k = v = β = 0) is exactly neutral: A, W and U rows vanish, Γ stays flat.
  auto pad4 = [&](const torch::Tensor& x) {
    return pad ? torch::constant_pad_nd(x, {0, 0, 0, pad}) : x;
  };
  auto pad3 = [&](const torch::Tensor& x) { return pad ? torch::constant_pad_nd(x, {0, pad}) : x; };
  // Batched matmuls run on [BN, C, ·] blocks: torch::bmm hands each block straight to BLAS.
  const torch::Tensor q = pad4(expand_heads(q_in.to(dt), s.Hk, H) * scale).reshape({BN, C, K});
  const torch::Tensor k = pad4(expand_heads(k_in.to(dt), s.Hk, H)).reshape({BN, C, K});
  const torch::Tensor v = pad4(v_in.to(dt)).reshape({BN, C, V});
  const torch::Tensor beta = pad3(beta_in.to(dt)).reshape({BN, C, 1});
  const torch::Tensor gp = pad3(g_in.to(dt)).reshape({BN, C});  // per-token log decay
  const torch::Tensor gc = gp.cumsum(-1);                       // Γ, chunk-local

  const auto bool_opts = torch::TensorOptions().dtype(torch::kBool).device(v_in.device());
  const torch::Tensor upper_incl = torch::ones({C, C}, bool_opts).triu();     // i <= j
  const torch::Tensor upper_strict = torch::ones({C, C}, bool_opts).triu(1);  // i < j
  // Γ_i − Γ_j = Σ_{j<s≤i} g_s as a sum of the g's themselves (Mamba2's stable "segsum"), not as a
  // difference of two large cumulative sums: that subtraction puts an O(1) cancellation into the
  // gradient of g (the diagonal's e^0 = 1 pulls +1 and −1 through the cumsum), which swamps the
  // true, tiny gradient under strong decay (QwenLM/FlashQLA PR #28).
  // e^{Γ_i−Γ_j} for i >= j, 0 above: mask by index BEFORE exp (entries above the diagonal must
  // never reach exp; masking by sign would zero the diagonal and the g = 0 entries).
  const torch::Tensor decay =
      gp.unsqueeze(-1)
          .expand({BN, C, C})
          .masked_fill(upper_incl, 0.0)  // [s,j]: g_s where s > j
          .cumsum(-2)                    // [i,j]: Σ_{j<s≤i} g_s
          .masked_fill_(upper_strict, -std::numeric_limits<double>::infinity())
          .exp_();  // [BN,C,C]
  // A_ij = β_i (k_i·k_j) e^{Γ_i−Γ_j}. Only its strictly lower part is read: the solve below is
  // unit-triangular (diagonal taken as 1) and lower (upper part never touched), which also keeps
  // the diagonal and upper part out of the gradient.
  const torch::Tensor A = torch::bmm(k, k.transpose(1, 2)) * decay * beta;
  // T = (I + A)⁻¹ explicitly, then W = T·diag(β e^Γ)K and U = T·diag(β)V by matmul (fla's
  // solve_tril + recompute_w_u): a 64-column solve and two GEMMs beat one (K+V)-column solve.
  const torch::Tensor eye = torch::eye(C, v_in.options().dtype(dt)).expand({BN, C, C});
  const torch::Tensor Tinv = at::linalg_solve_triangular(A, eye, /*upper=*/false, /*left=*/true,
                                                         /*unitriangular=*/true);
  const torch::Tensor eg = gc.exp().unsqueeze(-1);            // [BN,C,1]
  const torch::Tensor W = torch::bmm(Tinv, k * (beta * eg));  // [BN,C,K]
  const torch::Tensor U = torch::bmm(Tinv, v * beta);         // [BN,C,V]

  const torch::Tensor q_decayed = q * eg;                                // diag(e^Γ) Q
  const torch::Tensor intra = torch::bmm(q, k.transpose(1, 2)) * decay;  // (QKᵀ)⊙M, diag incl.
  // Γ_C − Γ_i = Σ_{s>i} g_s: an exclusive suffix sum, again without subtracting cumulative sums.
  const torch::Tensor to_end =
      torch::constant_pad_nd(gp.flip(-1).cumsum(-1).flip(-1).narrow(-1, 1, C - 1), {0, 1});
  // (diag(e^{Γ_C−Γ}) K)ᵀ per chunk, [BH,N,K,C]: the state update's left factor.
  const torch::Tensor k_to_end_t =
      (k * to_end.exp().unsqueeze(-1)).transpose(1, 2).contiguous().view({BH, N, K, C});
  const torch::Tensor chunk_decay = gc.select(-1, C - 1).exp().view({BH, N, 1, 1});
  const torch::Tensor W4 = W.view({BH, N, C, K}), U4 = U.view({BH, N, C, V});

  // Only the state recursion is sequential (over chunks, not tokens): v_new = U − W h, then
  // h ← e^{Γ_C} h + K̃ᵀ v_new, two fused multiply-adds per chunk. The read-outs of all chunks are
  // batched matmuls afterwards, from the state entering each chunk and its pseudo-values.
  std::vector<torch::Tensor> h_in, v_news;
  h_in.reserve(N);
  v_news.reserve(N);
  torch::Tensor hh = h.reshape({BH, K, V});
  for (int64_t n = 0; n < N; ++n) {
    h_in.push_back(hh);
    const torch::Tensor v_new =
        torch::baddbmm(U4.select(1, n), W4.select(1, n), hh, /*beta=*/1, /*alpha=*/-1);
    v_news.push_back(v_new);
    hh = torch::baddbmm(hh * chunk_decay.select(1, n), k_to_end_t.select(1, n), v_new);
  }
  const torch::Tensor H_in = torch::stack(h_in, 1).view({BN, K, V});
  const torch::Tensor V_new = torch::stack(v_news, 1).view({BN, C, V});
  const torch::Tensor o = torch::baddbmm(torch::bmm(intra, V_new), q_decayed, H_in)
                              .view({B, H, N * C, V});  // [B,H,N·C,V]
  return {(pad ? o.narrow(2, 0, T) : o).to(v_in.scalar_type()), hh.view({B, H, K, V})};
}

torch::Tensor gated_delta_gate(const torch::Tensor& a, const torch::Tensor& A_log,
                               const torch::Tensor& dt_bias) {
  NoAutocast no_autocast;  // state, decays and gates in fp32 (hybridlab/runtime.h)
  const auto dt = compute_dtype(a);
  const double max_float = std::numeric_limits<float>::max();
  const torch::Tensor A = A_log.to(dt).exp().clamp_max(max_float);
  // Floor at kMinLogDecay: e^g is 0 there in any precision, and finite g keeps the chunk-local
  // sums finite (−inf − (−inf) would be NaN).
  return (-A * torch::softplus(a.to(dt) + dt_bias.to(dt), /*beta=*/1.0, /*threshold=*/20.0))
      .clamp_min(kMinLogDecay);
}

namespace {

// y[t] = Σ_i w_i ⊙ xx[t + i] over the K taps, xx = [prev; x]: rows before 0 come from prev
// [K−1, C]. x, y [T, C]; wt [K, C] (the weight transposed). One pass, no concatenated copy.
template <class S>
inline __attribute__((always_inline)) void short_conv_rows(const S* x, const S* prev, const S* wt,
                                                           S* y, int64_t T, int64_t C, int64_t Kc) {
  for (int64_t t = 0; t < T; ++t) {
    S* __restrict yt = y + t * C;
    for (int64_t i = 0; i < Kc; ++i) {
      const int64_t s = t + i - (Kc - 1);  // source row in x; < 0 reads the cache
      const S* __restrict row = s < 0 ? prev + (s + Kc - 1) * C : x + s * C;
      const S* __restrict wi = wt + i * C;
      if (i == 0) {
        for (int64_t c = 0; c < C; ++c) yt[c] = wi[c] * row[c];
      } else {
        for (int64_t c = 0; c < C; ++c) yt[c] += wi[c] * row[c];
      }
    }
  }
}

HYBRIDLAB_VECTOR_CLONES
void short_conv_any(const float* x, const float* prev, const float* wt, float* y, int64_t T,
                    int64_t C, int64_t Kc) {
  short_conv_rows<float>(x, prev, wt, y, T, C, Kc);
}

HYBRIDLAB_VECTOR_CLONES
void short_conv_any(const double* x, const double* prev, const double* wt, double* y, int64_t T,
                    int64_t C, int64_t Kc) {
  short_conv_rows<double>(x, prev, wt, y, T, C, Kc);
}

// The backward of y = SiLU(u), u_t = Σ_i wt_i ⊙ xx_{t+i} (xx = [prev; x], K−1 + T rows), for one
// sequence: g = dy ⊙ SiLU'(u) = dy ⊙ s ⊙ (1 + u (1 − s)) with s = σ(u) saved by the forward;
// then dxx_j = Σ_i wt_i ⊙ g_{j−i} (0 <= j − i < T) split into dprev (j < K−1) and dx, and
// dwt_i += Σ_t g_t ⊙ xx_{t+i}. g is written over `gbuf` [T,C].
template <class S>
inline __attribute__((always_inline)) void short_conv_backward_rows(
    const S* x, const S* prev, const S* wt, const S* u, const S* s, const S* dy, S* gbuf, S* dx,
    S* dprev, S* dwt, int64_t T, int64_t C, int64_t Kc) {
  for (int64_t t = 0; t < T; ++t) {
    const S* __restrict ut = u + t * C;
    const S* __restrict st = s + t * C;
    const S* __restrict dyt = dy + t * C;
    S* __restrict gt = gbuf + t * C;
    for (int64_t c = 0; c < C; ++c) gt[c] = dyt[c] * st[c] * (S(1) + ut[c] * (S(1) - st[c]));
  }
  for (int64_t j = 0; j < Kc - 1 + T; ++j) {
    S* __restrict out = j < Kc - 1 ? dprev + j * C : dx + (j - (Kc - 1)) * C;
    const S* __restrict row = j < Kc - 1 ? prev + j * C : x + (j - (Kc - 1)) * C;
    for (int64_t c = 0; c < C; ++c) out[c] = 0;
    for (int64_t i = 0; i < Kc; ++i) {
      const int64_t t = j - i;  // output row that read xx_j through tap i
      if (t < 0 || t >= T) continue;
      const S* __restrict wi = wt + i * C;
      const S* __restrict gt = gbuf + t * C;
      S* __restrict dwi = dwt + i * C;
      for (int64_t c = 0; c < C; ++c) {
        out[c] += wi[c] * gt[c];
        dwi[c] += gt[c] * row[c];
      }
    }
  }
}

HYBRIDLAB_VECTOR_CLONES
void short_conv_backward_any(const float* x, const float* prev, const float* wt, const float* u,
                             const float* s, const float* dy, float* gbuf, float* dx, float* dprev,
                             float* dwt, int64_t T, int64_t C, int64_t Kc) {
  short_conv_backward_rows<float>(x, prev, wt, u, s, dy, gbuf, dx, dprev, dwt, T, C, Kc);
}

HYBRIDLAB_VECTOR_CLONES
void short_conv_backward_any(const double* x, const double* prev, const double* wt, const double* u,
                             const double* s, const double* dy, double* gbuf, double* dx,
                             double* dprev, double* dwt, int64_t T, int64_t C, int64_t Kc) {
  short_conv_backward_rows<double>(x, prev, wt, u, s, dy, gbuf, dx, dprev, dwt, T, C, Kc);
}

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Training form of the short convolution + SiLU on fp32/fp64 CPU tensors: the forward's fused
// taps (short_conv_any), σ from LibTorch's vectorised sigmoid, and one backward pass per sequence
// (short_conv_backward_rows). Sequences are spread over the intra-op threads. Inputs: x [B,T,C],
// prev [B,K−1,C], wt [K,C] (the weight transposed, in x's dtype).
class ShortConvFunction : public torch::autograd::Function<ShortConvFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& prev, const torch::Tensor& wt) {
    const torch::Tensor xc = x.contiguous(), pc = prev.contiguous(), wc = wt.contiguous();
    const int64_t B = xc.size(0), T = xc.size(1), C = xc.size(2), Kc = wc.size(0);
    torch::Tensor u = torch::empty_like(xc);
    AT_DISPATCH_FLOATING_TYPES(xc.scalar_type(), "short_conv_fused", [&] {
      const scalar_t* xp = xc.data_ptr<scalar_t>();
      const scalar_t* pp = pc.data_ptr<scalar_t>();
      const scalar_t* wp = wc.data_ptr<scalar_t>();
      scalar_t* up = u.data_ptr<scalar_t>();
      cpu::parallel_for(0, B, 1, [&](int64_t b0, int64_t b1) {
        for (int64_t b = b0; b < b1; ++b) {
          short_conv_any(xp + b * T * C, pp + b * (Kc - 1) * C, wp, up + b * T * C, T, C, Kc);
        }
      });
    });
    const torch::Tensor s = torch::sigmoid(u);
    ctx->save_for_backward({xc, pc, wc, u, s});
    return {u * s};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &prev = saved[1], &wt = saved[2], &u = saved[3],
                        &s = saved[4];
    const torch::Tensor dy = grads[0].contiguous();
    const int64_t B = x.size(0), T = x.size(1), C = x.size(2), Kc = wt.size(0);
    torch::Tensor dx = torch::empty_like(x), dprev = torch::empty_like(prev);
    torch::Tensor gbuf = torch::empty_like(x);
    // One weight-gradient block per worker thread, summed after.
    torch::Tensor dwt = torch::zeros({at::get_num_threads(), Kc, C}, x.options());
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "short_conv_fused_backward", [&] {
      const scalar_t *xp = x.data_ptr<scalar_t>(), *pp = prev.data_ptr<scalar_t>();
      const scalar_t *wp = wt.data_ptr<scalar_t>(), *up = u.data_ptr<scalar_t>();
      const scalar_t *sp = s.data_ptr<scalar_t>(), *dyp = dy.data_ptr<scalar_t>();
      scalar_t *gp = gbuf.data_ptr<scalar_t>(), *dxp = dx.data_ptr<scalar_t>();
      scalar_t *dpp = dprev.data_ptr<scalar_t>(), *dwp = dwt.data_ptr<scalar_t>();
      cpu::parallel_for(0, B, 1, [&](int64_t b0, int64_t b1) {
        scalar_t* dw_mine = dwp + at::get_thread_num() * Kc * C;
        for (int64_t b = b0; b < b1; ++b) {
          const int64_t o = b * T * C, op = b * (Kc - 1) * C;
          short_conv_backward_any(xp + o, pp + op, wp, up + o, sp + o, dyp + o, gp + o, dxp + o,
                                  dpp + op, dw_mine, T, C, Kc);
        }
      });
    });
    return {dx, dprev, dwt.sum(0)};
  }
};

}  // namespace

ShortConvResult short_conv(const torch::Tensor& x, const torch::Tensor& weight,
                           const torch::Tensor& cache, bool fused, bool keep_cache) {
  TORCH_CHECK(x.dim() == 3, "short_conv: x must be [B,T,C], got ", x.sizes());
  const int64_t B = x.size(0), C = x.size(2), Kc = weight.size(-1);
  TORCH_CHECK(weight.dim() == 3 && weight.size(0) == C && weight.size(1) == 1,
              "short_conv: weight must be [C,1,K] with C=", C, ", got ", weight.sizes());
  torch::Tensor prev =
      cache.defined() ? cache.to(x.scalar_type()) : torch::zeros({B, Kc - 1, C}, x.options());
  TORCH_CHECK(prev.size(0) == B && prev.size(1) == Kc - 1 && prev.size(2) == C,
              "short_conv: cache must be [B,K-1,C], got ", prev.sizes());
  const int64_t T = x.size(1);
  if (!cpu::grad_needed({x, weight, prev}) && cpu::cpu_floating({x, weight, prev})) {
    // Forward only (evaluation, decoding): one fused pass, then SiLU in place.
    const torch::Tensor xc = x.contiguous(), pc = prev.contiguous();
    const torch::Tensor wt = weight.to(x.scalar_type()).view({C, Kc}).t().contiguous();  // [K,C]
    torch::Tensor y = torch::empty_like(xc);
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "short_conv", [&] {
      for (int64_t b = 0; b < B; ++b) {
        short_conv_any(xc.data_ptr<scalar_t>() + b * T * C,
                       pc.data_ptr<scalar_t>() + b * (Kc - 1) * C, wt.data_ptr<scalar_t>(),
                       y.data_ptr<scalar_t>() + b * T * C, T, C, Kc);
      }
    });
    if (!keep_cache) return {torch::silu_(y), torch::Tensor()};
    const int64_t keep = std::min<int64_t>(T, Kc - 1);
    const torch::Tensor tail = torch::cat({pc, xc.narrow(1, T - keep, keep)}, 1);
    return {torch::silu_(y), tail.narrow(1, tail.size(1) - (Kc - 1), Kc - 1).contiguous()};
  }
  if (fused && cpu::cpu_floating({x, weight, prev})) {
    // Training: the autograd Function above; the weight's cast and transpose stay outside it so
    // autograd carries their gradients.
    const torch::Tensor wt = weight.to(x.scalar_type()).view({C, Kc}).t();  // [K,C]
    const torch::Tensor y = ShortConvFunction::apply(x, prev, wt)[0];
    if (!keep_cache) return {y, torch::Tensor()};
    const int64_t keep = std::min<int64_t>(T, Kc - 1);
    const torch::Tensor tail = torch::cat({prev, x.narrow(1, T - keep, keep)}, 1);
    return {y, tail.narrow(1, tail.size(1) - (Kc - 1), Kc - 1)};
  }
  const torch::Tensor xx = torch::cat({prev, x}, 1);  // [B,K-1+T,C]
  // Σ_i w[:,i] · xx[:, i:i+T, :]: K shifted multiply-adds. (at::conv1d with groups = C takes a
  // slow generic path on CPU, one small GEMM per channel.)
  const torch::Tensor w = weight.to(x.scalar_type()).view({C, Kc});  // [C,K]
  torch::Tensor y = xx.narrow(1, 0, T) * w.select(1, 0);
  for (int64_t i = 1; i < Kc; ++i) y = y + xx.narrow(1, i, T) * w.select(1, i);
  return {torch::silu(y), xx.narrow(1, xx.size(1) - (Kc - 1), Kc - 1)};
}

}  // namespace hybridlab

namespace hybridlab {

torch::Tensor short_conv_with_tail(const torch::Tensor& x, const torch::Tensor& weight,
                                   torch::Tensor* tail, bool fused) {
  ShortConvResult r = short_conv(x, weight, tail ? *tail : torch::Tensor(), fused, tail != nullptr);
  if (tail) *tail = r.cache;
  return r.y;
}

}  // namespace hybridlab
