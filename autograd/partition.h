// autograd/partition.h: what the forward pass saves for backward, chosen by a minimum cut.
//
// BuildJointGraph first saves every forward value a derivative formula reads. The partitioner
// then treats the forward graph as a flow network, each value costing its bytes to save, and
// cuts it at the cheapest set of values from which backward can recompute the rest: cheap
// pointwise and view chains are recomputed in the backward graph rather than kept alive between
// the passes. Reductions, matmuls, random ops, copies and composites are never recomputed (each
// is banned from the recomputed side), so their results are saved when backward needs them.
// Transcendental element functions (kCostlyElement: exp, erf, tanh ...) stay out of the cut too,
// but one whose operands backward has anyway (saved, or cheaply recomputed from saved values) is
// recomputed instead of saved afterwards: GELU's output from its saved input, softmax's exp
// from the saved scores and maximum (on the GPT-mini: 41% saved instead of 18%).
// Forward inputs cost nothing to save (they are the caller's tensors, alive anyway).
#ifndef DYNTRACE_AUTOGRAD_PARTITION_H_
#define DYNTRACE_AUTOGRAD_PARTITION_H_

#include "absl/status/status.h"
#include "autograd/joint_graph.h"

namespace dt {

// Rewrites `joint` in place: its backward graph recomputes what the cut says, the forward
// graph's extra outputs become the cut's values, and `saved_bytes` / `recomputed_nodes` report it.
[[nodiscard]] absl::Status Partition(JointGraph& joint);

}  // namespace dt

#endif  // DYNTRACE_AUTOGRAD_PARTITION_H_
