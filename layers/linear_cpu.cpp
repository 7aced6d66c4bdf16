// linear_cpu: y = x Wᵀ and its gradients as per-thread blocks of single-threaded GEMMs.

#include "layers/linear_cpu.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>

#include "layers/cpu_blas.h"
#include "layers/cpu_parallel.h"

namespace hybridlab {

namespace {

// Runs f(begin, end) on `parts` even slices of [0, n), one per thread of a cpu::parallel_for
// team; BLAS inside is single-threaded (an OpenMP OpenBLAS is within a parallel region, a
// pthreads one is held to one thread).
template <class F>
void split(int64_t n, F&& f) {
  const int64_t parts = std::max<int64_t>(1, std::min<int64_t>(at::get_num_threads(), n));
  const cpu::SingleThreadedBlas single_threaded_blas;
  cpu::parallel_for(0, parts, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) f(n * p / parts, n * (p + 1) / parts);
  });
}

// C = op(A) op(B) for row-major contiguous buffers, split over the rows of C (split_rows) or its
// columns.
template <class S>
void gemm_split(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const S* a, int64_t lda,
                const S* b, int64_t ldb, S* c, int64_t ldc) {
  if (m >= n) {
    split(m, [&](int64_t r0, int64_t r1) {
      const S* ar = ta ? a + r0 : a + r0 * lda;
      cpu::gemm<S>(ta, tb, r1 - r0, n, k, 1, ar, lda, b, ldb, 0, c + r0 * ldc, ldc);
    });
  } else {
    split(n, [&](int64_t c0, int64_t c1) {
      const S* bc = tb ? b + c0 * ldb : b + c0;
      cpu::gemm<S>(ta, tb, m, c1 - c0, k, 1, a, lda, bc, ldb, 0, c + c0, ldc);
    });
  }
}

class LinearCpu : public torch::autograd::Function<LinearCpu> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x_in,
                               const torch::Tensor& w_in) {
    const torch::Tensor w = w_in.contiguous();
    const int64_t out = w.size(0), in = w.size(1);
    const torch::Tensor x = x_in.reshape({-1, in}).contiguous();
    const int64_t rows = x.size(0);
    torch::Tensor y = torch::empty({rows, out}, x.options());
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "linear_cpu", [&] {
      gemm_split<scalar_t>(false, true, rows, out, in, x.data_ptr<scalar_t>(), in,
                           w.data_ptr<scalar_t>(), in, y.data_ptr<scalar_t>(), out);
    });
    ctx->save_for_backward({x, w});
    std::vector<int64_t> shape = x_in.sizes().vec();
    shape.back() = out;
    ctx->saved_data["x_shape"] = x_in.sizes().vec();
    return y.view(shape);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    TORCH_CHECK(!torch::GradMode::is_enabled(),
                "linear_cpu: not twice differentiable (create_graph); use torch::linear");
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& x = saved[0];
    const torch::Tensor& w = saved[1];
    const int64_t rows = x.size(0), in = x.size(1), out = w.size(0);
    const torch::Tensor dy = grads[0].reshape({rows, out}).contiguous();
    torch::Tensor dx, dw;
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "linear_cpu_backward", [&] {
      if (ctx->needs_input_grad(0)) {
        dx = torch::empty({rows, in}, x.options());
        gemm_split<scalar_t>(false, false, rows, in, out, dy.data_ptr<scalar_t>(), out,
                             w.data_ptr<scalar_t>(), in, dx.data_ptr<scalar_t>(), in);
        dx = dx.view(ctx->saved_data["x_shape"].toIntVector());
      }
      if (ctx->needs_input_grad(1)) {
        dw = torch::empty({out, in}, w.options());
        gemm_split<scalar_t>(true, false, out, in, rows, dy.data_ptr<scalar_t>(), out,
                             x.data_ptr<scalar_t>(), in, dw.data_ptr<scalar_t>(), in);
      }
    });
    return {dx, dw};
  }
};

}  // namespace

bool cpu_linear_applies(const torch::Tensor& x, const torch::Tensor& w) {
  return x.defined() && w.defined() && x.device().is_cpu() && w.device().is_cpu() &&
         (x.scalar_type() == torch::kFloat || x.scalar_type() == torch::kDouble) &&
         w.scalar_type() == x.scalar_type() && w.dim() == 2 && x.dim() >= 1 &&
         x.size(-1) == w.size(1);
}

torch::Tensor linear_cpu(const torch::Tensor& x, const torch::Tensor& w) {
  TORCH_CHECK(cpu_linear_applies(x, w),
              "linear_cpu: x [..., in] and w [out, in], both fp32 or "
              "both fp64 CPU tensors; got x ",
              x.sizes(), " ", x.scalar_type(), ", w ", w.sizes(), " ", w.scalar_type());
  return LinearCpu::apply(x, w);
}

torch::Tensor project(const torch::nn::Linear& proj, const torch::Tensor& x, bool fused) {
  if (fused && !proj->bias.defined() && cpu_linear_applies(x, proj->weight)) {
    return linear_cpu(x, proj->weight);
  }
  return proj.ptr()->forward(x);  // the holder is const, the module it shares is not
}

}  // namespace hybridlab
