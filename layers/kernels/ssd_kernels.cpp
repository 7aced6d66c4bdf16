// The SSD scan of Mamba2 (hybridlab/mixer_ops.h): recurrent and chunked forms in LibTorch ops.
// Reference: Dao & Gu, "Transformers are SSMs", ICML 2024, §6 and Listing 1 (state-spaces/mamba
// `ssd_minimal.py`); the masked, stable segment sum is the reference notes' (mixers v2 §1).

#include <torch/torch.h>

#include <limits>
#include <vector>

#include "hybridlab/mixer_ops.h"
#include "hybridlab/runtime.h"

namespace hybridlab {

namespace {

struct SsdShapes {
  int64_t B, G, H, T, N, P;
};

SsdShapes check_ssd_shapes(const char* who, const torch::Tensor& q, const torch::Tensor& k,
                           const torch::Tensor& v, const torch::Tensor& a,
                           const torch::Tensor& h0) {
  TORCH_CHECK(q.dim() == 4 && k.sizes() == q.sizes(), who, ": q and k must be [B,G,T,N], got ",
              q.sizes(), " and ", k.sizes());
  const int64_t B = q.size(0), G = q.size(1), T = q.size(2), N = q.size(3);
  TORCH_CHECK(v.dim() == 4 && v.size(0) == B && v.size(2) == T && v.size(1) % G == 0, who,
              ": v must be [B,H,T,P] with H a multiple of G=", G, ", got ", v.sizes());
  const int64_t H = v.size(1), P = v.size(3);
  TORCH_CHECK(a.dim() == 3 && a.size(0) == B && a.size(1) == H && a.size(2) == T, who,
              ": a must be [B,H,T], got ", a.sizes());
  if (h0.defined()) {
    TORCH_CHECK(
        h0.dim() == 4 && h0.size(0) == B && h0.size(1) == H && h0.size(2) == N && h0.size(3) == P,
        who, ": h0 must be [B,H,N,P] = [", B, ",", H, ",", N, ",", P, "], got ", h0.sizes());
  }
  return {B, G, H, T, N, P};
}

// Head j reads group j / (H/G): repeat_interleave, not tile (as the delta-rule kernels do).
torch::Tensor heads_from_groups(const torch::Tensor& x, int64_t G, int64_t H) {
  return H == G ? x : x.repeat_interleave(H / G, 1);
}

torch::ScalarType ssd_dtype(const torch::Tensor& v) {
  return v.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
}

}  // namespace

GatedDeltaResult recurrent_ssd(const torch::Tensor& q_in, const torch::Tensor& k_in,
                               const torch::Tensor& v_in, const torch::Tensor& a_in,
                               const torch::Tensor& h0) {
  NoAutocast no_autocast;  // state, decays and gates in fp32 (hybridlab/runtime.h)
  const SsdShapes s = check_ssd_shapes("recurrent_ssd", q_in, k_in, v_in, a_in, h0);
  const auto dt = ssd_dtype(v_in);
  const torch::Tensor q = heads_from_groups(q_in.to(dt), s.G, s.H);
  const torch::Tensor k = heads_from_groups(k_in.to(dt), s.G, s.H);
  const torch::Tensor v = v_in.to(dt);
  const torch::Tensor decay = a_in.to(dt).exp();
  torch::Tensor h = h0.defined() ? h0.to(dt) : torch::zeros({s.B, s.H, s.N, s.P}, v.options());
  std::vector<torch::Tensor> outs;
  outs.reserve(s.T);
  for (int64_t t = 0; t < s.T; ++t) {
    h = h * decay.select(2, t).unsqueeze(-1).unsqueeze(-1) +
        torch::matmul(k.select(2, t).unsqueeze(-1), v.select(2, t).unsqueeze(-2));  // [B,H,N,P]
    outs.push_back(torch::matmul(q.select(2, t).unsqueeze(-2), h));                 // [B,H,1,P]
  }
  torch::Tensor o = s.T > 0 ? torch::cat(outs, 2) : torch::zeros({s.B, s.H, 0, s.P}, v.options());
  return {o.to(v_in.scalar_type()), h};
}

GatedDeltaResult chunk_ssd(const torch::Tensor& q_in, const torch::Tensor& k_in,
                           const torch::Tensor& v_in, const torch::Tensor& a_in,
                           const torch::Tensor& h0, int64_t chunk_size) {
  NoAutocast no_autocast;  // state, decays and gates in fp32 (hybridlab/runtime.h)
  const SsdShapes s = check_ssd_shapes("chunk_ssd", q_in, k_in, v_in, a_in, h0);
  TORCH_CHECK(chunk_size > 0, "chunk_ssd: chunk_size must be > 0, got ", chunk_size);
  const auto dt = ssd_dtype(v_in);
  const int64_t C = chunk_size, nc = (s.T + C - 1) / C, pad = nc * C - s.T;
  // Padding after the end: k = 0 writes nothing and a = 0 keeps the state, so neither the
  // outputs before it nor the final state change.
  auto padded = [&](const torch::Tensor& t) {
    return pad == 0 ? t : torch::constant_pad_nd(t, {0, 0, 0, pad});
  };
  const torch::Tensor q =
      padded(heads_from_groups(q_in.to(dt), s.G, s.H)).view({s.B, s.H, nc, C, s.N});
  const torch::Tensor k =
      padded(heads_from_groups(k_in.to(dt), s.G, s.H)).view({s.B, s.H, nc, C, s.N});
  const torch::Tensor v = padded(v_in.to(dt)).view({s.B, s.H, nc, C, s.P});
  const torch::Tensor a = (pad == 0 ? a_in.to(dt) : torch::constant_pad_nd(a_in.to(dt), {0, pad}))
                              .view({s.B, s.H, nc, C});
  const torch::Tensor lam = a.cumsum(-1);  // Λ, inclusive: [B,H,nc,C]
  // 1. Inside each chunk: o_i = Σ_{j≤i} e^{Λ_i − Λ_j} (q_i·k_j) v_j, masked before exp.
  const torch::Tensor causal = torch::ones({C, C}, torch::dtype(torch::kBool)).tril();
  const torch::Tensor seg = (lam.unsqueeze(-1) - lam.unsqueeze(-2))
                                .masked_fill(causal.logical_not(),
                                             -std::numeric_limits<double>::infinity())
                                .exp();  // [B,H,nc,C,C]
  torch::Tensor o = torch::matmul(torch::matmul(q, k.transpose(-1, -2)) * seg, v);
  // 2. Each chunk's own state: Σ_j e^{Λ_last − Λ_j} k_j v_jᵀ.
  const torch::Tensor to_end = (lam.narrow(-1, C - 1, 1) - lam).exp();  // [B,H,nc,C]
  const torch::Tensor own = torch::matmul((k * to_end.unsqueeze(-1)).transpose(-1, -2), v);
  // 3. The scan over chunks (nc steps of elementwise work), the state entering each kept.
  const torch::Tensor total = lam.select(-1, C - 1).exp();  // [B,H,nc]
  torch::Tensor h = h0.defined() ? h0.to(dt) : torch::zeros({s.B, s.H, s.N, s.P}, v.options());
  std::vector<torch::Tensor> entering;
  entering.reserve(nc);
  for (int64_t c = 0; c < nc; ++c) {
    entering.push_back(h);
    h = h * total.select(2, c).unsqueeze(-1).unsqueeze(-1) + own.select(2, c);
  }
  // 4. What the state before the chunk adds: e^{Λ_i} q_i h_in.
  o = o + torch::matmul(q * lam.exp().unsqueeze(-1), torch::stack(entering, 2));
  o = o.view({s.B, s.H, nc * C, s.P}).narrow(2, 0, s.T);
  return {o.to(v_in.scalar_type()), h};
}

}  // namespace hybridlab
