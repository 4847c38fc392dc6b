// runtime/cuda_blas.h: batched matrix multiply on a CUDA device through cuBLAS.
//
// libcublas is opened with dlopen on first use, like the driver (runtime/cuda_driver.h), so a
// build without CUDA runs everywhere. Each device gets one cuBLAS handle bound to the device's
// stream, with a workspace allocated once up front: a multiply then allocates nothing, which is
// what lets a CUDA graph capture it (jit/cuda_graph_replay.h). float16, float32 and float64 use
// cuBLAS with a float (or double) accumulator and no TF32, so results match the CPU's to
// rounding; other dtypes multiply on the host through mirrors (runtime/cuda_tensor.h).
#ifndef DYNTRACE_RUNTIME_CUDA_BLAS_H_
#define DYNTRACE_RUNTIME_CUDA_BLAS_H_

#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/tensor.h"

namespace dt {

// One cublasGemmStridedBatchedEx call in cuBLAS's column-major terms. A row-major product
// C = A @ B is the column-major product C^T = B^T A^T, so `first` is the row-major B.
struct CublasGemmCall {
  bool transpose_first = false;   // op(first)
  bool transpose_second = false;  // op(second)
  int64_t m = 0, n = 0, k = 0;    // column-major sizes: m = N, n = M of the row-major product
  int64_t ld_first = 1, ld_second = 1, ld_out = 1;
  int64_t stride_first = 0, stride_second = 0, stride_out = 0;  // batch strides, in elements
  int64_t batches = 0;
};

// The call computing out[b] = a[b] @ b[b] (a [B, M, K], b [B, K, N], out contiguous [B, M, N],
// batch strides as given, 0 for a broadcast). nullopt when an operand has no unit-stride dim
// and must be made contiguous first. Fails when a size exceeds cuBLAS's 32-bit arguments.
absl::StatusOr<std::optional<CublasGemmCall>> PlanCublasGemm(const Tensor& a, const Tensor& b,
                                                             const Tensor& out);

// The CUDA counterpart of BatchedGemm (runtime/blas.h), queued on the device's stream.
// REQUIRES: the same shapes as BatchedGemm; all three tensors on one CUDA device.
absl::Status CudaBatchedGemm(const Tensor& a, const Tensor& b, const Tensor& out);

// Why cuBLAS can't be used, or OK when it can (loads it on first use).
absl::Status CheckCublasAvailable();

}  // namespace dt

#endif  // DYNTRACE_RUNTIME_CUDA_BLAS_H_
