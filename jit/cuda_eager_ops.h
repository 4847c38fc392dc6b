// jit/cuda_eager_ops.h: eager ops on CUDA tensors, run on the device by kernels generated from
// the kernel IR.
//
// An eager pointwise op, reduction or decomposable composite (softmax, layer_norm, gelu ...) on
// CUDA tensors becomes a one-op graph that the cuda backend compiles (jit/cuda_executable.h):
// the same scheduler, code generator, NVRTC driver and kernel cache (memory, then disk) as a
// traced program, so eager and compiled CUDA results come from one definition. A program is
// compiled once per signature: the op, each tensor operand's dtype, rank, size-1 dims and
// innermost-stride class, its constant arguments, and the types of its Python-number operands.
// Those numbers are run-time scalars, so `x * 0.5` and `x * 0.7` share a kernel; sizes and
// strides are run-time arguments as in every compiled kernel. A copy between tensors of one
// device that one block copy can't do (a transpose made contiguous, a broadcast into a slice,
// a dtype conversion) is the same thing: a clone or cast written into the destination.
//
// InstallCudaEagerOps() plugs both into the layers below (graph/cuda_eager.h,
// runtime/copy.h), and gives runtime/cuda_index_kernels.h the kernel cache for its CUBINs. What has no kernel (integer division, which checks for zero first; ops
// without a device form) or can't be compiled or loaded (no NVRTC, a driver that refuses
// modules) runs through host mirrors and is counted in `stats()["cuda_host_ops"]`.
//
//   dt::jit::InstallCudaEagerOps();   // once, at module start-up
//   dt::CallOp(*exp, OpArgs({cuda_tensor}));  // now one NVRTC kernel, no host round trip
#ifndef DYNTRACE_JIT_CUDA_EAGER_OPS_H_
#define DYNTRACE_JIT_CUDA_EAGER_OPS_H_

namespace dt::jit {

// Idempotent and thread-safe.
void InstallCudaEagerOps();

}  // namespace dt::jit

#endif  // DYNTRACE_JIT_CUDA_EAGER_OPS_H_
