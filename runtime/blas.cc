#include "runtime/blas.h"

#include <cblas.h>

#include "runtime/copy.h"
#include "runtime/parallel.h"

namespace dt {
namespace {

template <typename T>
void Gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k, const T* a,
          int64_t lda, const T* b, int64_t ldb, T* c, int64_t ldc) {
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
  } else {
    cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, 1.0, a, lda, b, ldb, 0.0, c, ldc);
  }
}

template <typename T>
void NaiveGemm(const Tensor& a, const Tensor& b, const Tensor& out) {
  using C = std::conditional_t<std::is_integral_v<T>, int64_t, ComputeType<T>>;
  const int64_t batches = a.size(0), m = a.size(1), k = a.size(2), n = b.size(2);
  const T* pa = a.data_as<T>();
  const T* pb = b.data_as<T>();
  T* pc = out.data_as<T>();
  ParallelFor(batches * m, std::max<int64_t>(1, 4096 / std::max<int64_t>(n * k, 1)), [&](int64_t lo, int64_t hi) {
    for (int64_t row = lo; row < hi; ++row) {
      const int64_t bi = row / m, i = row % m;
      for (int64_t j = 0; j < n; ++j) {
        C acc = 0;
        for (int64_t p = 0; p < k; ++p) {
          acc += static_cast<C>(static_cast<ComputeType<T>>(pa[bi * a.stride(0) + i * a.stride(1) + p * a.stride(2)])) *
                 static_cast<C>(static_cast<ComputeType<T>>(pb[bi * b.stride(0) + p * b.stride(1) + j * b.stride(2)]));
        }
        if constexpr (std::is_same_v<T, bool>) pc[(bi * m + i) * n + j] = acc != 0;
        else pc[(bi * m + i) * n + j] = static_cast<T>(acc);
      }
    }
  });
}

}  // namespace

std::optional<GemmOperandLayout> GemmLayoutOf(int64_t rows, int64_t cols, int64_t row_stride,
                                              int64_t col_stride) {
  // The stride of a size-1 dim is never followed (1-d matmul operands get stride 0 there), so
  // choose one that BLAS accepts.
  if (cols == 1) col_stride = 1;
  if (rows == 1) row_stride = std::max<int64_t>(cols, 1);
  if (col_stride == 1 && row_stride >= std::max<int64_t>(cols, 1)) return GemmOperandLayout{false, row_stride};
  if (row_stride == 1 && col_stride >= std::max<int64_t>(rows, 1)) return GemmOperandLayout{true, col_stride};
  return std::nullopt;
}

void BatchedGemm(const Tensor& a_in, const Tensor& b_in, const Tensor& out) {
  if (out.is_meta()) return;
  const int64_t batches = a_in.size(0), m = a_in.size(1), k = a_in.size(2), n = b_in.size(2);
  if (out.numel() == 0) return;
  if (k == 0) {
    (void)Fill(out, Scalar::Int(0));
    return;
  }
  const DType dtype = out.dtype();
  if (dtype != DType::kFloat32 && dtype != DType::kFloat64) {
    DT_DISPATCH_ALL(dtype, [&] { NaiveGemm<scalar_t>(a_in, b_in, out); });
    return;
  }
  Tensor a = a_in, b = b_in;
  auto la = GemmLayoutOf(m, k, a.stride(1), a.stride(2));
  if (!la) {
    a = Contiguous(a);
    la = GemmLayoutOf(m, k, a.stride(1), a.stride(2));
  }
  auto lb = GemmLayoutOf(k, n, b.stride(1), b.stride(2));
  if (!lb) {
    b = Contiguous(b);
    lb = GemmLayoutOf(k, n, b.stride(1), b.stride(2));
  }
  DT_DISPATCH_ALL(dtype, [&] {
    if constexpr (std::is_same_v<scalar_t, float> || std::is_same_v<scalar_t, double>) {
      for (int64_t bi = 0; bi < batches; ++bi) {
        Gemm<scalar_t>(la->transposed ? CblasTrans : CblasNoTrans, lb->transposed ? CblasTrans : CblasNoTrans, m, n, k, a.data_as<scalar_t>() + bi * a.stride(0),
                       la->ld, b.data_as<scalar_t>() + bi * b.stride(0), lb->ld,
                       out.data_as<scalar_t>() + bi * m * n, n);
      }
    }
  });
}

}  // namespace dt
