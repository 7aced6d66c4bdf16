#include "layers/stick_breaking.h"

#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <limits>

#include "layers/cpu_parallel.h"

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

// Rows of at least this many elements per chunk of parallel_for.
int64_t row_grain(int64_t bk) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(bk, 1)); }

// Log-weights of every row, from the query backwards: acc is Σ log(1 − β) over the earlier keys
// nearer the query than j. Keys that do not break the stick get −inf (weight 0); the own key the
// whole sum (the leftover).
template <typename T>
void log_weights(const T* z, const T* softplus, T* out, const uint8_t* earlier, const int64_t* own,
                 int64_t rows, int64_t bq, int64_t bk) {
  cpu::parallel_for(0, rows, row_grain(bk), [&](int64_t begin, int64_t end) {
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
  cpu::parallel_for(0, rows, row_grain(bk), [&](int64_t begin, int64_t end) {
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
  const torch::Tensor outside = earlier.logical_not();
  const torch::Tensor softplus = torch::softplus(z);
  const torch::Tensor log_keep = (-softplus).masked_fill(outside, 0.0);  // log(1 − β)
  // after[j] = Σ_{k ≥ j} log(1 − β_ik), summed from the query backwards.
  const torch::Tensor after = log_keep.flip(-1).cumsum(-1).flip(-1);
  const int64_t bk = z.size(-1);
  const torch::Tensor after_next =
      torch::cat({after.narrow(-1, 1, bk - 1), torch::zeros_like(after.narrow(-1, 0, 1))}, -1);
  const torch::Tensor weights = (z - softplus + after_next).exp().masked_fill(outside, 0.0);
  const torch::Tensor leftover = after.narrow(-1, 0, 1).exp();  // ∏_{k<i} (1 − β_ik)
  return weights + own * leftover;
}

}  // namespace hybridlab
