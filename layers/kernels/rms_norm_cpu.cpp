// RMSNorm and gated RMSNorm in training: one fused CPU pass forward and one backward, as a
// torch::autograd::Function. The tensor form records about ten LibTorch ops per norm (square,
// mean, rsqrt, products, SiLU) and as many backward kernels, each a full pass over [B,T,D].
//
// Derivation (n = x·r, r = (Σ_d x_d² / D + eps)^{-1/2}, y = n ⊙ w ⊙ g, g = SiLU(z) or 1):
//   dL/dw_d = Σ_rows dy_d · n_d · g_d
//   dL/dz_d = dy_d · n_d · w_d · σ(z_d) · (1 + z_d · (1 − σ(z_d)))       (SiLU' = σ + z σ (1 − σ))
//   dL/dx_d = r · (m_d − n_d · Σ_e m_e n_e / D),  m = dy ⊙ w ⊙ g          (∂r/∂x_d = −r³ x_d / D)

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <cmath>

#include "layers/kernels/cpu_parallel.h"
#include "layers/kernels/cpu_vector.h"
#include "layers/kernels/rms_norm_cpu.h"

namespace hybridlab {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// y, r for rows [r0, r1). x, z, sg = σ(z), y [R, D] (z and sg null without a gate), w [D],
// rinv [R]. σ comes precomputed from LibTorch's vectorised sigmoid: a scalar exp in these loops
// cost more than the passes the fusion saves.
template <class S>
inline __attribute__((always_inline)) void forward_rows(const S* x, const S* w, const S* z,
                                                        const S* sg, S* y, S* rinv, int64_t r0,
                                                        int64_t r1, int64_t D, double eps) {
  for (int64_t r = r0; r < r1; ++r) {
    const S* __restrict xr = x + r * D;
    S* __restrict yr = y + r * D;
    const S ss = cpu::dot(xr, xr, D);
    const S inv = static_cast<S>(1.0 / std::sqrt(static_cast<double>(ss) / D + eps));
    rinv[r] = inv;
    if (z) {
      const S* __restrict zr = z + r * D;
      const S* __restrict sr = sg + r * D;
      for (int64_t d = 0; d < D; ++d) yr[d] = xr[d] * inv * w[d] * (zr[d] * sr[d]);
    } else {
      for (int64_t d = 0; d < D; ++d) yr[d] = xr[d] * inv * w[d];
    }
  }
}

// dx, dz for rows [r0, r1), dw accumulated into dw_acc [D]. dx holds m = dy ⊙ w ⊙ g between
// the two passes over a row.
template <class S>
inline __attribute__((always_inline)) void backward_rows(const S* x, const S* w, const S* z,
                                                         const S* sg, const S* rinv, const S* dy,
                                                         S* dx, S* dz, S* dw_acc, int64_t r0,
                                                         int64_t r1, int64_t D) {
  for (int64_t r = r0; r < r1; ++r) {
    const S inv = rinv[r];
    const S* __restrict xr = x + r * D;
    const S* __restrict dyr = dy + r * D;
    S* __restrict dxr = dx + r * D;
    if (z) {
      const S* __restrict zr = z + r * D;
      const S* __restrict sr = sg + r * D;
      S* __restrict dzr = dz + r * D;
      for (int64_t d = 0; d < D; ++d) {
        const S n = xr[d] * inv, s = sr[d], g = zr[d] * s;
        const S m = dyr[d] * w[d] * g;
        dw_acc[d] += dyr[d] * n * g;
        dzr[d] = dyr[d] * n * w[d] * s * (S(1) + zr[d] * (S(1) - s));
        dxr[d] = m;
      }
    } else {
      for (int64_t d = 0; d < D; ++d) {
        const S n = xr[d] * inv, m = dyr[d] * w[d];
        dw_acc[d] += dyr[d] * n;
        dxr[d] = m;
      }
    }
    // Σ m·n, with n = x·inv, once the row's m are stored (a sum in lanes vectorises; one inside
    // the loop above would not).
    const S c = inv * cpu::dot(dxr, xr, D) / static_cast<S>(D);
    for (int64_t d = 0; d < D; ++d) dxr[d] = inv * (dxr[d] - xr[d] * inv * c);
  }
}

HYBRIDLAB_VECTOR_CLONES
void rms_forward_any(const float* x, const float* w, const float* z, const float* sg, float* y,
                     float* rinv, int64_t r0, int64_t r1, int64_t D, double eps) {
  forward_rows<float>(x, w, z, sg, y, rinv, r0, r1, D, eps);
}
HYBRIDLAB_VECTOR_CLONES
void rms_forward_any(const double* x, const double* w, const double* z, const double* sg, double* y,
                     double* rinv, int64_t r0, int64_t r1, int64_t D, double eps) {
  forward_rows<double>(x, w, z, sg, y, rinv, r0, r1, D, eps);
}
HYBRIDLAB_VECTOR_CLONES
void rms_backward_any(const float* x, const float* w, const float* z, const float* sg,
                      const float* rinv, const float* dy, float* dx, float* dz, float* dw_acc,
                      int64_t r0, int64_t r1, int64_t D) {
  backward_rows<float>(x, w, z, sg, rinv, dy, dx, dz, dw_acc, r0, r1, D);
}
HYBRIDLAB_VECTOR_CLONES
void rms_backward_any(const double* x, const double* w, const double* z, const double* sg,
                      const double* rinv, const double* dy, double* dx, double* dz, double* dw_acc,
                      int64_t r0, int64_t r1, int64_t D) {
  backward_rows<double>(x, w, z, sg, rinv, dy, dx, dz, dw_acc, r0, r1, D);
}

template <class S>
const S* ptr_or_null(const torch::Tensor& t) {
  return t.defined() ? t.data_ptr<S>() : nullptr;
}

class RmsNormFunction : public torch::autograd::Function<RmsNormFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& w,
                               const torch::Tensor& z, double eps) {
    const torch::Tensor xc = x.contiguous(), wc = w.contiguous();
    // An empty z stands for "no gate": Function::apply does not take undefined tensors.
    const torch::Tensor zc = z.numel() > 0 ? z.contiguous() : torch::Tensor();
    const int64_t D = x.size(-1), R = D > 0 ? x.numel() / D : 0;
    const torch::Tensor sg = zc.defined() ? torch::sigmoid(zc) : torch::Tensor();
    torch::Tensor y = torch::empty_like(xc);
    torch::Tensor rinv = torch::empty({R}, xc.options());
    AT_DISPATCH_FLOATING_TYPES(xc.scalar_type(), "rms_norm_fused_cpu", [&] {
      const scalar_t* xp = xc.data_ptr<scalar_t>();
      const scalar_t* wp = wc.data_ptr<scalar_t>();
      const scalar_t* zp = ptr_or_null<scalar_t>(zc);
      const scalar_t* sp = ptr_or_null<scalar_t>(sg);
      scalar_t* yp = y.data_ptr<scalar_t>();
      scalar_t* rp = rinv.data_ptr<scalar_t>();
      cpu::parallel_for(0, R, cpu::row_grain(D), [&](int64_t r0, int64_t r1) {
        rms_forward_any(xp, wp, zp, sp, yp, rp, r0, r1, D, eps);
      });
    });
    ctx->save_for_backward({xc, wc, zc.defined() ? zc : z, zc.defined() ? sg : z, rinv});
    return {y};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &w = saved[1], &rinv = saved[4];
    const bool gated = saved[2].numel() > 0;
    const torch::Tensor z = gated ? saved[2] : torch::Tensor();
    const torch::Tensor sg = gated ? saved[3] : torch::Tensor();
    const torch::Tensor dy = grads[0].contiguous();
    const int64_t D = x.size(-1), R = D > 0 ? x.numel() / D : 0;
    torch::Tensor dx = torch::empty_like(x);
    torch::Tensor dz = z.defined() ? torch::empty_like(z) : torch::Tensor();
    // One weight-gradient row per worker thread, summed after: no sharing inside the loop.
    torch::Tensor dw_rows = torch::zeros({at::get_num_threads(), D}, x.options());
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "rms_norm_fused_cpu_backward", [&] {
      const scalar_t* xp = x.data_ptr<scalar_t>();
      const scalar_t* wp = w.data_ptr<scalar_t>();
      const scalar_t* zp = ptr_or_null<scalar_t>(z);
      const scalar_t* sp = ptr_or_null<scalar_t>(sg);
      const scalar_t* rp = rinv.data_ptr<scalar_t>();
      const scalar_t* dyp = dy.data_ptr<scalar_t>();
      scalar_t* dxp = dx.data_ptr<scalar_t>();
      scalar_t* dzp = dz.defined() ? dz.data_ptr<scalar_t>() : nullptr;
      scalar_t* dwp = dw_rows.data_ptr<scalar_t>();
      cpu::parallel_for(0, R, cpu::row_grain(D), [&](int64_t r0, int64_t r1) {
        rms_backward_any(xp, wp, zp, sp, rp, dyp, dxp, dzp, dwp + at::get_thread_num() * D, r0, r1,
                         D);
      });
    });
    return {dx, dw_rows.sum(0), dz, torch::Tensor()};
  }
};

}  // namespace

torch::Tensor rms_norm_fused_cpu(const torch::Tensor& x, const torch::Tensor& weight,
                                 const torch::Tensor& z, double eps) {
  TORCH_CHECK(cpu::cpu_floating({x, weight, z}), "rms_norm_fused_cpu: fp32/fp64 CPU tensors only");
  TORCH_CHECK(x.dim() >= 1 && weight.dim() == 1 && weight.size(0) == x.size(-1),
              "rms_norm_fused_cpu: x ", x.sizes(), " and weight ", weight.sizes(),
              " disagree on the last dim");
  TORCH_CHECK(!z.defined() || z.sizes() == x.sizes(), "rms_norm_fused_cpu: z ", z.sizes(),
              " must have x's shape ", x.sizes());
  const auto dt = x.scalar_type();
  // The casts stay outside the Function so autograd carries their gradients.
  const torch::Tensor gate = z.defined() ? z.to(dt) : torch::empty({0}, x.options());
  return RmsNormFunction::apply(x, weight.to(dt), gate, eps)[0];
}

}  // namespace hybridlab
