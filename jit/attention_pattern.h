// jit/attention_pattern.h: finds attention written out op by op and makes it one
// `_fused_attention` node (the fused kernel of runtime/cuda_attention.h on CUDA).
//
// What users write, and what the tracer records for it:
//
//   att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))      # matmul, mul
//   att = dt.softmax(dt.where(mask, att, float("-inf")), -1)      # where, softmax
//   y = att @ v                                                   # matmul
//
// A chain matmul(q, kT) -> scales by constants, at most one mask -> softmax over the last dim ->
// matmul(., v) becomes `_fused_attention(q, k, v, mask, scale, mask_kind, post_scale, ...)`. The masks
// recognised: where(mask, s, -inf) (keeps true positions), where(mask, -inf, s) and
// s.masked_fill(mask, -inf) (drop them), s + float_mask (adds). Dropout of the weights between
// the softmax and the last matmul (a dropout node, or its decomposition mul(mul(w, keep),
// 1 / (1 - p))) becomes the node's `keep` and `keep_scale`; for a dropout node the pass adds the
// draw dropout would make (rand of the weights' shape, >= p), which needs the graph's device and
// static sizes. Scales are mul or div by a
// Python number, before the mask (`scale`) or after it (`post_scale`, positive for a bool mask,
// which then keeps -inf). Every intermediate must be read by the next op only (not returned, not
// read again, not written), so nothing needs the [L, S] scores; and the kernel must take the
// operands' dtypes and shapes (AttentionKernelMisfit), else the chain stays as it is. The
// intermediates left unread are dropped.
#ifndef DYNTRACE_JIT_ATTENTION_PATTERN_H_
#define DYNTRACE_JIT_ATTENTION_PATTERN_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/graph.h"

namespace dt::jit {

// `graph` with each attention chain replaced as above; `*fused` (when given) receives how many.
// For the cuda backend: the cpu backend keeps the chain, whose kernels compute exactly what eager
// ops do (the host's fused loop, runtime/cpu_attention.h, rounds differently).
// `device`: where the graph runs (a dropout node's draw is made there); without it, attention
// with a dropout node stays as it is.
[[nodiscard]] absl::StatusOr<Graph> FuseAttention(const Graph& graph, std::optional<Device> device = std::nullopt,
                                                  int* fused = nullptr);

// The CUDA sources of the attention kernels `graph`'s `_fused_attention` nodes will load (one per
// variant the kernel takes), so that an executable compiles them beside its own kernels.
std::vector<std::string> FusedAttentionSources(const Graph& graph);

}  // namespace dt::jit

#endif  // DYNTRACE_JIT_ATTENTION_PATTERN_H_
