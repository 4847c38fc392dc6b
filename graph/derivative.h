// graph/derivative.h: how an op declares its derivative, beside its entry in the registry.
//
// A derivative maps the gradients of an op's outputs to the gradients of its tensor arguments,
// written with registry ops (Call("mul", ...)) so the same formula runs eagerly on any device,
// records its own backward nodes under create_graph, and can later be traced into a graph.
// Formulas return the gradient at the argument's broadcast shape and the call's compute dtype:
// the engine sums broadcast dims away and casts to the argument's dtype, once, for every op.
//
//   absl::StatusOr<ArgGrads> ProductGrad(const GradContext& c) {
//     ArgGrads grads(c.args.size());
//     if (c.needs(0)) DT_ASSIGN_OR_RETURN(grads[0], Call("mul", {c.grad(), c.args[1]}));
//     ...
//   }
#ifndef DYNTRACE_GRAPH_DERIVATIVE_H_
#define DYNTRACE_GRAPH_DERIVATIVE_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "graph/op_schema.h"

namespace dt {

class OpDef;

// One entry per schema parameter: a Tensor for a tensor argument, a std::vector<Tensor> for a
// tensor list (entries may be undefined), None where no gradient flows.
using ArgGrads = std::vector<ArgValue>;

struct GradContext {
  const OpDef& op;
  // The call's arguments. Tensors are undefined unless the derivative saves inputs.
  const OpArgs& args;
  // The call's results; undefined unless the derivative saves outputs.
  const std::vector<Tensor>& outputs;
  // The gradient of each result; zeros where none flowed (never undefined).
  absl::Span<const Tensor> grads;
  // Per parameter: whether its gradient is wanted.
  const std::vector<bool>& wanted;

  const Tensor& grad(size_t i = 0) const { return grads[i]; }
  bool needs(size_t param) const { return param < wanted.size() && wanted[param]; }
  const Tensor& input(size_t param) const { return args.tensor(param); }
  const Tensor& output(size_t i = 0) const { return outputs[i]; }
};

using DerivativeFn = absl::StatusOr<ArgGrads> (*)(const GradContext& context);

struct Derivative {
  DerivativeFn fn = nullptr;
  // Which values the formula reads: the rest are not kept alive for the backward pass (nor
  // checked for in-place changes).
  bool uses_inputs = true;
  bool uses_outputs = false;
};

}  // namespace dt

#endif  // DYNTRACE_GRAPH_DERIVATIVE_H_
