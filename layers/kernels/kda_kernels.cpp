// Kimi Delta Attention's rule (hybridlab/mixer_ops.h): recurrent and chunked forms in LibTorch
// ops. Reference: Kimi Linear tech report (arXiv 2510.26692) eq. 1, §3.1 eqs. 2–9 and App. C;
// fla-org/flash-linear-attention@bc3b101d `fla/ops/kda/naive.py` (the reference notes, mixers v2
// §3). The intra-chunk decay is taken pairwise per channel, masked before the exponential, in
// place of the report's secondary chunking: exact and stable for any gate, at O(T·C·d_k) memory.

#include <torch/torch.h>

#include <limits>
#include <vector>

#include "hybridlab/mixer_ops.h"
#include "hybridlab/runtime.h"

namespace hybridlab {

namespace {

struct KdaShapes {
  int64_t B, H, T, K, V;
};

KdaShapes check_kda_shapes(const char* who, const torch::Tensor& q, const torch::Tensor& k,
                           const torch::Tensor& v, const torch::Tensor& g,
                           const torch::Tensor& beta, const torch::Tensor& h0) {
  TORCH_CHECK(q.dim() == 4 && k.sizes() == q.sizes(), who, ": q and k must be [B,H,T,K], got ",
              q.sizes(), " and ", k.sizes());
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), K = q.size(3);
  TORCH_CHECK(v.dim() == 4 && v.size(0) == B && v.size(1) == H && v.size(2) == T, who,
              ": v must be [B,H,T,V], got ", v.sizes());
  TORCH_CHECK(g.sizes() == q.sizes(), who, ": g must be [B,H,T,K] like k, got ", g.sizes());
  TORCH_CHECK(beta.dim() == 3 && beta.size(0) == B && beta.size(1) == H && beta.size(2) == T, who,
              ": beta must be [B,H,T], got ", beta.sizes());
  const int64_t V = v.size(3);
  if (h0.defined()) {
    TORCH_CHECK(
        h0.dim() == 4 && h0.size(0) == B && h0.size(1) == H && h0.size(2) == K && h0.size(3) == V,
        who, ": h0 must be [B,H,K,V] = [", B, ",", H, ",", K, ",", V, "], got ", h0.sizes());
  }
  return {B, H, T, K, V};
}

torch::ScalarType kda_dtype(const torch::Tensor& v) {
  return v.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
}

}  // namespace

GatedDeltaResult recurrent_kda(const torch::Tensor& q_in, const torch::Tensor& k_in,
                               const torch::Tensor& v_in, const torch::Tensor& g_in,
                               const torch::Tensor& beta_in, double scale,
                               const torch::Tensor& h0) {
  NoAutocast no_autocast;  // state, decays and gates in fp32 (hybridlab/runtime.h)
  const KdaShapes s = check_kda_shapes("recurrent_kda", q_in, k_in, v_in, g_in, beta_in, h0);
  const auto dt = kda_dtype(v_in);
  const torch::Tensor q = q_in.to(dt) * scale, k = k_in.to(dt), v = v_in.to(dt);
  const torch::Tensor alpha = g_in.to(dt).exp(), beta = beta_in.to(dt);
  torch::Tensor h = h0.defined() ? h0.to(dt) : torch::zeros({s.B, s.H, s.K, s.V}, v.options());
  std::vector<torch::Tensor> outs;
  outs.reserve(s.T);
  for (int64_t t = 0; t < s.T; ++t) {
    const torch::Tensor kt = k.select(2, t).unsqueeze(-1);  // [B,H,K,1]
    h = h * alpha.select(2, t).unsqueeze(-1);               // decay rows (key channels) first
    const torch::Tensor u =
        (v.select(2, t).unsqueeze(-2) - torch::matmul(kt.transpose(-1, -2), h)) *
        beta.select(2, t).unsqueeze(-1).unsqueeze(-1);  // [B,H,1,V]
    h = h + torch::matmul(kt, u);
    outs.push_back(torch::matmul(q.select(2, t).unsqueeze(-2), h));  // [B,H,1,V]
  }
  torch::Tensor o = s.T > 0 ? torch::cat(outs, 2) : torch::zeros({s.B, s.H, 0, s.V}, v.options());
  return {o.to(v_in.scalar_type()), h};
}

GatedDeltaResult chunk_kda(const torch::Tensor& q_in, const torch::Tensor& k_in,
                           const torch::Tensor& v_in, const torch::Tensor& g_in,
                           const torch::Tensor& beta_in, double scale, const torch::Tensor& h0,
                           int64_t chunk_size) {
  NoAutocast no_autocast;  // state, decays and gates in fp32 (hybridlab/runtime.h)
  const KdaShapes s = check_kda_shapes("chunk_kda", q_in, k_in, v_in, g_in, beta_in, h0);
  TORCH_CHECK(chunk_size > 0, "chunk_kda: chunk_size must be > 0, got ", chunk_size);
  const auto dt = kda_dtype(v_in);
  const int64_t C = chunk_size, nc = (s.T + C - 1) / C, pad = nc * C - s.T;
  // Padding after the end: k = 0, β = 0 and g = 0 write nothing and keep the state.
  auto chunks = [&](const torch::Tensor& t, int64_t width) {
    const torch::Tensor p = pad == 0 ? t.to(dt) : torch::constant_pad_nd(t.to(dt), {0, 0, 0, pad});
    return p.view({s.B, s.H, nc, C, width});
  };
  const torch::Tensor q = chunks(q_in, s.K) * scale, k = chunks(k_in, s.K);
  const torch::Tensor v = chunks(v_in, s.V), G = chunks(g_in, s.K).cumsum(3);  // inclusive
  const torch::Tensor beta =
      (pad == 0 ? beta_in.to(dt) : torch::constant_pad_nd(beta_in.to(dt), {0, pad}))
          .view({s.B, s.H, nc, C, 1});
  // e^{G_i − G_j} per channel for j ≤ i, masked by index before the exponential.
  const torch::Tensor lower = torch::ones({C, C}, torch::dtype(torch::kBool)).tril();
  const torch::Tensor decay =
      (G.unsqueeze(4) - G.unsqueeze(3))
          .masked_fill(lower.logical_not().unsqueeze(-1), -std::numeric_limits<double>::infinity())
          .exp();  // [B,H,nc,C(i),C(j),K]
  const torch::Tensor a_qk = (q.unsqueeze(4) * k.unsqueeze(3) * decay).sum(-1);  // [..,C,C], i ≥ j
  const torch::Tensor strict = torch::ones({C, C}, torch::dtype(torch::kBool)).tril(-1);
  const torch::Tensor a_kk = ((k.unsqueeze(4) * k.unsqueeze(3) * decay).sum(-1) * beta)
                                 .masked_fill(strict.logical_not(), 0);
  // The UT transform: (I + A_kk) X = diag(β)[K ⊙ e^G | V], unit lower triangular.
  const torch::Tensor eye = torch::eye(C, torch::TensorOptions().dtype(dt).device(v.device()));
  const torch::Tensor rhs = torch::cat({k * G.exp() * beta, v * beta}, -1);
  const torch::Tensor wu = torch::linalg_solve_triangular(a_kk + eye, rhs, /*upper=*/false,
                                                          /*left=*/true, /*unitriangular=*/true);
  const torch::Tensor w = wu.narrow(-1, 0, s.K), u = wu.narrow(-1, s.K, s.V);
  const torch::Tensor qg = q * G.exp();                               // s Q ⊙ e^G
  const torch::Tensor kg = k * (G.narrow(3, C - 1, 1) - G).exp();     // K ⊙ e^{G_last − G}
  const torch::Tensor last = G.select(3, C - 1).exp().unsqueeze(-1);  // [B,H,nc,K,1]
  torch::Tensor h = h0.defined() ? h0.to(dt) : torch::zeros({s.B, s.H, s.K, s.V}, v.options());
  std::vector<torch::Tensor> outs;
  outs.reserve(nc);
  for (int64_t c = 0; c < nc; ++c) {
    const torch::Tensor vp = u.select(2, c) - torch::matmul(w.select(2, c), h);  // V' [B,H,C,V]
    outs.push_back(torch::matmul(qg.select(2, c), h) + torch::matmul(a_qk.select(2, c), vp));
    h = h * last.select(2, c) + torch::matmul(kg.select(2, c).transpose(-1, -2), vp);
  }
  const torch::Tensor o = torch::stack(outs, 2).view({s.B, s.H, nc * C, s.V}).narrow(2, 0, s.T);
  return {o.to(v_in.scalar_type()), h};
}

}  // namespace hybridlab
