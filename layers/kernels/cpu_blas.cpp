#include "layers/kernels/cpu_blas.h"

#if !defined(HYBRIDLAB_HAVE_CBLAS)
#include <torch/torch.h>
#endif

#if defined(HYBRIDLAB_HAVE_CBLAS)
// The standard CBLAS interface (32-bit integers, as Debian's libblas.so.3 alternatives export it).
// Declared here rather than through <cblas.h>, which only the -dev packages ship.
extern "C" {
void cblas_sgemm(int order, int trans_a, int trans_b, int m, int n, int k, float alpha,
                 const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc);
void cblas_dgemm(int order, int trans_a, int trans_b, int m, int n, int k, double alpha,
                 const double* a, int lda, const double* b, int ldb, double beta, double* c,
                 int ldc);
void cblas_strsm(int order, int side, int uplo, int trans_a, int diag, int m, int n, float alpha,
                 const float* a, int lda, float* b, int ldb);
void cblas_dtrsm(int order, int side, int uplo, int trans_a, int diag, int m, int n, double alpha,
                 const double* a, int lda, double* b, int ldb);
void cblas_strmm(int order, int side, int uplo, int trans_a, int diag, int m, int n, float alpha,
                 const float* a, int lda, float* b, int ldb);
void cblas_dtrmm(int order, int side, int uplo, int trans_a, int diag, int m, int n, double alpha,
                 const double* a, int lda, double* b, int ldb);
}
#endif

namespace hybridlab::cpu {

namespace {
#if defined(HYBRIDLAB_HAVE_CBLAS)
constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112, kLeft = 141, kLower = 122, kUnit = 132;

void blas_gemm(int ta, int tb, int m, int n, int k, float alpha, const float* a, int lda,
               const float* b, int ldb, float beta, float* c, int ldc) {
  cblas_sgemm(kRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
void blas_gemm(int ta, int tb, int m, int n, int k, double alpha, const double* a, int lda,
               const double* b, int ldb, double beta, double* c, int ldc) {
  cblas_dgemm(kRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
void blas_trsm(int m, int n, const float* l, int ldl, float* b, int ldb) {
  cblas_strsm(kRowMajor, kLeft, kLower, kNoTrans, kUnit, m, n, 1.0f, l, ldl, b, ldb);
}
void blas_trsm(int m, int n, const double* l, int ldl, double* b, int ldb) {
  cblas_dtrsm(kRowMajor, kLeft, kLower, kNoTrans, kUnit, m, n, 1.0, l, ldl, b, ldb);
}
void blas_trmm(int m, int n, const float* l, int ldl, float* b, int ldb) {
  cblas_strmm(kRowMajor, kLeft, kLower, kNoTrans, kUnit, m, n, 1.0f, l, ldl, b, ldb);
}
void blas_trmm(int m, int n, const double* l, int ldl, double* b, int ldb) {
  cblas_dtrmm(kRowMajor, kLeft, kLower, kNoTrans, kUnit, m, n, 1.0, l, ldl, b, ldb);
}
#else
// A strided row-major view of a raw buffer (rows × cols, row stride ld).
template <class S>
torch::Tensor wrap(const S* p, int64_t rows, int64_t cols, int64_t ld) {
  return torch::from_blob(const_cast<S*>(p), {rows, cols}, {ld, 1},
                          torch::TensorOptions().dtype(c10::CppTypeToScalarType<S>::value));
}
#endif
}  // namespace

bool have_cblas() {
#if defined(HYBRIDLAB_HAVE_CBLAS)
  return true;
#else
  return false;
#endif
}

template <class S>
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, S alpha, const S* a,
          int64_t lda, const S* b, int64_t ldb, S beta, S* c, int64_t ldc) {
#if defined(HYBRIDLAB_HAVE_CBLAS)
  blas_gemm(trans_a ? kTrans : kNoTrans, trans_b ? kTrans : kNoTrans, static_cast<int>(m),
            static_cast<int>(n), static_cast<int>(k), alpha, a, static_cast<int>(lda), b,
            static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
#else
  c10::InferenceMode guard;
  const torch::Tensor A = trans_a ? wrap(a, k, m, lda).t() : wrap(a, m, k, lda);
  const torch::Tensor B = trans_b ? wrap(b, n, k, ldb).t() : wrap(b, k, n, ldb);
  torch::Tensor C = wrap(c, m, n, ldc);
  if (beta == S(0)) C.zero_();  // BLAS semantics: C is not read when beta is 0
  C.addmm_(A, B, beta, alpha);
#endif
}

template <class S>
void trsm_unit_lower(int64_t m, int64_t n, const S* l, int64_t ldl, S* b, int64_t ldb) {
#if defined(HYBRIDLAB_HAVE_CBLAS)
  blas_trsm(static_cast<int>(m), static_cast<int>(n), l, static_cast<int>(ldl), b,
            static_cast<int>(ldb));
#else
  // Row i of X: B_i − Σ_{r<i} L_ir X_r.
  for (int64_t i = 1; i < m; ++i) {
    S* bi = b + i * ldb;
    for (int64_t r = 0; r < i; ++r) {
      const S lir = l[i * ldl + r];
      const S* br = b + r * ldb;
      for (int64_t j = 0; j < n; ++j) bi[j] -= lir * br[j];
    }
  }
#endif
}

template <class S>
void trmm_unit_lower(int64_t m, int64_t n, const S* l, int64_t ldl, S* b, int64_t ldb) {
#if defined(HYBRIDLAB_HAVE_CBLAS)
  blas_trmm(static_cast<int>(m), static_cast<int>(n), l, static_cast<int>(ldl), b,
            static_cast<int>(ldb));
#else
  // Bottom row first, so every row still reads the rows above it unchanged.
  for (int64_t i = m - 1; i > 0; --i) {
    S* bi = b + i * ldb;
    for (int64_t r = 0; r < i; ++r) {
      const S lir = l[i * ldl + r];
      const S* br = b + r * ldb;
      for (int64_t j = 0; j < n; ++j) bi[j] += lir * br[j];
    }
  }
#endif
}

template void gemm<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t,
                          const float*, int64_t, float, float*, int64_t);
template void gemm<double>(bool, bool, int64_t, int64_t, int64_t, double, const double*, int64_t,
                           const double*, int64_t, double, double*, int64_t);
template void trsm_unit_lower<float>(int64_t, int64_t, const float*, int64_t, float*, int64_t);
template void trsm_unit_lower<double>(int64_t, int64_t, const double*, int64_t, double*, int64_t);
template void trmm_unit_lower<float>(int64_t, int64_t, const float*, int64_t, float*, int64_t);
template void trmm_unit_lower<double>(int64_t, int64_t, const double*, int64_t, double*, int64_t);

}  // namespace hybridlab::cpu
