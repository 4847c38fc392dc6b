// runtime/cpu_attention.h: fused attention on float32 CPU tensors.
//
// The same softmax(mask(q k^T * scale) * post_scale) v as runtime/cuda_attention.h, for the CPU:
// per (batch element, block of 64 query rows) the scores of one tile of keys at a time come from
// dyntrace's AVX-512 GEMM into a buffer of 64 x 256 floats, are masked and folded into a running
// maximum, sum and output (an online softmax), and the next GEMM adds the tile's weighted values.
// So memory stays O(L + S) per thread where the unfused ops materialise the [L, S] scores and
// weights (3.2 GB of them for a 12-head, 4096-token batch of 4). Blocks run in parallel.
//
// Float32 operands where dyntrace's AVX-512 GEMM runs (Avx512SgemmEnabled: the CPU has AVX-512
// and DYNTRACE_CPU_GEMM is not "openblas") only; anything else is nullopt, and
// `_fused_attention` runs its unfused body.
#ifndef DYNTRACE_RUNTIME_CPU_ATTENTION_H_
#define DYNTRACE_RUNTIME_CPU_ATTENTION_H_

#include <optional>

#include "absl/status/statusor.h"
#include "runtime/cuda_attention.h"
#include "runtime/tensor.h"

namespace dt {

// The attention's result ([batch..., L, Ev], contiguous float32), or nullopt where the fused
// loop does not apply (see above, and AttentionKernelMisfit).
// With `keep` (dropout), kept weights are scaled by spec.keep_scale and the rest dropped.
[[nodiscard]] absl::StatusOr<std::optional<Tensor>> FusedAttentionOnHost(const Tensor& q, const Tensor& k,
                                                                       const Tensor& v, const Tensor* mask,
                                                                       const Tensor* keep,
                                                                       const AttentionSpec& spec);

}  // namespace dt

#endif  // DYNTRACE_RUNTIME_CPU_ATTENTION_H_
