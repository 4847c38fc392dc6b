// runtime/cuda_tensor.h: moving CUDA tensors' bytes to and from the host.
//
// Tensors move between devices with ToDevice (what `.cuda()`, `.cpu()` and `.to()` do). Eager
// operations on CUDA tensors run on the host through mirrors: a mirror is a CPU tensor with the
// CUDA tensor's sizes and strides, over a host copy of exactly the bytes the tensor spans, so
// views, broadcasts and overlaps mean the same thing on both sides; after a write the span goes
// back. That keeps eager execution exact on every device with one set of CPU loops; the speed on
// a GPU comes from compiled kernels, not from eager ops.
//
//   DT_ASSIGN_OR_RETURN(HostMirror m, MirrorToHost(cuda_tensor));
//   ... CPU work reading or writing m.host ...
//   DT_RETURN_IF_ERROR(WriteBack(m));
#ifndef DYNTRACE_RUNTIME_CUDA_TENSOR_H_
#define DYNTRACE_RUNTIME_CUDA_TENSOR_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/scalar.h"
#include "runtime/tensor.h"

namespace dt {

inline bool IsCuda(const Tensor& t) { return t.device().type == DeviceType::kCuda; }

struct HostMirror {
  Tensor host;               // a CPU view over the copied span
  Tensor device;             // the CUDA tensor mirrored
  int64_t span_begin = 0;    // first element of the span, in the device storage's elements
  int64_t span_elements = 0;
};

// REQUIRES: IsCuda(t).
absl::StatusOr<HostMirror> MirrorToHost(const Tensor& t);
// Copies the mirror's span back to the device.
absl::Status WriteBack(const HostMirror& mirror);
// A CUDA tensor on `device` with `host`'s sizes, strides and values. REQUIRES: host on the CPU.
absl::StatusOr<Tensor> UploadKeepingLayout(const Tensor& host, Device device);
// Fills contiguous CUDA tensor `dst` with `value` by driver memsets queued on the device's
// stream: no host buffer and no wait, so a CUDA-graph capture can hold it (a 64-bit element is
// two strided 32-bit memsets). REQUIRES: dst on CUDA and contiguous.
[[nodiscard]] absl::Status FillOnDevice(const Tensor& dst, Scalar value);
// `t` on `device` (itself when already there). To the CPU: contiguous. To CUDA: contiguous
// values; dense inputs keep their memory order.
absl::StatusOr<Tensor> ToDevice(const Tensor& t, Device device);

// Operations on CUDA tensors that still ran through host mirrors (an op without a device
// implementation, or one whose kernel could not be built or loaded), counted per op name so
// that `dyntrace.stats()["cuda_host_ops"]` can show that a program stays on the device.
// Transfers the user asks for (`.cpu()`, `.cuda()`, printing, `.item()`) are not counted.
void CountCudaHostOp(absl::string_view op);
// The total, and the count for each op name (at most the first 64 names; the total counts all).
int64_t CudaHostOps();
std::vector<std::pair<std::string, int64_t>> CudaHostOpsByName();

}  // namespace dt

#endif  // DYNTRACE_RUNTIME_CUDA_TENSOR_H_
