// runtime/copy.h: moving and converting elements between tensors.
//
// CopyInto is the one strided copy: it broadcasts `src` to `dst`'s shape and converts dtypes on
// the way (float -> int truncates toward zero, nonzero -> true), exactly as PyTorch's copy_.
//
//   Tensor t = Tensor::Empty({3}, DType::kInt64, Device::Cpu());
//   DT_RETURN_IF_ERROR(CopyInto(t, some_float_tensor));
#ifndef DYNTRACE_RUNTIME_COPY_H_
#define DYNTRACE_RUNTIME_COPY_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/scalar.h"
#include "runtime/tensor.h"

namespace dt {

// REQUIRES: dst has no two elements sharing an address (checked: error otherwise).
[[nodiscard]] absl::Status CopyInto(const Tensor& dst, const Tensor& src);
// Writes `value`, converted to dst's dtype, into every element.
[[nodiscard]] absl::Status Fill(const Tensor& dst, Scalar value);
// `t` itself when already contiguous, else a contiguous copy.
Tensor Contiguous(const Tensor& t);
// `t` itself when it has `dtype` already, else a converted copy in t's memory order.
Tensor CastTo(const Tensor& t, DType dtype);
// A fresh copy (same memory order where t is dense).
Tensor Clone(const Tensor& t);
// A 0-d tensor holding `value` as `dtype`.
Tensor ScalarTensor(Scalar value, DType dtype, Device device);
// Reads element 0 of a one-element tensor.
absl::StatusOr<Scalar> ItemOf(const Tensor& t);
// Whether writing through `t` could hit one address twice (a stride-0 dim of size > 1).
bool HasInternalOverlap(const Tensor& t);

// Copies between two tensors of one CUDA device that one block copy can't do (other layouts,
// broadcasts, conversions) run a kernel generated from the kernel IR. runtime/ sits below the
// code generator, so jit/ installs that kernel here at start-up (jit/cuda_eager_ops.h).
// The function is given `dst` and a `src` already broadcast to dst's shape that does not
// overlap dst; it returns false when it could not build or load its kernel, and CopyInto then
// goes through host mirrors (counted by CountCudaHostOp).
using DeviceCopyKernel = absl::StatusOr<bool> (*)(const Tensor& dst, const Tensor& src);
void SetDeviceCopyKernel(DeviceCopyKernel kernel);

}  // namespace dt

#endif  // DYNTRACE_RUNTIME_COPY_H_
