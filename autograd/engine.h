// autograd/engine.h: the backward pass, in C++ from the roots to the leaves in one sweep.
//
//   BackwardRequest request{.roots = {loss}};
//   RunBackward(request);                 // loss.backward(): accumulates into leaves' .grad
//   request.inputs = {w}; request.accumulate = false;
//   auto grads = RunBackward(request);    // autograd.grad(loss, w)
#ifndef DYNTRACE_AUTOGRAD_ENGINE_H_
#define DYNTRACE_AUTOGRAD_ENGINE_H_

#include <vector>

#include "absl/status/statusor.h"
#include "runtime/tensor.h"

namespace dt {

struct BackwardRequest {
  std::vector<Tensor> roots;
  // One per root; undefined means ones (only for one-element roots, as in PyTorch).
  std::vector<Tensor> root_grads;
  bool retain_graph = false;
  bool create_graph = false;
  // With `accumulate`, the gradients reaching leaves are added to their .grad (backward()), or,
  // where `inputs` are given, only those of `inputs`, leaves or not (backward(inputs=...));
  // otherwise the gradients of `inputs` are returned and no .grad changes (autograd.grad()).
  // With inputs, only the nodes on a path to one of them run.
  bool accumulate = true;
  std::vector<Tensor> inputs;
  bool allow_unused = false;
};

// The gradients of request.inputs (undefined for unused inputs when allow_unused), or nothing
// when accumulating.
[[nodiscard]] absl::StatusOr<std::vector<Tensor>> RunBackward(const BackwardRequest& request);

}  // namespace dt

#endif  // DYNTRACE_AUTOGRAD_ENGINE_H_
