// jit/launch_geometry.h: the sizes and strides a kernel is called with.
//
// A kernel sees its domain as rows x inner: the kept dims (the outer loop, any number of them)
// and one innermost dim (the reduced dims of a row kernel, or the last dim of a pointwise one).
// Dims that every operand walks contiguously are merged first, as in PyTorch's TensorIterator,
// so contiguous tensors of any rank become a single long inner loop.
#ifndef DYNTRACE_JIT_LAUNCH_GEOMETRY_H_
#define DYNTRACE_JIT_LAUNCH_GEOMETRY_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "jit/kernel_ir.h"
#include "runtime/tensor.h"

namespace dt::jit {

struct LaunchGeometry {
  Dims outer_sizes;
  int64_t inner_size = 1;
  // Per operand, outer_sizes.size() + 1 element strides: the outer dims, then the inner one.
  std::vector<int64_t> strides;

  int64_t outer_rank() const { return static_cast<int64_t>(outer_sizes.size()); }
  int64_t inner_stride(size_t operand) const {
    return strides[operand * (outer_sizes.size() + 1) + outer_sizes.size()];
  }
};

// `domain`: the domain's sizes; `tensors`: one per kernel operand (0-d for run-time scalars).
// Fails when the reduced dims can't be walked as one inner loop; the caller then runs the
// kernel's nodes eagerly.
[[nodiscard]] absl::StatusOr<LaunchGeometry> PrepareLaunch(const Kernel& kernel, DimsView domain,
                                                           absl::Span<const Tensor> tensors);

}  // namespace dt::jit

#endif  // DYNTRACE_JIT_LAUNCH_GEOMETRY_H_
