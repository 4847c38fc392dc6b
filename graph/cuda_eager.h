// graph/cuda_eager.h: eager ops on CUDA tensors.
//
// An op given CUDA tensors runs on the device. Ops flagged kCudaNative do that in their own eager
// definition (cuBLAS, copies through runtime/copy.h); pointwise, reduction and composite ops run
// as one-op graphs compiled from the kernel IR, which jit/ installs here as a DeviceOpRunner
// (graph/ sits below the code generators). What has no device implementation, or whose kernel
// can't be built or loaded (no NVRTC, a driver that refuses modules), falls back to the host:
// it mirrors its CUDA operands to the host (runtime/cuda_tensor.h), runs the CPU definition,
// and moves the results back (a view of an operand becomes the same view of the CUDA operand);
// each such call is counted by CountCudaHostOp, so a program that leaves the device shows.
#ifndef DYNTRACE_GRAPH_CUDA_EAGER_H_
#define DYNTRACE_GRAPH_CUDA_EAGER_H_

#include <optional>

#include "absl/status/statusor.h"
#include "graph/op_registry.h"

namespace dt {

// Runs ops on a CUDA device. REQUIRES of both: some operand (or the device argument) is on
// `device`, and the op is not a view. nullopt / false: no device implementation for these
// arguments; the caller goes through the host.
class DeviceOpRunner {
 public:
  virtual ~DeviceOpRunner() = default;
  [[nodiscard]] virtual absl::StatusOr<std::optional<OpResult>> Run(const OpDef& op, const OpArgs& args,
                                                                   Device device) = 0;
  // In-place pointwise: writes op(args) into `out`, converted to out's dtype.
  [[nodiscard]] virtual absl::StatusOr<bool> RunPointwiseInto(const OpDef& op, const OpArgs& args,
                                                              const Tensor& out) = 0;
};
// Installs the process's runner (jit/ does at start-up); the runner must outlive every op call.
void SetDeviceOpRunner(DeviceOpRunner* runner);

// Runs `op` on CUDA `device`: the installed runner, else through the host.
absl::StatusOr<OpResult> CallOpOnCuda(const OpDef& op, const OpArgs& args, Device device);

// CudaDeviceOf for an op about to run. PyTorch lets a CPU tensor of no dims (a number held in a
// tensor) join CUDA operands: where the devices disagree only by such tensors that need no
// gradient, `moved` receives `args` with each of them copied to the CUDA device, and the op runs
// on those. (One that requires grad stays and raises: its gradient would reach the copy.)
absl::StatusOr<std::optional<Device>> CudaDeviceToRunOn(const OpDef& op, const OpArgs& args,
                                                        std::optional<OpArgs>& moved);

// The CUDA device `args` involve (tensors on it, or a device argument naming it); none when
// they involve none. Tensors on two different devices are an error naming both.
absl::StatusOr<std::optional<Device>> CudaDeviceOf(const OpDef& op, const OpArgs& args);

// Runs `op` on the host for CUDA `device` as described above.
absl::StatusOr<OpResult> CallOpThroughHost(const OpDef& op, const OpArgs& args, Device device);

// For kCudaNative ops built on runtime/cuda_index_kernels.h: the CUDA device `args` are on
// when those kernels can't run there for `main` (no NVRTC, a driver that refuses modules); the
// caller then runs the op through the host with CallOpThroughHost. nullopt: the op's own
// definition runs them, or no CUDA tensor is involved. Tensors on two devices are an error, as
// for every op.
absl::StatusOr<std::optional<Device>> HostBridgeFor(const OpDef& op, const OpArgs& args, const Tensor& main);

// In such an op's eager definition: returns CallOpThroughHost's result when HostBridgeFor says
// the op can't run its kernels on the device its arguments are on.
#define DT_RUN_THROUGH_HOST_IF_NEEDED(op, args, main)                                        \
  do {                                                                                     \
    DT_ASSIGN_OR_RETURN(std::optional<Device> bridge_device, HostBridgeFor(op, args, main)); \
    if (bridge_device.has_value()) return CallOpThroughHost(op, args, *bridge_device);   \
  } while (false)

// In-place pointwise `op` writing into CUDA `out`: the installed runner, else through the host.
absl::StatusOr<Tensor> RunPointwiseIntoOnCuda(const OpDef& op, const OpArgs& args, const Tensor& out);

}  // namespace dt

#endif  // DYNTRACE_GRAPH_CUDA_EAGER_H_
