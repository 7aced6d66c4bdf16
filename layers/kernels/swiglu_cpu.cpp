// SwiGLU's gating, SiLU(a) ⊙ b, in training: one fused CPU pass forward and one backward, as a
// torch::autograd::Function. The tensor form runs SiLU and the product as two passes forward and
// three backward.
//
//   h = a σ(a) b,   dL/da = dh · b · σ(a) (1 + a (1 − σ(a))),   dL/db = dh · a σ(a)

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "layers/kernels/cpu_parallel.h"
#include "layers/kernels/cpu_vector.h"
#include "layers/kernels/swiglu_cpu.h"

namespace hybridlab {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr int64_t kGrain = 16384;  // elements per parallel task: enough to repay a fork

// s = σ(a) comes precomputed from LibTorch's vectorised sigmoid: a scalar exp in these loops
// cost more than the passes the fusion saves.
template <class S>
inline __attribute__((always_inline)) void forward_range(const S* a, const S* s, const S* b, S* h,
                                                         int64_t i0, int64_t i1) {
  for (int64_t i = i0; i < i1; ++i) h[i] = a[i] * s[i] * b[i];
}

template <class S>
inline __attribute__((always_inline)) void backward_range(const S* a, const S* s, const S* b,
                                                          const S* dh, S* da, S* db, int64_t i0,
                                                          int64_t i1) {
  for (int64_t i = i0; i < i1; ++i) {
    da[i] = dh[i] * b[i] * s[i] * (S(1) + a[i] * (S(1) - s[i]));
    db[i] = dh[i] * a[i] * s[i];
  }
}

HYBRIDLAB_VECTOR_CLONES
void swiglu_forward_any(const float* a, const float* s, const float* b, float* h, int64_t i0,
                        int64_t i1) {
  forward_range<float>(a, s, b, h, i0, i1);
}
HYBRIDLAB_VECTOR_CLONES
void swiglu_forward_any(const double* a, const double* s, const double* b, double* h, int64_t i0,
                        int64_t i1) {
  forward_range<double>(a, s, b, h, i0, i1);
}
HYBRIDLAB_VECTOR_CLONES
void swiglu_backward_any(const float* a, const float* s, const float* b, const float* dh, float* da,
                         float* db, int64_t i0, int64_t i1) {
  backward_range<float>(a, s, b, dh, da, db, i0, i1);
}
HYBRIDLAB_VECTOR_CLONES
void swiglu_backward_any(const double* a, const double* s, const double* b, const double* dh,
                         double* da, double* db, int64_t i0, int64_t i1) {
  backward_range<double>(a, s, b, dh, da, db, i0, i1);
}

class SwiGluFunction : public torch::autograd::Function<SwiGluFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& a,
                               const torch::Tensor& b) {
    const torch::Tensor ac = a.contiguous(), bc = b.contiguous();
    const torch::Tensor sc = torch::sigmoid(ac);
    torch::Tensor h = torch::empty_like(ac);
    AT_DISPATCH_FLOATING_TYPES(ac.scalar_type(), "swiglu_fused_cpu", [&] {
      const scalar_t* ap = ac.data_ptr<scalar_t>();
      const scalar_t* sp = sc.data_ptr<scalar_t>();
      const scalar_t* bp = bc.data_ptr<scalar_t>();
      scalar_t* hp = h.data_ptr<scalar_t>();
      cpu::parallel_for(0, ac.numel(), kGrain, [&](int64_t i0, int64_t i1) {
        swiglu_forward_any(ap, sp, bp, hp, i0, i1);
      });
    });
    ctx->save_for_backward({ac, sc, bc});
    return {h};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &a = saved[0], &sg = saved[1], &b = saved[2];
    const torch::Tensor dh = grads[0].contiguous();
    torch::Tensor da = torch::empty_like(a), db = torch::empty_like(b);
    AT_DISPATCH_FLOATING_TYPES(a.scalar_type(), "swiglu_fused_cpu_backward", [&] {
      const scalar_t* ap = a.data_ptr<scalar_t>();
      const scalar_t* sp = sg.data_ptr<scalar_t>();
      const scalar_t* bp = b.data_ptr<scalar_t>();
      const scalar_t* dhp = dh.data_ptr<scalar_t>();
      scalar_t* dap = da.data_ptr<scalar_t>();
      scalar_t* dbp = db.data_ptr<scalar_t>();
      cpu::parallel_for(0, a.numel(), kGrain, [&](int64_t i0, int64_t i1) {
        swiglu_backward_any(ap, sp, bp, dhp, dap, dbp, i0, i1);
      });
    });
    return {da, db};
  }
};

}  // namespace

torch::Tensor swiglu_fused_cpu(const torch::Tensor& a, const torch::Tensor& b) {
  TORCH_CHECK(cpu::cpu_floating({a, b}) && a.scalar_type() == b.scalar_type(),
              "swiglu_fused_cpu: fp32/fp64 CPU tensors of one dtype only, got ", a.scalar_type(),
              " and ", b.scalar_type());
  TORCH_CHECK(a.sizes() == b.sizes(), "swiglu_fused_cpu: a ", a.sizes(), " and b ", b.sizes(),
              " differ in shape");
  return SwiGluFunction::apply(a, b)[0];
}

}  // namespace hybridlab
