// linear_cpu and matmul_cpu: products and their gradients as per-thread blocks of
// single-threaded GEMMs.

#include "layers/kernels/linear_cpu.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <vector>

#include "layers/kernels/cpu_blas.h"
#include "layers/kernels/cpu_parallel.h"
#include "layers/kernels/cpu_vector.h"

namespace hybridlab {

namespace {

// f(begin, end) on one slice of [0, n) per intra-op thread (cpu::parallel_for's split), with
// single-threaded BLAS inside (an OpenMP OpenBLAS already is within the team; a pthreads one is
// held to one thread).
template <class F>
void split(int64_t n, F&& f) {
  const cpu::SingleThreadedBlas single_threaded_blas;
  cpu::parallel_for(0, n, 1, f);
}

// C = op(A) op(B) for row-major buffers, split over the rows of C or, when it has fewer rows
// than columns, over its columns.
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

// sizes with the last one replaced by `last`.
std::vector<int64_t> with_last(c10::IntArrayRef sizes, int64_t last) {
  std::vector<int64_t> v = sizes.vec();
  v.back() = last;
  return v;
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
    ctx->saved_data["x_shape"] = x_in.sizes().vec();
    return y.view(with_last(x_in.sizes(), out));
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

// A 3-D operand as BLAS sees it: row-major blocks with leading dimension ld, transposed when the
// view's columns are the unit-stride direction. `keep` holds a contiguous copy when neither is.
struct Operand {
  torch::Tensor keep;
  int64_t batch_stride, ld;
  bool trans;
};

Operand operand(const torch::Tensor& t) {
  const int64_t r = t.size(1), c = t.size(2);
  if (t.stride(2) == 1 || c == 1) return {t, t.stride(0), r == 1 ? c : t.stride(1), false};
  if (t.stride(1) == 1 || r == 1) return {t, t.stride(0), c == 1 ? r : t.stride(2), true};
  const torch::Tensor copy = t.contiguous();
  return {copy, copy.stride(0), c, false};
}

bool bmm_cpu_applies(const torch::Tensor& c, const torch::Tensor& a, const torch::Tensor& b) {
  for (const auto* t : {&c, &a, &b}) {
    if (!t->device().is_cpu() || t->dim() != 3 || t->scalar_type() != a.scalar_type()) return false;
  }
  return (a.scalar_type() == torch::kFloat || a.scalar_type() == torch::kDouble) &&
         !cpu::grad_needed({c, a, b}) && (c.stride(2) == 1 || c.size(2) == 1);
}

// c = alpha · a b + beta · c over the batch, c with unit-stride rows.
void bmm_raw(torch::Tensor& c, const torch::Tensor& a, const torch::Tensor& b, double alpha,
             double beta) {
  const int64_t m = a.size(1), k = a.size(2), n = b.size(2);
  const Operand oa = operand(a), ob = operand(b);
  const int64_t ldc = m == 1 ? n : c.stride(1), sc = c.stride(0);
  AT_DISPATCH_FLOATING_TYPES(a.scalar_type(), "bmm_cpu", [&] {
    const scalar_t* ap = oa.keep.data_ptr<scalar_t>();
    const scalar_t* bp = ob.keep.data_ptr<scalar_t>();
    scalar_t* cp = c.data_ptr<scalar_t>();
    split(a.size(0), [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        cpu::gemm<scalar_t>(oa.trans, ob.trans, m, n, k, static_cast<scalar_t>(alpha),
                            ap + i * oa.batch_stride, oa.ld, bp + i * ob.batch_stride, ob.ld,
                            static_cast<scalar_t>(beta), cp + i * sc, ldc);
      }
    });
  });
}

class MatmulCpu : public torch::autograd::Function<MatmulCpu> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& a_in,
                               const torch::Tensor& b_in, bool trans_b) {
    // [N, ·, ·] views (reshape copies only where the batch dimensions do not merge).
    const torch::Tensor a = a_in.reshape({-1, a_in.size(-2), a_in.size(-1)});
    const torch::Tensor b = b_in.reshape({-1, b_in.size(-2), b_in.size(-1)});
    const int64_t m = a.size(1), n = trans_b ? b.size(1) : b.size(2);
    torch::Tensor c = torch::empty({a.size(0), m, n}, a.options());
    bmm_raw(c, a, trans_b ? b.transpose(1, 2) : b, 1, 0);
    ctx->save_for_backward({a, b});
    ctx->saved_data["trans_b"] = trans_b;
    ctx->saved_data["a_shape"] = a_in.sizes().vec();
    ctx->saved_data["b_shape"] = b_in.sizes().vec();
    return c.view(with_last(a_in.sizes(), n));
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    TORCH_CHECK(!torch::GradMode::is_enabled(),
                "matmul_cpu: not twice differentiable (create_graph); use torch::matmul");
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& a = saved[0];
    const torch::Tensor& b = saved[1];
    const bool trans_b = ctx->saved_data["trans_b"].toBool();
    const int64_t N = a.size(0), m = a.size(1), k = a.size(2);
    const int64_t n = trans_b ? b.size(1) : b.size(2);
    const torch::Tensor dc = grads[0].reshape({N, m, n});
    torch::Tensor da, db;
    if (ctx->needs_input_grad(0)) {  // dA = dC op(B)ᵀ
      da = torch::empty({N, m, k}, a.options());
      bmm_raw(da, dc, trans_b ? b : b.transpose(1, 2), 1, 0);
      da = da.view(ctx->saved_data["a_shape"].toIntVector());
    }
    if (ctx->needs_input_grad(1)) {  // B [n,k]: dB = dCᵀ A; B [k,n]: dB = Aᵀ dC
      db = torch::empty(b.sizes(), b.options());
      bmm_raw(db, trans_b ? dc.transpose(1, 2) : a.transpose(1, 2), trans_b ? a : dc, 1, 0);
      db = db.view(ctx->saved_data["b_shape"].toIntVector());
    }
    return {da, db, {}};
  }
};

}  // namespace

torch::Tensor bmm_cpu(const torch::Tensor& a, const torch::Tensor& b) {
  TORCH_CHECK(a.dim() == 3 && b.dim() == 3 && a.size(0) == b.size(0) && a.size(2) == b.size(1),
              "bmm_cpu: a [N, m, k] and b [N, k, n]; got a ", a.sizes(), ", b ", b.sizes());
  torch::Tensor c = torch::empty({a.size(0), a.size(1), b.size(2)}, a.options());
  if (!bmm_cpu_applies(c, a, b)) return at::bmm(a, b);
  bmm_raw(c, a, b, 1, 0);
  return c;
}

void bmm_add_(torch::Tensor c, const torch::Tensor& a, const torch::Tensor& b, double alpha) {
  TORCH_CHECK(a.dim() == 3 && b.dim() == 3 && c.dim() == 3 && a.size(0) == b.size(0) &&
                  a.size(2) == b.size(1) && c.size(0) == a.size(0) && c.size(1) == a.size(1) &&
                  c.size(2) == b.size(2),
              "bmm_add_: c [N, m, n], a [N, m, k], b [N, k, n]; got c ", c.sizes(), ", a ",
              a.sizes(), ", b ", b.sizes());
  if (!bmm_cpu_applies(c, a, b)) {
    c.baddbmm_(a, b, 1, alpha);
    return;
  }
  bmm_raw(c, a, b, alpha, 1);
}

bool matmul_cpu_applies(const torch::Tensor& a, const torch::Tensor& b, bool trans_b) {
  if (!a.defined() || !b.defined() || !a.device().is_cpu() || !b.device().is_cpu()) return false;
  if (a.scalar_type() != b.scalar_type()) return false;
  if (a.scalar_type() != torch::kFloat && a.scalar_type() != torch::kDouble) return false;
  if (a.dim() < 3 || b.dim() != a.dim()) return false;
  for (int64_t d = 0; d < a.dim() - 2; ++d) {
    if (a.size(d) != b.size(d)) return false;
  }
  return a.size(-1) == (trans_b ? b.size(-1) : b.size(-2));
}

torch::Tensor matmul_cpu(const torch::Tensor& a, const torch::Tensor& b, bool trans_b) {
  TORCH_CHECK(matmul_cpu_applies(a, b, trans_b),
              "matmul_cpu: a [..., m, k] and b [..., k, n] (or [..., n, k] with trans_b) with the "
              "same batch dimensions, both fp32 or both fp64 CPU tensors; got a ",
              a.sizes(), " ", a.scalar_type(), ", b ", b.sizes(), " ", b.scalar_type());
  return MatmulCpu::apply(a, b, trans_b);
}

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
