// runtime/blas.h: batched matrix multiply on CPU.
//
// float32/float64 go to a BLAS whenever each matrix has a unit stride along one dim (other layouts
// are made contiguous first): float32 products to dyntrace's AVX-512 kernel where the CPU has it
// (runtime/sgemm_avx512.h says when), everything else to OpenBLAS (cblas_?gemm). Other dtypes use a plain triple loop that
// accumulates in the compute type (float for float16, int64 for integers).
#ifndef DYNTRACE_RUNTIME_BLAS_H_
#define DYNTRACE_RUNTIME_BLAS_H_

#include <optional>

#include "runtime/tensor.h"

namespace dt {

// How a BLAS reads one row-major matrix operand of `rows` x `cols` with the given strides: as
// stored or transposed, with its leading dimension; nullopt when neither dim has unit stride
// (the operand must be made contiguous first). cuBLAS (runtime/cuda_blas.h) uses the same rule.
struct GemmOperandLayout {
  bool transposed = false;
  int64_t ld = 1;
};
std::optional<GemmOperandLayout> GemmLayoutOf(int64_t rows, int64_t cols, int64_t row_stride,
                                              int64_t col_stride);

// out[b] = a[b] @ b[b] for every batch index. REQUIRES: a is [B, M, K], b is [B, K, N], out is a
// fresh contiguous [B, M, N] tensor; all three have the same dtype and are on the CPU.
void BatchedGemm(const Tensor& a, const Tensor& b, const Tensor& out);

// Whether float32 products go to dyntrace's own AVX-512 kernel: this CPU has AVX-512 and
// DYNTRACE_CPU_GEMM is not "openblas".
bool Avx512SgemmEnabled();

// "avx512" when float32 products go to dyntrace's own kernel (this CPU has AVX-512 and
// DYNTRACE_CPU_GEMM is not "openblas"), else "openblas".
const char* CpuFloat32GemmName();

}  // namespace dt

#endif  // DYNTRACE_RUNTIME_BLAS_H_
