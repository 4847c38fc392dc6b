// runtime/dlpack.h: zero-copy exchange with numpy, PyTorch and CuPy through DLPack.
//
// ToDLPack hands out a DLManagedTensor that keeps the tensor's storage alive until the consumer
// calls its deleter. FromDLPack wraps a producer's DLManagedTensor without copying; the
// producer's deleter runs when the last dyntrace view of it is gone.
#ifndef DYNTRACE_RUNTIME_DLPACK_H_
#define DYNTRACE_RUNTIME_DLPACK_H_

#include <dlpack/dlpack.h>

#include "absl/status/statusor.h"
#include "runtime/tensor.h"

namespace dt {

// The consumer owns the result and must call its deleter exactly once.
DLManagedTensor* ToDLPack(const Tensor& t);
// Takes ownership of `managed` on success (and on failure: its deleter has run).
[[nodiscard]] absl::StatusOr<Tensor> FromDLPack(DLManagedTensor* managed);
// (device_type, device_id) as __dlpack_device__ reports it.
std::pair<int, int> DLPackDevice(const Tensor& t);

}  // namespace dt

#endif  // DYNTRACE_RUNTIME_DLPACK_H_
