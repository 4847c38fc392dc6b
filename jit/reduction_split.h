// jit/reduction_split.h: sums over dims no row kernel walks, split in two.
//
// A row kernel folds the trailing dims of its domain, so a sum over dims (0, 2, 3) of a
// contiguous [N, C, H, W] tensor (the sums of batch norm's backward, bias gradients of a
// convolution) fits no kernel: the group it joined was dropped and it ran eagerly, with every
// pointwise node the group had fused into it (a CNN's compiled training step ran 600 nodes
// eagerly). Rewritten as a sum over the trailing block (H, W) into float64, a row reduction its
// producers fuse with, then a sum of those [N, C, 1, 1] partials over the rest (N), converted
// back, the work moves into kernels. The partial sums are float64, as the eager sum's
// accumulator is (float32 inputs only), so results round as the eager sum's do (up
// to the order of float64 additions, far below a float32 rounding). Means stay whole: the eager
// mean divides its float32 sum by a count, which a graph serving every size (sizes are guarded
// only where Python reads them) could not bake in.
#ifndef DYNTRACE_JIT_REDUCTION_SPLIT_H_
#define DYNTRACE_JIT_REDUCTION_SPLIT_H_

#include "absl/status/statusor.h"
#include "graph/graph.h"

namespace dt::jit {

// `graph` with each such sum rewritten; `split`, when given, counts them.
[[nodiscard]] absl::StatusOr<Graph> SplitStridedReductions(const Graph& graph, int* split = nullptr);

}  // namespace dt::jit

#endif  // DYNTRACE_JIT_REDUCTION_SPLIT_H_
