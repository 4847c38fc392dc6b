// runtime/cuda_attention.h: fused (flash-style) attention on CUDA tensors.
//
// softmax(mask(q k^T * scale) * post_scale) v in one kernel with an online softmax
// (runtime/attention_kernel.cuh), so the [L, S] scores and weights never reach device memory:
// one launch instead of two GEMMs, a mask kernel and a softmax kernel. `_fused_attention`'s eager
// definition (graph/ops_nn.cc) calls it for CUDA operands that need no gradient, and runs the
// unfused ops otherwise; scaled_dot_product_attention without dropout and the written-out pattern
// (jit/attention_pattern.h) both reach it. The kernel is hand-written CUDA C++, compiled by
// NVRTC once per (dtype, head dims, mask kind, causal, dropout) through the runtime's module compiler (the
// kernel cache, in memory and on disk, once jit/ installs it) and loaded once per device.
//
// It computes in float whatever the element type (float16 and bfloat16 operands are widened as
// they load, the result rounded once), so its float16 results are closer to exact than the
// unfused ops', which round the scores and the weights to float16 in between.
//
//   AttentionSpec spec{.mask_kind = kAttentionKeepWhereTrue, .scale = 0.125};
//   DT_ASSIGN_OR_RETURN(std::optional<Tensor> out, FusedAttentionOnDevice(q, k, v, &mask, spec));
//   if (!out.has_value()) ... run the unfused ops ...
#ifndef DYNTRACE_RUNTIME_CUDA_ATTENTION_H_
#define DYNTRACE_RUNTIME_CUDA_ATTENTION_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/attention_abi.h"
#include "runtime/attention_layout.h"
#include "runtime/tensor.h"

namespace dt {

// The attention's result ([batch..., L, Ev], contiguous, q's dtype) computed by the fused kernel
// on the operands' CUDA device. nullopt when it does not fit (AttentionKernelMisfit), when the
// operands are not all on one CUDA device, or when the kernel can't run there (no NVRTC, a driver
// refusing modules: the kernels log says why); the caller then runs the unfused ops.
// With `keep` (dropout), kept weights are scaled by spec.keep_scale and the rest dropped.
[[nodiscard]] absl::StatusOr<std::optional<Tensor>> FusedAttentionOnDevice(const Tensor& q, const Tensor& k,
                                                                         const Tensor& v, const Tensor* mask,
                                                                         const Tensor* keep,
                                                                         const AttentionSpec& spec);

// Launches of the fused kernel in this process (part of stats()["cuda_kernel_launches"]).
int64_t FusedAttentionLaunches();

// The module's CUDA source for one variant (what NVRTC compiles; tests compile each).
std::string AttentionKernelSource(DType dtype, int head_dim, int value_dim, AttentionMask mask_kind, bool causal,
                                  bool dropout = false);

// ---- internal ----

// Kernel source pasted at build time (runtime:attention_kernel_module_cc).
const char* AttentionKernelModuleText();

}  // namespace dt

#endif  // DYNTRACE_RUNTIME_CUDA_ATTENTION_H_
