// autograd/compiled_function.h: the one backward node of a compiled forward graph.
//
// A compiled graph whose inputs require grad runs its forward graph without recording, then
// gives its differentiable outputs this node as their grad_fn. Its backward runs the compiled
// backward graph (autograd/joint_graph.h) on the incoming gradients and the saved values, and
// hands each input that requires grad its gradient, as a whole-graph custom autograd Function.
#ifndef DYNTRACE_AUTOGRAD_COMPILED_FUNCTION_H_
#define DYNTRACE_AUTOGRAD_COMPILED_FUNCTION_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "autograd/joint_graph.h"
#include "autograd/node.h"

namespace dt {

// Runs the compiled backward graph: inputs in the backward graph's order, one output per
// JointGraph::grad_inputs entry.
// The inputs are handed over: a compiled backward graph drops each after its last use.
using RunBackwardGraph = std::function<absl::StatusOr<std::vector<Tensor>>(std::vector<Tensor> inputs)>;

class CompiledFunctionNode final : public GradNode {
 public:
  // Called after the forward graph ran on `inputs` and produced `outputs` (the user outputs
  // followed by the saved values): records the node, sets the differentiable outputs' grad_fn,
  // and drops the saved values from `outputs`.
  [[nodiscard]] static absl::Status Attach(std::shared_ptr<const JointGraph> joint, RunBackwardGraph run,
                                           const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs);

  std::string name() const override { return "CompiledFunctionBackward"; }
  absl::StatusOr<std::vector<Tensor>> Apply(std::vector<Tensor> output_grads, bool create_graph) override;
  void ReleaseSaved() override;
  void WillReleaseSaved() override { hand_over_saved_ = true; }

 private:
  CompiledFunctionNode(std::shared_ptr<const JointGraph> joint, RunBackwardGraph run)
      : joint_(std::move(joint)), run_(std::move(run)) {}

  std::shared_ptr<const JointGraph> joint_;
  RunBackwardGraph run_;
  std::vector<SavedTensor> saved_;
  bool released_ = false;
  bool hand_over_saved_ = false;  // Apply moves saved_ into the backward graph's inputs
};

// The grad_fn of a tensor a compiled function returns after it called backward() through it
// (a whole training step returning its loss): eagerly that tensor keeps its node, whose saved
// values backward() freed, so a second backward through it raises PyTorch's error. It has no
// edges: the graph it stood for ran inside the compiled function.
class FreedGraphNode final : public GradNode {
 public:
  // Gives each of `outputs` this node as its grad_fn.
  static void Attach(std::vector<Tensor*> outputs);

  std::string name() const override { return "CompiledFunctionBackward"; }
  absl::StatusOr<std::vector<Tensor>> Apply(std::vector<Tensor> output_grads, bool create_graph) override;
};

}  // namespace dt

#endif  // DYNTRACE_AUTOGRAD_COMPILED_FUNCTION_H_
