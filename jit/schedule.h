// jit/schedule.h: groups a graph's nodes into fused kernels.
//
// Composites are expanded first (graph/decompose), then nodes are visited in order and each
// fusible one joins the kernel of one of its producers when the result keeps one iteration
// domain: pointwise chains (with broadcasts), reductions with their producers and consumers,
// and several reductions over the same rows (softmax, layer_norm, rms_norm become one kernel
// that runs row by row). Everything else (views, matmul through BLAS, data movement, in-place
// writes, integer division) stays a node the executor runs eagerly, between kernels.
#ifndef DYNTRACE_JIT_SCHEDULE_H_
#define DYNTRACE_JIT_SCHEDULE_H_

#include "absl/status/statusor.h"
#include "jit/kernel_ir.h"

namespace dt::jit {

[[nodiscard]] absl::StatusOr<Program> Schedule(const Graph& graph);

}  // namespace dt::jit

#endif  // DYNTRACE_JIT_SCHEDULE_H_
