// jit/schedule.h: groups a graph's nodes into fused kernels.
//
// Composites are expanded first (graph/decompose), then nodes are visited in order and each
// fusible one joins the kernel of one of its producers when the result keeps one iteration
// domain: pointwise chains (with broadcasts), reductions with their producers and consumers,
// and several reductions over the same rows (softmax, layer_norm, rms_norm become one kernel
// that runs row by row). With `fuse_in_place_writes`, a pointwise in-place write
// (`p.sub_(m / denom * step)`, an optimizer's update) joins its producers' kernel, or the
// latest kernel over its shape when none feeds it, which stores straight into the written
// tensor, when no other node runs between the kernel's start and the write that reads the
// written storage; with `in_place_writes_alone` (CUDA) one that joins nothing is a kernel of
// its own. A write does not end the kernels started before it: later nodes that don't read the
// written storage may still join them, and a kernel's later reads of a tensor it wrote read
// its own result. Everything else (views, matmul through BLAS, data movement, other in-place
// writes, integer division) stays a node the executor runs eagerly, between kernels.
#ifndef DYNTRACE_JIT_SCHEDULE_H_
#define DYNTRACE_JIT_SCHEDULE_H_

#include <optional>

#include "absl/status/statusor.h"
#include "jit/kernel_ir.h"

namespace dt::jit {

struct ScheduleOptions {
  bool fuse_in_place_writes = false;
  bool in_place_writes_alone = false;
  // Whether a reduction whose input's innermost (stride-1) dim is kept, not reduced (a sum over
  // the batch dim: bias and norm-weight gradients), becomes a kernel. The CPU kernels walk the
  // reduced dim innermost, one strided element at a time, 10x slower there than the eager
  // reduction, which vectorises across the kept dim.
  bool fuse_outer_reductions = true;
  // With fuse_outer_reductions off (the CPU): such a reduction over all the kept dims of a row
  // kernel computing its input joins that kernel as a column reduction (kernel_ir.h
  // kColumnReduce), folding each row as the row is computed.
  bool fuse_column_reductions = false;
  // When positive, a node joins a kernel only while the kernel's operands (values read from
  // outside, run-time numbers, values stored for later readers) stay within this many: the CUDA
  // launch ABI's limit.
  int max_operands = 0;
  // Attention written out op by op (matmul, scale, mask, softmax, matmul) becomes one
  // `_fused_attention` node, run by the fused kernel (jit/attention_pattern.h): on CUDA.
  bool fuse_attention = false;
  // Where the graph runs: the attention pattern draws dropout's keep mask there.
  std::optional<Device> device;
  // Sums over dims no row kernel walks (batch norm's backward over (0, 2, 3)) are split into a
  // row sum into float64 and a sum of its partials (jit/reduction_split.h): the CPU, where the
  // eager sum accumulates in float64 too.
  bool split_strided_reductions = false;
};

[[nodiscard]] absl::StatusOr<Program> Schedule(const Graph& graph, ScheduleOptions options = {});

// Per step of `program`, the values no later step touches: an executable drops its reference to
// them after that step, so an intermediate's buffer goes back to the allocator as soon as its
// last reader ran, as in eager execution, instead of every intermediate living until the graph
// returns. A kernel touches its operands and, for the eager fallback of a layout it can't walk,
// its nodes' arguments and results. Outputs are never dropped.
std::vector<std::vector<ValueId>> ReleasePoints(const Program& program);

// Fused in-place writes (above) assume that what a program writes is reachable only through the
// written tensor. Per graph input, whether some in-place node writes into its storage (through
// any view of it); and whether, on one call, such an input shares storage with another input
// (the executables then run that call's nodes eagerly, in order). Read-only inputs may share
// storage freely (a batch's inputs and targets, views of one token buffer). Empty when no kernel
// of `program` stores an in-place write (eager in-place nodes run in order and need no check).
std::vector<bool> InputsWrittenInPlace(const Program& program);
bool WrittenInputOverlaps(const std::vector<Tensor>& inputs, const std::vector<bool>& written);

}  // namespace dt::jit

#endif  // DYNTRACE_JIT_SCHEDULE_H_
