// Tiled attention with an online softmax (FlashAttention-2, Dao 2023, Algorithms 1 and 2) as a
// torch::autograd::Function. Every tile is a few LibTorch ops on [B·Hkv, rows, ·] blocks: the G =
// H/Hkv query heads that read one kv head are laid out as G consecutive rows per query, so one
// batched matmul serves the whole group against its key tile (GQA without repeat_interleave, and
// the group's kv gradients summed by the matmul itself).
//
// Backward, two forms:
//  - no relative hook: Algorithm 2 in plain matmuls. A learned logit bias (T5) gets its gradient
//    from dS (the bias enters S unscaled): the tiles' bias is recomputed with grad mode on and one
//    torch::autograd::grad call per key column maps Σ_B dS to the scheme's parameters.
//  - relative hook (Shaw): per tile, the tile's forward is rebuilt under autograd with L fixed and
//    differentiated through the scalar
//        g = Σ_i dO_i·Σ_j P_ij (v_j + r_ij) − Σ_i D_i Σ_j P_ij,   P_ij = e^{S_ij − L_i},
//    whose derivative w.r.t. S_ij is P_ij (dO_i·(v_j + r_ij) − D_i) (the softmax backward with
//    D_i = dO_i·O_i), w.r.t. v_j Σ_i P_ij dO_i and w.r.t. r_ij P_ij dO_i: the exact gradients of
//    q, k, v and of the scheme's tables, for any hook the scheme computes.

#include "layers/kernels/attention_tiled.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "hybridlab/position_hooks.h"
#include "layers/kernels/linear_cpu.h"

namespace hybridlab {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Shapes and settings of one call. Rows of a query tile: bq·G, ordered (query, head in group).
struct Geometry {
  int64_t B = 0, H = 0, Hkv = 0, G = 1, Tq = 0, Tk = 0, Dh = 0, n_cached = 0;
  bool causal = true;
  int64_t window = 0, tile_q = 1, tile_k = 1;
  double scale = 1;
  uint32_t hooks = 0;
  bool separable = false;  // a separable (data-dependent) bias rides along as two vectors
};

enum class TileKind { kEmpty, kFull, kPartial };

// Visibility of the tile queries [i0,i1) × keys [j0,j1) from indices alone: with consecutive
// positions q_pos_i − k_pos_j = n_cached + i − j, visible when lo ≤ that ≤ hi.
TileKind classify(const Geometry& g, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
  constexpr int64_t kUnbounded = std::numeric_limits<int64_t>::max() / 4;
  const int64_t lo = g.causal ? 0 : (g.window > 0 ? 1 - g.window : -kUnbounded);
  const int64_t hi = g.window > 0 ? g.window - 1 : kUnbounded;
  const int64_t d_min = g.n_cached + i0 - (j1 - 1), d_max = g.n_cached + (i1 - 1) - j0;
  if (d_max < lo || d_min > hi) return TileKind::kEmpty;
  if (d_min >= lo && d_max <= hi) return TileKind::kFull;
  return TileKind::kPartial;
}

// [B,H,T,X] → [B·Hkv, T·G, X] contiguous (row t·G + h%G of kv head h/G).
torch::Tensor to_rows(const torch::Tensor& x, const Geometry& g) {
  const int64_t T = x.size(2), X = x.size(3);
  return x.reshape({g.B, g.Hkv, g.G, T, X})
      .permute({0, 1, 3, 2, 4})
      .reshape({g.B * g.Hkv, T * g.G, X})
      .contiguous();
}

// [B,Hkv,T,X] → [B·Hkv, T, X] contiguous.
torch::Tensor kv_rows(const torch::Tensor& x, const Geometry& g) {
  return x.reshape({g.B * g.Hkv, x.size(2), x.size(3)}).contiguous();
}

// [B·Hkv, T·G, X] → [B,H,T,X] (the inverse of to_rows).
torch::Tensor from_rows(const torch::Tensor& r, const Geometry& g, int64_t T) {
  const int64_t X = r.size(2);
  return r.reshape({g.B, g.Hkv, T, g.G, X}).permute({0, 1, 3, 2, 4}).reshape({g.B, g.H, T, X});
}

// Logit bias [H,bq,bk] → [Hkv, bq·G, bk] in tile row order.
torch::Tensor bias_to_rows(const torch::Tensor& bias, const Geometry& g) {
  const int64_t bq = bias.size(1), bk = bias.size(2);
  return bias.reshape({g.Hkv, g.G, bq, bk}).permute({0, 2, 1, 3}).reshape({g.Hkv, bq * g.G, bk});
}

// dS [B·Hkv, bq·G, bk] → the gradient of the logit bias [H,bq,bk] (summed over the batch).
torch::Tensor bias_grad_from_rows(const torch::Tensor& ds, const Geometry& g, int64_t bq) {
  const int64_t bk = ds.size(2);
  return ds.reshape({g.B, g.Hkv, bq, g.G, bk}).sum(0).permute({0, 2, 1, 3}).reshape({g.H, bq, bk});
}

// Separable bias, query term [B,H,T] → [B·Hkv, T·G] in tile row order.
torch::Tensor query_term_rows(const torch::Tensor& u, const Geometry& g) {
  const int64_t T = u.size(2);
  return u.reshape({g.B, g.Hkv, g.G, T}).permute({0, 1, 3, 2}).reshape({g.B * g.Hkv, T * g.G});
}

// Separable bias, key term [B,H,T] → [B·Hkv, G, T] (head in group, key).
torch::Tensor key_term_rows(const torch::Tensor& w, const Geometry& g) {
  return w.reshape({g.B * g.Hkv, g.G, w.size(2)});
}

// The separable bias of one tile [B·Hkv, bq·G, bk]: uq [B·Hkv, bq·G] (the tile's rows of the
// query term) plus wk [B·Hkv, G, bk] (its keys' term for each head of the group).
torch::Tensor separable_tile(const torch::Tensor& uq, const torch::Tensor& wk, int64_t bq) {
  const int64_t BK = wk.size(0), G = wk.size(1), bk = wk.size(2);
  return (uq.view({BK, bq, G, 1}) + wk.unsqueeze(1)).view({BK, bq * G, bk});
}

// [bq·G, bk] bool, true where the pair is hidden: attend's rule on the tile's positions.
torch::Tensor hidden_mask(const Geometry& g, const torch::Tensor& qp, const torch::Tensor& kp) {
  const torch::Tensor visible = visible_pairs(qp, kp, g.causal, g.window);
  // A partial tile exists only with a causal mask or a window, so `visible` is defined.
  const int64_t bq = qp.size(0), bk = kp.size(0);
  return visible.logical_not().unsqueeze(1).expand({bq, g.G, bk}).reshape({bq * g.G, bk});
}

// The logit bias of one tile, checked against the tile's queries `like` ([H,bq,bk], their dtype
// and device).
torch::Tensor tile_bias(const Geometry& g, PositionScheme& scheme, const torch::Tensor& qp,
                        const torch::Tensor& kp, const torch::Tensor& like) {
  return checked_logit_bias(scheme, qp, kp, g.H, like.scalar_type(), like.scalar_type(),
                            like.device());
}

// The separable terms of one tile (undefined without them).
struct TileTerms {
  torch::Tensor uq;  // [B·Hkv, bq·G]
  torch::Tensor wk;  // [B·Hkv, G, bk]
};

// Logits of one tile: (Q Kᵀ + relative_logits)·scale + bias + separable, hidden pairs −∞. Qi
// [B·Hkv, bq·G, Dh], Kj [B·Hkv, bk, Dh]; bias [H,bq,bk] or undefined. Differentiable when grad
// mode is on.
torch::Tensor tile_logits(const Geometry& g, PositionScheme* scheme, const torch::Tensor& Qi,
                          const torch::Tensor& Kj, const torch::Tensor& qp, const torch::Tensor& kp,
                          TileKind kind, const torch::Tensor& bias, const TileTerms& terms) {
  const int64_t bq = qp.size(0), bk = kp.size(0);
  // [B·Hkv, bq·G, bk]; on the CPU the batch entries spread over the threads (matmul_cpu).
  torch::Tensor s = matmul_cpu_applies(Qi, Kj, true) ? matmul_cpu(Qi, Kj, /*trans_b=*/true)
                                                     : at::bmm(Qi, Kj.transpose(1, 2));
  if (g.hooks & kHookRelative) {
    const torch::Tensor rel =
        checked_relative_logits(*scheme, from_rows(Qi, g, bq), qp, kp, s.scalar_type());
    s = s + to_rows(rel.to(s.scalar_type()), g);
  }
  s.mul_(g.scale);
  if (bias.defined()) {
    s.view({g.B, g.Hkv, bq * g.G, bk}).add_(bias_to_rows(bias.to(s.scalar_type()), g));
  }
  if (terms.uq.defined()) s.add_(separable_tile(terms.uq, terms.wk, bq).to(s.scalar_type()));
  if (kind == TileKind::kPartial) {
    s.masked_fill_(hidden_mask(g, qp, kp), -std::numeric_limits<double>::infinity());
  }
  return s;
}

struct ForwardResult {
  torch::Tensor o_rows;  // [B·Hkv, Tq·G, Dh]
  torch::Tensor lse;     // [B·Hkv, Tq·G]: L = m + log l; +∞ for a query with no visible key
};

// Algorithm 1: query tiles outer, key tiles inner, running max m, sum l and unnormalised output.
// The separable terms of the tile (query tile i0.., key tile j0..), or none.
TileTerms terms_of(const Geometry& g, const torch::Tensor& ur, const torch::Tensor& wr, int64_t i0,
                   int64_t bq, int64_t j0, int64_t bk) {
  if (!g.separable) return {};
  return {ur.narrow(1, i0 * g.G, bq * g.G), wr.narrow(2, j0, bk)};
}

ForwardResult tiled_forward(const Geometry& g, PositionScheme* scheme, const torch::Tensor& qr,
                            const torch::Tensor& kr, const torch::Tensor& vr,
                            const torch::Tensor& ur, const torch::Tensor& wr,
                            const torch::Tensor& q_pos, const torch::Tensor& k_pos) {
  const auto opts = qr.options();
  const int64_t BK = g.B * g.Hkv;
  // The running max starts at the lowest finite value, not −∞: a row whose keys so far are all
  // hidden then gets e^{−∞ − m} = 0 instead of e^{−∞ + ∞} = NaN.
  const double lowest = qr.scalar_type() == torch::kFloat
                            ? static_cast<double>(std::numeric_limits<float>::lowest())
                            : std::numeric_limits<double>::lowest();
  ForwardResult r;
  r.o_rows = torch::empty({BK, g.Tq * g.G, g.Dh}, opts);
  r.lse = torch::empty({BK, g.Tq * g.G}, opts);
  for (int64_t i0 = 0; i0 < g.Tq; i0 += g.tile_q) {
    const int64_t i1 = std::min(g.Tq, i0 + g.tile_q), bq = i1 - i0, rows = bq * g.G;
    const torch::Tensor Qi = qr.narrow(1, i0 * g.G, rows);
    const torch::Tensor qp = q_pos.narrow(0, i0, bq);
    torch::Tensor m = torch::full({BK, rows}, lowest, opts);
    torch::Tensor l = torch::zeros({BK, rows}, opts);
    torch::Tensor acc = torch::zeros({BK, rows, g.Dh}, opts);
    for (int64_t j0 = 0; j0 < g.Tk; j0 += g.tile_k) {
      const int64_t j1 = std::min(g.Tk, j0 + g.tile_k), bk = j1 - j0;
      const TileKind kind = classify(g, i0, i1, j0, j1);
      if (kind == TileKind::kEmpty) continue;
      const torch::Tensor kp = k_pos.narrow(0, j0, bk);
      const torch::Tensor bias =
          (g.hooks & kHookLogitBias) ? tile_bias(g, *scheme, qp, kp, Qi) : torch::Tensor();
      torch::Tensor p = tile_logits(g, scheme, Qi, kr.narrow(1, j0, bk), qp, kp, kind, bias,
                                    terms_of(g, ur, wr, i0, bq, j0, bk));
      const torch::Tensor m_new = torch::max(m, p.amax(-1));
      const torch::Tensor alpha = (m - m_new).exp_();  // rescales what earlier tiles summed
      p.sub_(m_new.unsqueeze(-1)).exp_();              // P̃ = e^{S − m_new}, 0 where hidden
      l.mul_(alpha).add_(p.sum(-1));
      bmm_add_(acc.mul_(alpha.unsqueeze(-1)), p, vr.narrow(1, j0, bk));
      if (g.hooks & kHookRelative) {
        // Σ_j P̃_ij a^V_ij is linear in P̃, so it rescales with the accumulator.
        const torch::Tensor rv =
            checked_relative_values(*scheme, from_rows(p, g, bq), qp, kp, g.Dh, p.scalar_type());
        if (rv.defined()) acc.add_(to_rows(rv.to(acc.scalar_type()), g));
      }
      m = m_new;
    }
    // l ≥ 1 for a row with a visible key (its maximum contributes e^0); l = 0 only without one.
    const torch::Tensor none = l.le(0);
    r.o_rows.narrow(1, i0 * g.G, rows).copy_(acc / l.masked_fill(none, 1).unsqueeze(-1));
    r.lse.narrow(1, i0 * g.G, rows)
        .copy_((m + l.log()).masked_fill_(none, std::numeric_limits<double>::infinity()));
  }
  return r;
}

struct Saved {
  torch::Tensor qr, kr, vr, ur, wr, o_rows, lse, q_pos, k_pos;
};

struct BackwardResult {
  torch::Tensor dq, dk, dv;            // rows layouts of qr, kr, vr
  torch::Tensor du, dw;                // of ur and wr (the separable terms), when present
  std::vector<torch::Tensor> dparams;  // one per entry of `params` (undefined if unused)
};

// Adds `grads` into `sums` entry by entry (undefined entries contribute nothing).
void add_into(std::vector<torch::Tensor>& sums, const variable_list& grads, size_t offset) {
  for (size_t i = 0; i < sums.size(); ++i) {
    const torch::Tensor& d = grads[offset + i];
    if (!d.defined()) continue;
    sums[i] = sums[i].defined() ? sums[i] + d : d.clone();
  }
}

// Algorithm 2 in plain matmuls (no relative hook). Key tiles outer, query tiles inner; a
// learned bias's gradient goes through one autograd::grad call per key column.
void fast_backward(const Geometry& g, PositionScheme* scheme, const Saved& s,
                   const torch::Tensor& dor, const torch::Tensor& D,
                   const std::vector<torch::Tensor>& params, BackwardResult& r) {
  const bool bias_grads = (g.hooks & kHookLogitBias) && !params.empty();
  for (int64_t j0 = 0; j0 < g.Tk; j0 += g.tile_k) {
    const int64_t j1 = std::min(g.Tk, j0 + g.tile_k), bk = j1 - j0;
    const torch::Tensor Kj = s.kr.narrow(1, j0, bk), Vj = s.vr.narrow(1, j0, bk);
    torch::Tensor dKj = r.dk.narrow(1, j0, bk), dVj = r.dv.narrow(1, j0, bk);
    const torch::Tensor kp = s.k_pos.narrow(0, j0, bk);
    std::vector<torch::Tensor> biases, dbiases;
    for (int64_t i0 = 0; i0 < g.Tq; i0 += g.tile_q) {
      const int64_t i1 = std::min(g.Tq, i0 + g.tile_q), bq = i1 - i0, rows = bq * g.G;
      const TileKind kind = classify(g, i0, i1, j0, j1);
      if (kind == TileKind::kEmpty) continue;
      const torch::Tensor Qi = s.qr.narrow(1, i0 * g.G, rows);
      const torch::Tensor dOi = dor.narrow(1, i0 * g.G, rows);
      const torch::Tensor qp = s.q_pos.narrow(0, i0, bq);
      torch::Tensor bias;
      if (g.hooks & kHookLogitBias) {
        torch::AutoGradMode grad_mode(bias_grads);
        bias = tile_bias(g, *scheme, qp, kp, Qi);
      }
      torch::Tensor p =
          tile_logits(g, scheme, Qi, Kj, qp, kp, kind, bias.defined() ? bias.detach() : bias,
                      terms_of(g, s.ur, s.wr, i0, bq, j0, bk));
      p.sub_(s.lse.narrow(1, i0 * g.G, rows).unsqueeze(-1)).exp_();  // P = e^{S − L}
      bmm_add_(dVj, p.transpose(1, 2), dOi);
      torch::Tensor ds = bmm_cpu(dOi, Vj.transpose(1, 2));         // dP
      ds.sub_(D.narrow(1, i0 * g.G, rows).unsqueeze(-1)).mul_(p);  // dS = P∘(dP − D)
      if (g.separable) {  // the bias enters S as is: its gradient is dS, summed per row / column
        r.du.narrow(1, i0 * g.G, rows).add_(ds.sum(-1));
        r.dw.narrow(2, j0, bk).add_(ds.view({ds.size(0), bq, g.G, bk}).sum(1));
      }
      if (bias_grads && bias.requires_grad()) {
        biases.push_back(bias);
        dbiases.push_back(bias_grad_from_rows(ds, g, bq).to(bias.scalar_type()));
      }
      bmm_add_(r.dq.narrow(1, i0 * g.G, rows), ds, Kj, g.scale);
      bmm_add_(dKj, ds.transpose(1, 2), Qi, g.scale);
    }
    if (!biases.empty()) {
      torch::AutoGradMode grad_mode(true);
      add_into(r.dparams,
               torch::autograd::grad(biases, params, dbiases, /*retain_graph=*/false,
                                     /*create_graph=*/false, /*allow_unused=*/true),
               0);
    }
  }
}

// Any hooks (the relative one included): each tile's forward rebuilt under autograd with L fixed
// and differentiated through g (see the top of this file).
void generic_backward(const Geometry& g, PositionScheme* scheme, const Saved& s,
                      const torch::Tensor& dor, const torch::Tensor& D,
                      const std::vector<torch::Tensor>& params, BackwardResult& r) {
  for (int64_t j0 = 0; j0 < g.Tk; j0 += g.tile_k) {
    const int64_t j1 = std::min(g.Tk, j0 + g.tile_k), bk = j1 - j0;
    const torch::Tensor kp = s.k_pos.narrow(0, j0, bk);
    for (int64_t i0 = 0; i0 < g.Tq; i0 += g.tile_q) {
      const int64_t i1 = std::min(g.Tq, i0 + g.tile_q), bq = i1 - i0, rows = bq * g.G;
      const TileKind kind = classify(g, i0, i1, j0, j1);
      if (kind == TileKind::kEmpty) continue;
      const torch::Tensor qp = s.q_pos.narrow(0, i0, bq);
      torch::AutoGradMode grad_mode(true);
      variable_list inputs = {s.qr.narrow(1, i0 * g.G, rows).detach().requires_grad_(),
                              s.kr.narrow(1, j0, bk).detach().requires_grad_(),
                              s.vr.narrow(1, j0, bk).detach().requires_grad_()};
      TileTerms terms = terms_of(g, s.ur, s.wr, i0, bq, j0, bk);
      if (g.separable) {
        terms.uq = terms.uq.detach().requires_grad_();
        terms.wk = terms.wk.detach().requires_grad_();
        inputs.push_back(terms.uq);
        inputs.push_back(terms.wk);
      }
      const size_t n_tensors = inputs.size();
      inputs.insert(inputs.end(), params.begin(), params.end());
      const torch::Tensor bias =
          (g.hooks & kHookLogitBias) ? tile_bias(g, *scheme, qp, kp, inputs[0]) : torch::Tensor();
      const torch::Tensor p =
          (tile_logits(g, scheme, inputs[0], inputs[1], qp, kp, kind, bias, terms) -
           s.lse.narrow(1, i0 * g.G, rows).unsqueeze(-1))
              .exp();
      torch::Tensor out = at::bmm(p, inputs[2]);
      if (g.hooks & kHookRelative) {
        const torch::Tensor rv =
            checked_relative_values(*scheme, from_rows(p, g, bq), qp, kp, g.Dh, p.scalar_type());
        if (rv.defined()) out = out + to_rows(rv.to(out.scalar_type()), g);
      }
      const torch::Tensor objective = (dor.narrow(1, i0 * g.G, rows) * out).sum() -
                                      (D.narrow(1, i0 * g.G, rows) * p.sum(-1)).sum();
      const variable_list d = torch::autograd::grad({objective}, inputs, {}, false, false, true);
      r.dq.narrow(1, i0 * g.G, rows).add_(d[0]);
      r.dk.narrow(1, j0, bk).add_(d[1]);
      r.dv.narrow(1, j0, bk).add_(d[2]);
      if (g.separable) {
        if (d[3].defined()) r.du.narrow(1, i0 * g.G, rows).add_(d[3]);
        if (d[4].defined()) r.dw.narrow(2, j0, bk).add_(d[4]);
      }
      add_into(r.dparams, d, n_tensors);
    }
  }
}

// Keeps the scheme alive (and reachable) from the autograd graph until the backward ran.
struct SchemeHolder : torch::CustomClassHolder {
  explicit SchemeHolder(std::shared_ptr<PositionScheme> s) : scheme(std::move(s)) {}
  std::shared_ptr<PositionScheme> scheme;
};

// Inputs: q, k, v, the separable terms in row layout (empty tensors without them), the scheme's
// parameters (so their gradients flow), the positions; the scheme and geometry ride along as
// non-tensor arguments. Saves the row layouts of q, k, v, the separable terms, the output and L:
// O(T·Dh) per head. Not twice differentiable.
class TiledAttentionFunction : public torch::autograd::Function<TiledAttentionFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const torch::Tensor& ur,
                               const torch::Tensor& wr, at::TensorList params,
                               const torch::Tensor& q_pos, const torch::Tensor& k_pos,
                               c10::intrusive_ptr<SchemeHolder> holder, Geometry g) {
    const torch::Tensor qr = to_rows(q, g), kr = kv_rows(k, g), vr = kv_rows(v, g);
    const ForwardResult f =
        tiled_forward(g, holder->scheme.get(), qr, kr, vr, ur, wr, q_pos, k_pos);
    ctx->save_for_backward({qr, kr, vr, ur, wr, f.o_rows, f.lse, q_pos, k_pos});
    ctx->saved_data["scheme"] = at::IValue::make_capsule(holder);
    ctx->saved_data["n_params"] = static_cast<int64_t>(params.size());
    ctx->saved_data["B"] = g.B;
    ctx->saved_data["H"] = g.H;
    ctx->saved_data["Hkv"] = g.Hkv;
    ctx->saved_data["n_cached"] = g.n_cached;
    ctx->saved_data["causal"] = g.causal;
    ctx->saved_data["window"] = g.window;
    ctx->saved_data["tile_q"] = g.tile_q;
    ctx->saved_data["tile_k"] = g.tile_k;
    ctx->saved_data["scale"] = g.scale;
    ctx->saved_data["hooks"] = static_cast<int64_t>(g.hooks);
    ctx->saved_data["separable"] = g.separable;
    return {from_rows(f.o_rows, g, g.Tq)};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    TORCH_CHECK(!torch::GradMode::is_enabled(),
                "tiled_attention: the backward is not differentiable (create_graph); use the "
                "dense attention path for higher derivatives");
    const auto sv = ctx->get_saved_variables();
    const Saved s{sv[0], sv[1], sv[2], sv[3], sv[4], sv[5], sv[6], sv[7], sv[8]};
    Geometry g;
    g.B = ctx->saved_data["B"].toInt();
    g.H = ctx->saved_data["H"].toInt();
    g.Hkv = ctx->saved_data["Hkv"].toInt();
    g.G = g.H / g.Hkv;
    g.Tq = s.q_pos.size(0);
    g.Tk = s.k_pos.size(0);
    g.Dh = s.qr.size(2);
    g.n_cached = ctx->saved_data["n_cached"].toInt();
    g.causal = ctx->saved_data["causal"].toBool();
    g.window = ctx->saved_data["window"].toInt();
    g.tile_q = ctx->saved_data["tile_q"].toInt();
    g.tile_k = ctx->saved_data["tile_k"].toInt();
    g.scale = ctx->saved_data["scale"].toDouble();
    g.hooks = static_cast<uint32_t>(ctx->saved_data["hooks"].toInt());
    g.separable = ctx->saved_data["separable"].toBool();
    auto* holder = dynamic_cast<SchemeHolder*>(ctx->saved_data["scheme"].toCapsule().get());
    PositionScheme* scheme = holder ? holder->scheme.get() : nullptr;
    const auto n_params = static_cast<size_t>(ctx->saved_data["n_params"].toInt());

    // The parameters whose gradients are wanted: the scheme's own tensors (the same ones its hooks
    // read), in the order they were passed in.
    std::vector<torch::Tensor> all_params, params;
    std::vector<size_t> where;
    if (n_params > 0) {
      all_params = scheme->parameters();
      TORCH_CHECK(all_params.size() == n_params,
                  "tiled_attention: the scheme's parameters changed between forward and backward");
      for (size_t i = 0; i < n_params; ++i) {
        if (ctx->needs_input_grad(5 + i) && all_params[i].requires_grad()) {
          params.push_back(all_params[i]);
          where.push_back(i);
        }
      }
    }

    BackwardResult r;
    r.dq = torch::zeros_like(s.qr);
    r.dk = torch::zeros_like(s.kr);
    r.dv = torch::zeros_like(s.vr);
    if (g.separable) {
      r.du = torch::zeros_like(s.ur);
      r.dw = torch::zeros_like(s.wr);
    }
    r.dparams.resize(params.size());
    if (grads[0].defined()) {
      const torch::Tensor dor = to_rows(grads[0].to(s.qr.scalar_type()), g);
      const torch::Tensor D = (dor * s.o_rows).sum(-1);  // D_i = dO_i·O_i, [B·Hkv, Tq·G]
      if (g.hooks & kHookRelative) {
        generic_backward(g, scheme, s, dor, D, params, r);
      } else {
        fast_backward(g, scheme, s, dor, D, params, r);
      }
    }

    // One entry per argument of forward: q, k, v, the separable terms, each parameter, q_pos,
    // k_pos, and the scheme holder and geometry (not tensors: undefined).
    variable_list out(5 + n_params + 4);
    if (ctx->needs_input_grad(0)) out[0] = from_rows(r.dq, g, g.Tq);
    if (ctx->needs_input_grad(1)) out[1] = r.dk.view({g.B, g.Hkv, g.Tk, g.Dh});
    if (ctx->needs_input_grad(2)) out[2] = r.dv.view({g.B, g.Hkv, g.Tk, g.Dh});
    if (g.separable && ctx->needs_input_grad(3)) out[3] = r.du;
    if (g.separable && ctx->needs_input_grad(4)) out[4] = r.dw;
    for (size_t i = 0; i < where.size(); ++i) {
      const torch::Tensor& d = r.dparams[i];
      out[5 + where[i]] = d.defined() ? d : torch::zeros_like(params[i]);
    }
    return out;
  }
};

}  // namespace

torch::Tensor visible_pairs(const torch::Tensor& q_pos, const torch::Tensor& k_pos, bool causal,
                            int64_t window) {
  const torch::Tensor diff = q_pos.unsqueeze(1) - k_pos.unsqueeze(0);  // [bq,bk]
  torch::Tensor visible;
  if (causal) visible = diff.ge(0);
  if (window > 0) {
    const torch::Tensor in_window = diff.abs().lt(window);
    visible = visible.defined() ? visible.logical_and(in_window) : in_window;
  }
  return visible;
}

torch::Tensor tiled_attention(const torch::Tensor& q, const torch::Tensor& k,
                              const torch::Tensor& v, const torch::Tensor& q_pos,
                              const torch::Tensor& k_pos,
                              const std::shared_ptr<PositionScheme>& scheme,
                              const TiledAttentionOptions& opts, const SeparableBias& separable) {
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4,
              "tiled_attention: q, k, v must be [B,H,T,Dh], got ", q.sizes(), ", ", k.sizes(), ", ",
              v.sizes());
  const auto dtype = q.scalar_type();
  TORCH_CHECK((dtype == torch::kFloat || dtype == torch::kDouble) && k.scalar_type() == dtype &&
                  v.scalar_type() == dtype,
              "tiled_attention: fp32 or fp64 q, k, v of one dtype, got ", q.scalar_type(), ", ",
              k.scalar_type(), ", ", v.scalar_type());
  Geometry g;
  g.B = q.size(0);
  g.H = q.size(1);
  g.Tq = q.size(2);
  g.Dh = q.size(3);
  g.Hkv = k.size(1);
  g.Tk = k.size(2);
  TORCH_CHECK(g.Hkv > 0 && g.H % g.Hkv == 0 && k.size(0) == g.B && k.size(3) == g.Dh &&
                  v.sizes() == k.sizes(),
              "tiled_attention: k and v must be [B,Hkv,Tk,Dh] with Hkv dividing H; q ", q.sizes(),
              ", k ", k.sizes(), ", v ", v.sizes());
  TORCH_CHECK(g.Tk >= g.Tq, "tiled_attention: fewer keys (", g.Tk, ") than queries (", g.Tq, ")");
  TORCH_CHECK(
      q_pos.dim() == 1 && q_pos.size(0) == g.Tq && k_pos.dim() == 1 && k_pos.size(0) == g.Tk,
      "tiled_attention: q_pos must be [", g.Tq, "] and k_pos [", g.Tk, "], got ", q_pos.sizes(),
      " and ", k_pos.sizes());
  TORCH_CHECK(opts.tile_q > 0 && opts.tile_k > 0, "tiled_attention: tiles must be > 0, got ",
              opts.tile_q, "×", opts.tile_k);
  g.G = g.H / g.Hkv;
  // q_pos_i − k_pos_j = n_cached + i − j for consecutive positions (n_cached = Tk − Tq when the
  // queries are the last keys); tiles are classified from it, masks from the positions.
  g.n_cached = g.Tq > 0 && g.Tk > 0 ? q_pos[0].item<int64_t>() - k_pos[0].item<int64_t>() : 0;
  g.causal = opts.causal;
  g.window = std::max<int64_t>(opts.window, 0);
  g.tile_q = opts.tile_q;
  g.tile_k = opts.tile_k;
  g.scale = opts.scale > 0 ? opts.scale : 1.0 / std::sqrt(static_cast<double>(g.Dh));
  g.hooks = opts.hooks & (kHookLogitBias | kHookRelative);
  TORCH_CHECK(g.hooks == 0 || scheme,
              "tiled_attention: a logit-bias or relative hook needs its scheme");
  std::vector<torch::Tensor> params;
  if (g.hooks) params = scheme->parameters();
  g.separable = separable.defined();
  torch::Tensor ur = torch::empty({0}, q.options()), wr = ur;
  if (g.separable) {
    TORCH_CHECK(separable.key.defined() &&
                    separable.query.sizes() == at::IntArrayRef({g.B, g.H, g.Tq}) &&
                    separable.key.sizes() == at::IntArrayRef({g.B, g.H, g.Tk}),
                "tiled_attention: separable bias terms must be [B,H,Tq] = [", g.B, ",", g.H, ",",
                g.Tq, "] and [B,H,Tk], got ", separable.query.sizes(), " and ",
                separable.key.defined() ? separable.key.sizes() : at::IntArrayRef{});
    ur = query_term_rows(separable.query.to(dtype), g).contiguous();
    wr = key_term_rows(separable.key.to(dtype), g).contiguous();
  }
  return TiledAttentionFunction::apply(q, k, v, ur, wr, at::TensorList(params),
                                       q_pos.to(torch::kLong), k_pos.to(torch::kLong),
                                       c10::make_intrusive<SchemeHolder>(scheme), g)[0];
}

}  // namespace hybridlab
