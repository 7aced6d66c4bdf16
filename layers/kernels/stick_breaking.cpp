#include "layers/kernels/stick_breaking.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "layers/kernels/cpu_parallel.h"

namespace hybridlab {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Which keys break each query's stick ([bq,bk] uint8: visible and strictly earlier) and where
// its own key is ([bq] int64, −1 when absent).
struct StickLayout {
  torch::Tensor earlier;
  torch::Tensor own;
};

StickLayout stick_layout(const torch::Tensor& q_pos, const torch::Tensor& k_pos,
                         const torch::Tensor& visible) {
  const torch::Tensor qp = q_pos.to(torch::kCPU).unsqueeze(1), kp = k_pos.to(torch::kCPU);
  torch::Tensor earlier = kp.unsqueeze(0).lt(qp);
  if (visible.defined()) earlier = earlier.logical_and(visible.to(torch::kCPU));
  const torch::Tensor same = kp.unsqueeze(0).eq(qp);  // [bq,bk]
  torch::Tensor own = same.to(torch::kLong).argmax(1);
  own = torch::where(same.any(1), own, torch::full_like(own, -1));
  return {earlier.to(torch::kUInt8).contiguous(), own.contiguous()};
}

// The stick in log space over the last dimension of z: each earlier key's weight
// exp(log β_j + Σ_{k>j} log(1 − β_k) + lost), 0 off `earlier` ([bq,bk] bool), and in `total`
// Σ log(1 − β) over every earlier key of the row, summed from the query backwards. `lost`
// ([...,bq], log) is what nearer keys outside z already took; undefined for none.
struct StickShares {
  torch::Tensor weights, total;
};

StickShares stick_shares(const torch::Tensor& z, const torch::Tensor& earlier,
                         const torch::Tensor& lost) {
  const torch::Tensor softplus = torch::softplus(z);
  const torch::Tensor outside = earlier.logical_not();
  const torch::Tensor log_keep = (-softplus).masked_fill(outside, 0.0);  // log(1 − β)
  // after[j] = Σ_{k ≥ j} log(1 − β_ik); the weight of j takes the keys after it only.
  const torch::Tensor after = log_keep.flip(-1).cumsum(-1).flip(-1);
  const int64_t bk = z.size(-1);
  torch::Tensor log_w =
      z - softplus +
      torch::cat({after.narrow(-1, 1, bk - 1), torch::zeros_like(after.narrow(-1, 0, 1))}, -1);
  if (lost.defined()) log_w = log_w + lost.unsqueeze(-1);
  return {log_w.exp().masked_fill(outside, 0.0), after.select(-1, 0)};
}

void check_shapes(const torch::Tensor& z, const torch::Tensor& q_pos, const torch::Tensor& k_pos,
                  const torch::Tensor& visible) {
  TORCH_CHECK(z.dim() >= 2 && q_pos.dim() == 1 && k_pos.dim() == 1 && z.size(-2) == q_pos.size(0) &&
                  z.size(-1) == k_pos.size(0),
              "stick_breaking_weights: z ", z.sizes(), " does not match q_pos ", q_pos.sizes(),
              " and k_pos ", k_pos.sizes());
  TORCH_CHECK(!visible.defined() || (visible.dim() == 2 && visible.size(0) == q_pos.size(0) &&
                                     visible.size(1) == k_pos.size(0)),
              "stick_breaking_weights: visible must be [", q_pos.size(0), ",", k_pos.size(0),
              "], got ", visible.sizes());
}

// Log-weights of every row, from the query backwards: acc is Σ log(1 − β) over the earlier keys
// nearer the query than j. Keys that do not break the stick get −inf (weight 0); the own key the
// whole sum (the leftover).
template <typename T>
void log_weights(const T* z, const T* softplus, T* out, const uint8_t* earlier, const int64_t* own,
                 int64_t rows, int64_t bq, int64_t bk) {
  cpu::parallel_for(0, rows, cpu::row_grain(bk), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t i = r % bq;
      const T* zr = z + r * bk;
      const T* sr = softplus + r * bk;
      T* o = out + r * bk;
      const uint8_t* e = earlier + i * bk;
      T acc = 0;
      for (int64_t j = bk - 1; j >= 0; --j) {
        if (e[j]) {
          o[j] = zr[j] - sr[j] + acc;
          acc -= sr[j];
        } else {
          o[j] = -std::numeric_limits<T>::infinity();
        }
      }
      if (own[i] >= 0) o[own[i]] = acc;
    }
  });
}

// dz of every row (the header's formula), from the far end towards the query: run is the own
// key's g plus g of the earlier keys farther away than j, whose weights all hold (1 − β_ij).
template <typename T>
void logit_grads(const T* w, const T* dw, const T* beta, T* dz, const uint8_t* earlier,
                 const int64_t* own, int64_t rows, int64_t bq, int64_t bk) {
  cpu::parallel_for(0, rows, cpu::row_grain(bk), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t i = r % bq;
      const T* wr = w + r * bk;
      const T* dr = dw + r * bk;
      const T* br = beta + r * bk;
      T* o = dz + r * bk;
      const uint8_t* e = earlier + i * bk;
      T run = own[i] >= 0 ? wr[own[i]] * dr[own[i]] : T(0);
      for (int64_t j = 0; j < bk; ++j) {
        if (e[j]) {
          const T g = wr[j] * dr[j];
          o[j] = (1 - br[j]) * g - br[j] * run;
          run += g;
        } else {
          o[j] = 0;
        }
      }
    }
  });
}

class StickBreakingFunction : public torch::autograd::Function<StickBreakingFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& z_in,
                               const torch::Tensor& earlier, const torch::Tensor& own) {
    const torch::Tensor z = z_in.contiguous();
    const int64_t bq = z.size(-2), bk = z.size(-1), rows = z.numel() / std::max<int64_t>(bk, 1);
    const torch::Tensor softplus = torch::softplus(z);
    torch::Tensor w = torch::empty_like(z);
    AT_DISPATCH_FLOATING_TYPES(z.scalar_type(), "stick_breaking_forward", [&] {
      log_weights<scalar_t>(z.data_ptr<scalar_t>(), softplus.data_ptr<scalar_t>(),
                            w.data_ptr<scalar_t>(), earlier.data_ptr<uint8_t>(),
                            own.data_ptr<int64_t>(), rows, bq, bk);
    });
    w.exp_();
    ctx->save_for_backward({z, w, earlier, own});
    return w;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const torch::Tensor &z = saved[0], &w = saved[1], &earlier = saved[2], &own = saved[3];
    const torch::Tensor dw = grads[0].to(w.scalar_type()).contiguous();
    const torch::Tensor beta = torch::sigmoid(z);
    torch::Tensor dz = torch::empty_like(z);
    const int64_t bq = z.size(-2), bk = z.size(-1), rows = z.numel() / std::max<int64_t>(bk, 1);
    AT_DISPATCH_FLOATING_TYPES(z.scalar_type(), "stick_breaking_backward", [&] {
      logit_grads<scalar_t>(w.data_ptr<scalar_t>(), dw.data_ptr<scalar_t>(),
                            beta.data_ptr<scalar_t>(), dz.data_ptr<scalar_t>(),
                            earlier.data_ptr<uint8_t>(), own.data_ptr<int64_t>(), rows, bq, bk);
    });
    return {dz, torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor stick_breaking_weights(const torch::Tensor& z, const torch::Tensor& q_pos,
                                     const torch::Tensor& k_pos, const torch::Tensor& visible) {
  check_shapes(z, q_pos, k_pos, visible);
  const bool fused = z.device().is_cpu() &&
                     (z.scalar_type() == torch::kFloat || z.scalar_type() == torch::kDouble);
  if (z.numel() == 0) return torch::zeros_like(z);
  if (!fused) return stick_breaking_weights_reference(z, q_pos, k_pos, visible);
  const StickLayout layout = stick_layout(q_pos, k_pos, visible);
  return StickBreakingFunction::apply(z, layout.earlier, layout.own);
}

torch::Tensor stick_breaking_weights_reference(const torch::Tensor& z, const torch::Tensor& q_pos,
                                               const torch::Tensor& k_pos,
                                               const torch::Tensor& visible) {
  check_shapes(z, q_pos, k_pos, visible);
  if (z.numel() == 0) return torch::zeros_like(z);
  const torch::Tensor qp = q_pos.unsqueeze(1), kp = k_pos.unsqueeze(0);
  torch::Tensor earlier = kp.lt(qp);  // [bq,bk]
  if (visible.defined()) earlier = earlier.logical_and(visible);
  const torch::Tensor own = kp.eq(qp).to(z.scalar_type());
  const StickShares shares = stick_shares(z, earlier, torch::Tensor());
  // The own key takes the leftover ∏_{k<i} (1 − β_ik).
  return shares.weights + own * shares.total.unsqueeze(-1).exp();
}

namespace {

struct SbGeometry {
  int64_t BH = 0, Tq = 0, Tk = 0, Dh = 0, n_cached = 0, window = 0, tile_q = 1, tile_k = 1;
  double scale = 1;
};

// Keys [begin, end) that can break some stick of query tile [i0, i1): before its last query
// (whose own key is n_cached + i1 − 1) and inside its first query's window.
std::pair<int64_t, int64_t> stick_keys(const SbGeometry& g, int64_t i0, int64_t i1) {
  const int64_t begin = g.window > 0 ? std::max<int64_t>(0, g.n_cached + i0 - g.window + 1) : 0;
  return {begin, std::max(begin, g.n_cached + i1 - 1)};
}

// [bq,bk] bool: key j (index) strictly before query i (index n_cached + i) and inside its window.
torch::Tensor earlier_keys(const SbGeometry& g, int64_t i0, int64_t i1, int64_t j0, int64_t j1,
                           const torch::Device& device) {
  const auto opts = torch::TensorOptions().dtype(torch::kLong).device(device);
  const torch::Tensor d = (torch::arange(g.n_cached + i0, g.n_cached + i1, opts).unsqueeze(1) -
                           torch::arange(j0, j1, opts).unsqueeze(0));
  return g.window > 0 ? d.gt(0).logical_and(d.lt(g.window)) : d.gt(0);
}

// One key tile's weights for a query tile whose stick already lost `acc` ([BH,bq], log) to
// the nearer keys: z, the weights A [BH,bq,bk] (0 outside `earlier`), and in `total` Σ log(1 − β)
// over this tile's keys.
struct TileWeights {
  torch::Tensor z, weights, total;
};

TileWeights tile_weights(const torch::Tensor& qt, const torch::Tensor& kt, const torch::Tensor& acc,
                         const torch::Tensor& earlier, double scale) {
  TileWeights t;
  t.z = torch::bmm(qt, kt.transpose(1, 2)) * scale;
  StickShares shares = stick_shares(t.z, earlier, acc);
  t.weights = std::move(shares.weights);
  t.total = std::move(shares.total);
  return t;
}

// Calls visit(j0, j1, earlier) for the key tiles of query tile [i0, i1), nearest first.
template <typename Visit>
void key_tiles_backwards(const SbGeometry& g, int64_t i0, int64_t i1, const torch::Device& device,
                         Visit&& visit) {
  const auto [begin, end] = stick_keys(g, i0, i1);
  for (int64_t j1 = end; j1 > begin;) {
    const int64_t j0 = std::max(begin, j1 - g.tile_k);
    visit(j0, j1, earlier_keys(g, i0, i1, j0, j1, device));
    j1 = j0;
  }
}

class StickBreakingTiled : public torch::autograd::Function<StickBreakingTiled> {
 public:
  // q [BH,Tq,Dh], k and v [BH,Tk,Dh], contiguous.
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const SbGeometry& g) {
    torch::Tensor out = torch::empty_like(q);
    torch::Tensor lost = torch::empty({g.BH, g.Tq}, q.options());  // Σ log(1 − β) per query
    for (int64_t i0 = 0; i0 < g.Tq; i0 += g.tile_q) {
      const int64_t bq = std::min(g.tile_q, g.Tq - i0);
      const torch::Tensor qt = q.narrow(1, i0, bq);
      torch::Tensor acc = torch::zeros({g.BH, bq}, q.options());
      torch::Tensor o = torch::zeros({g.BH, bq, g.Dh}, q.options());
      key_tiles_backwards(
          g, i0, i0 + bq, q.device(), [&](int64_t j0, int64_t j1, const torch::Tensor& earlier) {
            const TileWeights t = tile_weights(qt, k.narrow(1, j0, j1 - j0), acc, earlier, g.scale);
            o.add_(torch::bmm(t.weights, v.narrow(1, j0, j1 - j0)));
            acc.add_(t.total);
          });
      o.add_(acc.exp().unsqueeze(-1) * v.narrow(1, g.n_cached + i0, bq));
      out.narrow(1, i0, bq).copy_(o);
      lost.narrow(1, i0, bq).copy_(acc);
    }
    ctx->save_for_backward({q, k, v, out, lost});
    ctx->saved_data["geometry"] =
        std::vector<int64_t>{g.BH, g.Tq, g.Tk, g.Dh, g.n_cached, g.window, g.tile_q, g.tile_k};
    ctx->saved_data["scale"] = g.scale;
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const torch::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &out = saved[3],
                        &lost = saved[4];
    const std::vector<int64_t> d = ctx->saved_data["geometry"].toIntVector();
    SbGeometry g;
    g.BH = d[0], g.Tq = d[1], g.Tk = d[2], g.Dh = d[3], g.n_cached = d[4], g.window = d[5];
    g.tile_q = d[6], g.tile_k = d[7];
    g.scale = ctx->saved_data["scale"].toDouble();
    const torch::Tensor dout = grads[0].to(q.scalar_type()).contiguous();
    // D_i = dO_i·o_i = Σ_l g_il + g_ii: every earlier key's g plus the leftover's.
    const torch::Tensor D = (dout * out).sum(-1);
    torch::Tensor dq = torch::zeros_like(q), dk = torch::zeros_like(k), dv = torch::zeros_like(v);
    for (int64_t i0 = 0; i0 < g.Tq; i0 += g.tile_q) {
      const int64_t bq = std::min(g.tile_q, g.Tq - i0);
      const torch::Tensor qt = q.narrow(1, i0, bq), dot = dout.narrow(1, i0, bq);
      const torch::Tensor Dt = D.narrow(1, i0, bq).unsqueeze(-1);
      dv.narrow(1, g.n_cached + i0, bq).add_(lost.narrow(1, i0, bq).exp().unsqueeze(-1) * dot);
      torch::Tensor acc = torch::zeros({g.BH, bq}, q.options());
      torch::Tensor g_near = torch::zeros({g.BH, bq, 1}, q.options());  // Σ g of nearer tiles
      torch::Tensor dqt = torch::zeros_like(qt);
      key_tiles_backwards(
          g, i0, i0 + bq, q.device(), [&](int64_t j0, int64_t j1, const torch::Tensor& earlier) {
            const int64_t bk = j1 - j0;
            const torch::Tensor kt = k.narrow(1, j0, bk), vt = v.narrow(1, j0, bk);
            const TileWeights t = tile_weights(qt, kt, acc, earlier, g.scale);
            const torch::Tensor gw = t.weights * torch::bmm(dot, vt.transpose(1, 2));  // A ∘ dA
            // g of the own key and of every key farther than j: D − Σ_{l ≥ j} g_il.
            const torch::Tensor farther = Dt - g_near - gw.flip(-1).cumsum(-1).flip(-1);
            const torch::Tensor beta = torch::sigmoid(t.z);
            const torch::Tensor dz =
                ((1 - beta) * gw - beta * farther).masked_fill(earlier.logical_not(), 0.0) *
                g.scale;
            dqt.add_(torch::bmm(dz, kt));
            dk.narrow(1, j0, bk).add_(torch::bmm(dz.transpose(1, 2), qt));
            dv.narrow(1, j0, bk).add_(torch::bmm(t.weights.transpose(1, 2), dot));
            g_near.add_(gw.sum(-1, true));
            acc.add_(t.total);
          });
      dq.narrow(1, i0, bq).add_(dqt);
    }
    return {dq, dk, dv, torch::Tensor()};
  }
};

}  // namespace

torch::Tensor stick_breaking_attention_tiled(const torch::Tensor& q, const torch::Tensor& k,
                                             const torch::Tensor& v,
                                             const StickBreakingTiles& opts) {
  TORCH_CHECK(q.dim() == 4 && k.sizes() == v.sizes() && k.dim() == 4 && q.size(0) == k.size(0) &&
                  q.size(1) == k.size(1) && q.size(3) == k.size(3),
              "stick_breaking_attention_tiled: q [B,H,Tq,Dh] and k, v [B,H,Tk,Dh] expected, got ",
              q.sizes(), ", ", k.sizes(), ", ", v.sizes());
  const auto dtype = q.scalar_type();
  TORCH_CHECK((dtype == torch::kFloat || dtype == torch::kDouble) && k.scalar_type() == dtype &&
                  v.scalar_type() == dtype,
              "stick_breaking_attention_tiled: fp32 or fp64 q, k, v of one dtype expected");
  TORCH_CHECK(k.size(2) >= q.size(2), "stick_breaking_attention_tiled: fewer keys (", k.size(2),
              ") than queries (", q.size(2), ")");
  TORCH_CHECK(opts.tile_q > 0 && opts.tile_k > 0,
              "stick_breaking_attention_tiled: tiles must be > 0");
  SbGeometry g;
  g.BH = q.size(0) * q.size(1), g.Tq = q.size(2), g.Tk = k.size(2), g.Dh = q.size(3);
  g.n_cached = g.Tk - g.Tq, g.window = opts.window, g.tile_q = opts.tile_q, g.tile_k = opts.tile_k;
  g.scale = opts.scale > 0 ? opts.scale : 1.0 / std::sqrt(static_cast<double>(g.Dh));
  const auto rows = [&](const torch::Tensor& x) {
    return x.reshape({g.BH, x.size(2), g.Dh}).contiguous();
  };
  return StickBreakingTiled::apply(rows(q), rows(k), rows(v), g).view(q.sizes());
}

}  // namespace hybridlab
