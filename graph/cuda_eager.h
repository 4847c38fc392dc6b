// graph/cuda_eager.h: eager ops on CUDA tensors, run by the CPU definitions through host mirrors.
//
// Every op keeps one eager definition (the CPU loops). An op given CUDA tensors (or asked to
// create one) mirrors its CUDA operands to the host (runtime/cuda_tensor.h), runs that
// definition, and moves the results back: a result that is a view of an operand becomes the
// same view of the CUDA operand; a new result is uploaded with its layout. Results are exactly
// the CPU's, which is what compiled CUDA kernels are checked against; view ops need no data and
// run directly.
#ifndef DYNTRACE_GRAPH_CUDA_EAGER_H_
#define DYNTRACE_GRAPH_CUDA_EAGER_H_

#include <optional>

#include "absl/status/statusor.h"
#include "graph/op_registry.h"

namespace dt {

// The CUDA device `args` involve (tensors on it, or a device argument naming it); none when
// they involve none. Tensors on two different devices are an error naming both.
absl::StatusOr<std::optional<Device>> CudaDeviceOf(const OpDef& op, const OpArgs& args);

// Runs `op` on the host for CUDA `device` as described above.
absl::StatusOr<OpResult> CallOpThroughHost(const OpDef& op, const OpArgs& args, Device device);

// In-place pointwise `op` writing into CUDA `out`.
absl::StatusOr<Tensor> RunPointwiseIntoThroughHost(const OpDef& op, const OpArgs& args, const Tensor& out);

}  // namespace dt

#endif  // DYNTRACE_GRAPH_CUDA_EAGER_H_
