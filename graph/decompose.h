// graph/decompose.h: expands composite nodes into the primitives their eager bodies call.
//
// A decomposable composite (OpProperty kDecomposable: softmax, layer_norm, gelu ...) is replaced
// by the nodes its eager implementation runs, recorded on meta tensors through Call(). The code
// generators then fuse those primitives like any others, so a composite needs no kernel of its
// own. Nodes that cannot be expanded safely (in-place forms, run-time scalar arguments, bodies
// that make tensors outside Call()) are kept whole.
#ifndef DYNTRACE_GRAPH_DECOMPOSE_H_
#define DYNTRACE_GRAPH_DECOMPOSE_H_

#include <optional>

#include "absl/status/statusor.h"
#include "graph/graph.h"

namespace dt {

// Which composites to expand: the decomposable ones (for the code generators), or those without a
// derivative formula of their own (so a backward graph can be built from their primitives'
// formulas, as eager autograd differentiates them through their bodies).
enum class ExpandComposites { kDecomposable, kWithoutDerivative };

// The same computation with every expandable composite expanded; inputs and outputs keep their
// order, so the result runs on the same tensors as `graph`.
// `device`: where the graph runs. Bodies run on meta tensors, so a tensor a body creates (a
// causal mask) asks for the meta device; its node is pointed at `device` instead (the code
// generators, which pass none, treat such creations as constants of their own).
[[nodiscard]] absl::StatusOr<Graph> Decompose(const Graph& graph,
                                              ExpandComposites which = ExpandComposites::kDecomposable,
                                              std::optional<Device> device = std::nullopt);

}  // namespace dt

#endif  // DYNTRACE_GRAPH_DECOMPOSE_H_
