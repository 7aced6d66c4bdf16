#include "layers/norm.h"

#include <torch/torch.h>

#include <cmath>

#include "layers/kernels/cpu_vector.h"
#include "layers/kernels/rms_norm_cpu.h"

namespace hybridlab {

namespace {

// out_r = x_r · (‖x_r‖² / D + eps)^{-1/2} ⊙ w [⊙ gate_r], row by row; x, gate, out [R, D], w [D],
// sq [R] = ‖x_r‖². The row norms come from LibTorch (a vectorised reduction) so that this loop
// is purely elementwise.
template <class S>
inline __attribute__((always_inline)) void rms_norm_rows(const S* x, const S* sq, const S* w,
                                                         const S* gate, S* out, int64_t R,
                                                         int64_t D, double eps) {
  for (int64_t r = 0; r < R; ++r) {
    const S inv = static_cast<S>(1.0 / std::sqrt(static_cast<double>(sq[r]) / D + eps));
    const S* __restrict xr = x + r * D;
    S* __restrict o = out + r * D;
    if (gate) {
      const S* __restrict g = gate + r * D;
      for (int64_t d = 0; d < D; ++d) o[d] = xr[d] * inv * w[d] * g[d];
    } else {
      for (int64_t d = 0; d < D; ++d) o[d] = xr[d] * inv * w[d];
    }
  }
}

HYBRIDLAB_VECTOR_CLONES
void rms_norm_any(const float* x, const float* sq, const float* w, const float* gate, float* out,
                  int64_t R, int64_t D, double eps) {
  rms_norm_rows<float>(x, sq, w, gate, out, R, D, eps);
}

HYBRIDLAB_VECTOR_CLONES
void rms_norm_any(const double* x, const double* sq, const double* w, const double* gate,
                  double* out, int64_t R, int64_t D, double eps) {
  rms_norm_rows<double>(x, sq, w, gate, out, R, D, eps);
}

// Forward-only fused RMSNorm (optionally times a gate), for evaluation and decoding; undefined
// when the fast path does not apply (see cpu::grad_needed).
torch::Tensor fused_rms_norm(const torch::Tensor& x, const torch::Tensor& w,
                             const torch::Tensor& gate, double eps) {
  if (cpu::grad_needed({x, w, gate}) || !cpu::cpu_floating({x, w, gate})) return {};
  const auto dt = x.scalar_type();
  const torch::Tensor xc = x.contiguous();
  const torch::Tensor wc = w.to(dt).contiguous();
  const torch::Tensor gc = gate.defined() ? gate.to(dt).contiguous() : torch::Tensor();
  const int64_t D = x.size(-1), R = D > 0 ? x.numel() / D : 0;
  const torch::Tensor sq = at::linalg_vector_norm(xc, 2, {-1}).square_().contiguous();
  torch::Tensor out = torch::empty_like(xc);
  AT_DISPATCH_FLOATING_TYPES(dt, "fused_rms_norm", [&] {
    rms_norm_any(xc.data_ptr<scalar_t>(), sq.data_ptr<scalar_t>(), wc.data_ptr<scalar_t>(),
                 gc.defined() ? gc.data_ptr<scalar_t>() : nullptr, out.data_ptr<scalar_t>(), R, D,
                 eps);
  });
  return out;
}

torch::Tensor rms_normalize(const torch::Tensor& x, double eps) {
  const torch::Tensor xs = x.scalar_type() == torch::kDouble ? x : x.to(torch::kFloat);
  return xs * torch::rsqrt(xs.pow(2).mean(-1, /*keepdim=*/true) + eps);
}
}  // namespace

RMSNorm::RMSNorm(int64_t dim, double eps, bool fused_kernels)
    : dim_(dim), eps_(eps), fused_kernels_(fused_kernels) {
  TORCH_CHECK(dim > 0, "RMSNorm: dim must be > 0, got ", dim);
  weight = register_parameter("weight", torch::ones({dim}));
}

torch::Tensor RMSNorm::forward(const torch::Tensor& x) {
  TORCH_CHECK(x.size(-1) == dim_, "RMSNorm: expected last dim ", dim_, ", got ", x.sizes());
  if (torch::Tensor fused = fused_rms_norm(x, weight, {}, eps_); fused.defined()) return fused;
  if (fused_kernels_ && cpu::cpu_floating({x, weight})) {
    return rms_norm_fused_cpu(x, weight, {}, eps_);
  }
  return (rms_normalize(x, eps_) * weight).to(x.scalar_type());
}

GatedRMSNorm::GatedRMSNorm(int64_t dim, double eps, bool fused_kernels)
    : dim_(dim), eps_(eps), fused_kernels_(fused_kernels) {
  TORCH_CHECK(dim > 0, "GatedRMSNorm: dim must be > 0, got ", dim);
  weight = register_parameter("weight", torch::ones({dim}));
}

torch::Tensor GatedRMSNorm::forward(const torch::Tensor& x, const torch::Tensor& z) {
  TORCH_CHECK(x.size(-1) == dim_ && z.sizes() == x.sizes(), "GatedRMSNorm: x ", x.sizes(), " z ",
              z.sizes(), " last dim ", dim_);
  if (!cpu::grad_needed({x, z, weight}) && cpu::cpu_floating({x, z})) {
    const torch::Tensor gate = torch::silu(z.to(x.scalar_type()));
    if (torch::Tensor fused = fused_rms_norm(x, weight, gate, eps_); fused.defined()) return fused;
  }
  if (fused_kernels_ && cpu::cpu_floating({x, z, weight})) {
    return rms_norm_fused_cpu(x, weight, z, eps_);
  }
  const torch::Tensor n = rms_normalize(x, eps_) * weight;
  const torch::Tensor zf = z.scalar_type() == torch::kDouble ? z : z.to(torch::kFloat);
  return (n * torch::silu(zf)).to(x.scalar_type());
}

torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
  const torch::Tensor xf = x.scalar_type() == torch::kDouble ? x : x.to(torch::kFloat);
  return (xf * torch::rsqrt(xf.pow(2).mean(-1, true) + eps)).to(x.scalar_type()) * weight;
}

torch::Tensor l2_normalize(const torch::Tensor& x, double eps, bool fused) {
  if (fused && x.dim() >= 1 && x.size(-1) > 0 && cpu::cpu_floating({x}) && cpu::grad_needed({x})) {
    // x (Σx² + eps)^{-1/2} = x (Σx²/D + eps/D)^{-1/2} · D^{-1/2}: an RMSNorm with a fixed weight.
    const int64_t D = x.size(-1);
    const torch::Tensor w = torch::full({D}, 1.0 / std::sqrt(static_cast<double>(D)), x.options());
    return rms_norm_fused_cpu(x, w, {}, eps / static_cast<double>(D));
  }
  return x * torch::rsqrt(x.pow(2).sum(-1, /*keepdim=*/true) + eps);
}

}  // namespace hybridlab
