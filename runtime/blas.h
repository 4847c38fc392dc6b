// runtime/blas.h: batched matrix multiply on CPU.
//
// float32/float64 go to OpenBLAS (cblas_?gemm) whenever each matrix has a unit stride along one
// dim; other layouts are made contiguous first. Other dtypes use a plain triple loop that
// accumulates in the compute type (float for float16, int64 for integers).
#ifndef DYNTRACE_RUNTIME_BLAS_H_
#define DYNTRACE_RUNTIME_BLAS_H_

#include "runtime/tensor.h"

namespace dt {

// out[b] = a[b] @ b[b] for every batch index. REQUIRES: a is [B, M, K], b is [B, K, N], out is a
// fresh contiguous [B, M, N] tensor; all three have the same dtype and are on the CPU.
void BatchedGemm(const Tensor& a, const Tensor& b, const Tensor& out);

}  // namespace dt

#endif  // DYNTRACE_RUNTIME_BLAS_H_
