// autograd/joint_graph.h: a traced graph whose inputs require grad, split into a forward graph
// and a backward graph built from the registry's derivative formulas (AOTAutograd's job).
//
// The backward graph is traced, not written: each forward node's formula runs on meta tensors
// while a recorder turns its Call()s into nodes, exactly as eager autograd would run it. The
// engine's per-edge work (summing broadcast dims away, casting to the argument's dtype) becomes
// nodes too. What the formulas read from the forward pass is saved: graph inputs are kept as
// they are, intermediates become extra outputs of the forward graph. The partitioner
// (autograd/partition.h) then decides which of those intermediates backward recomputes instead.
//
//   absl::StatusOr<JointGraph> joint = BuildJointGraph(traced, {true, false}, Device::Cpu());
//   // run joint->forward: its first joint->num_user_outputs outputs are the traced outputs;
//   // joint->backward maps (grads of joint->differentiable_outputs, saved values) to the
//   // gradients of the inputs joint->grad_inputs names.
#ifndef DYNTRACE_AUTOGRAD_JOINT_GRAPH_H_
#define DYNTRACE_AUTOGRAD_JOINT_GRAPH_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/graph.h"

namespace dt {

// Where a value the backward graph reads comes from when the forward graph has run.
struct SavedValue {
  bool is_input = false;  // a forward input (its position), else a forward output (its index)
  int index = 0;
};

struct JointGraph {
  // The traced graph with the saved intermediates appended to its outputs.
  std::shared_ptr<Graph> forward;
  int num_user_outputs = 0;
  // The user outputs that get a gradient function, by output index; each at most once.
  std::vector<int> differentiable_outputs;
  // Inputs: one gradient per differentiable output, in that order, then one per `saved`.
  // Outputs: one gradient per `grad_inputs` entry.
  Graph backward;
  std::vector<SavedValue> saved;
  // Forward input positions whose gradients the backward graph returns, in output order.
  std::vector<int> grad_inputs;
  // Forward input positions that require grad (each gets an edge, even when no gradient flows).
  std::vector<int> inputs_requiring_grad;
  // Bytes of the saved intermediates, and what saving everything the formulas read would cost.
  int64_t saved_bytes = 0;
  int64_t save_everything_bytes = 0;
  int recomputed_nodes = 0;
};

// REQUIRES: input_requires_grad has one entry per graph input, at least one true. `device`: where
// the graph runs (creation ops the formulas record are pointed there). An error says why the
// graph cannot be differentiated as a whole (an op without a derivative, an in-place change of a
// tensor that requires grad, run-time numbers in differentiated nodes, outputs that view inputs);
// such a frame runs eagerly under autograd instead. `min_cut`: let the partitioner choose what to
// save (else every value the formulas read is saved, for comparison).
[[nodiscard]] absl::StatusOr<JointGraph> BuildJointGraph(const Graph& traced, const std::vector<bool>& input_requires_grad,
                                                         Device device, bool min_cut = true);

// backward() inside a trace (a whole training step in one graph): appends to `graph` the nodes
// that compute the gradient of value `root`, seeded with value `seed` (its shape and dtype),
// with respect to each graph input; returns one entry per input, empty where no gradient flows
// or the input does not require grad. `requires_grad` has one flag per value of `graph`: those
// autograd follows (made with grad mode on from values that require grad). Composites without a
// formula of their own are not expanded here: differentiating one is an error, as is any graph
// BuildJointGraph refuses.
[[nodiscard]] absl::StatusOr<std::vector<std::optional<ValueId>>> AppendBackward(Graph& graph, ValueId root,
                                                                                 ValueId seed,
                                                                                 const std::vector<bool>& requires_grad,
                                                                                 Device device);

}  // namespace dt

#endif  // DYNTRACE_AUTOGRAD_JOINT_GRAPH_H_
