// jit/schedule.h: groups a graph's nodes into fused kernels.
//
// Composites are expanded first (graph/decompose), then nodes are visited in order and each
// fusible one joins the kernel of one of its producers when the result keeps one iteration
// domain: pointwise chains (with broadcasts), reductions with their producers and consumers,
// and several reductions over the same rows (softmax, layer_norm, rms_norm become one kernel
// that runs row by row). With `fuse_in_place_writes` (the CPU executor), a pointwise in-place
// write (`p.sub_(m / denom * step)`, an optimizer's update) joins its producers' kernel, which
// stores straight into the written tensor, when no other node runs between the kernel's start
// and the write that reads the written storage. Everything else (views, matmul through BLAS,
// data movement, other in-place writes, integer division) stays a node the executor runs
// eagerly, between kernels.
#ifndef DYNTRACE_JIT_SCHEDULE_H_
#define DYNTRACE_JIT_SCHEDULE_H_

#include "absl/status/statusor.h"
#include "jit/kernel_ir.h"

namespace dt::jit {

struct ScheduleOptions {
  bool fuse_in_place_writes = false;
};

[[nodiscard]] absl::StatusOr<Program> Schedule(const Graph& graph, ScheduleOptions options = {});

}  // namespace dt::jit

#endif  // DYNTRACE_JIT_SCHEDULE_H_
