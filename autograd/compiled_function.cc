#include "autograd/compiled_function.h"

#include <utility>

#include "runtime/autograd_meta.h"
#include "runtime/errors.h"

namespace dt {
namespace {

// A saved value without autograd state: the node keeps the data, not a path back to itself.
Tensor Detached(const Tensor& t) {
  Tensor copy = t;
  copy.set_autograd(nullptr);
  return copy;
}

}  // namespace

absl::Status CompiledFunctionNode::Attach(std::shared_ptr<const JointGraph> joint, RunBackwardGraph run,
                                          const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) {
  std::shared_ptr<CompiledFunctionNode> node(new CompiledFunctionNode(joint, std::move(run)));
  for (int position : joint->inputs_requiring_grad) {
    const Tensor& input = inputs.at(position);
    if (!RequiresGrad(input)) {  // guarded when traced; a caller inside dyntrace broke that
      return absl::InternalError("a compiled graph's input no longer requires grad");
    }
    DT_ASSIGN_OR_RETURN(Edge edge, GradientEdge(input));
    node->next_.push_back(std::move(edge));
    node->input_shapes_.push_back(ShapeOf(input));
  }
  for (const SavedValue& s : joint->saved) {
    const Tensor& t = s.is_input ? inputs.at(s.index) : outputs.at(s.index);
    node->saved_.push_back(SavedTensor{Detached(t), t.storage()->version()});
  }
  outputs.resize(joint->num_user_outputs);
  for (size_t j = 0; j < joint->differentiable_outputs.size(); ++j) {
    Tensor& out = outputs.at(joint->differentiable_outputs[j]);
    node->output_shapes_.push_back(ShapeOf(out));
    auto meta = std::make_shared<AutogradMeta>();
    meta->grad_fn = node;
    meta->output_nr = static_cast<int>(j);
    out.set_autograd(std::move(meta));
  }
  node->retained_.resize(joint->differentiable_outputs.size());
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Tensor>> CompiledFunctionNode::Apply(std::vector<Tensor> output_grads, bool create_graph) {
  if (create_graph) {
    return Error(ErrorKind::kNotImplemented,
                 "create_graph=True through a compiled function: its backward graph is not differentiable; call the "
                 "function uncompiled (or under dyntrace.jit's backend=\"eager\" with grad mode off for the inputs) "
                 "for higher-order gradients");
  }
  DT_RETURN_IF_ERROR(CheckSavedTensors(released_, saved_, name()));
  std::vector<Tensor> inputs;
  inputs.reserve(output_grads.size() + saved_.size());
  for (size_t j = 0; j < output_grads.size(); ++j) {
    Tensor g = std::move(output_grads[j]);
    if (!g.is_contiguous()) {
      DT_ASSIGN_OR_RETURN(g, Call("contiguous", {g}));
    }
    if (g.dtype() != output_shapes_[j].dtype) {
      DT_ASSIGN_OR_RETURN(g, Call("_to", {g, output_shapes_[j].dtype}));
    }
    inputs.push_back(std::move(g));
  }
  // Handed over, the saved values live only in the backward graph's run, which frees each after
  // its last reader: activations go as backward consumes them, not all at its end.
  for (SavedTensor& s : saved_) inputs.push_back(hand_over_saved_ ? std::move(s.tensor) : s.tensor);
  if (hand_over_saved_) ReleaseSaved();
  absl::StatusOr<std::vector<Tensor>> grads;
  {
    GradModeGuard off(false);
    grads = run_(std::move(inputs));
  }
  if (!grads.ok()) return grads.status();
  std::vector<Tensor> result(next_.size());
  for (size_t k = 0; k < joint_->grad_inputs.size() && k < grads->size(); ++k) {
    for (size_t e = 0; e < joint_->inputs_requiring_grad.size(); ++e) {
      if (joint_->inputs_requiring_grad[e] == joint_->grad_inputs[k]) result[e] = (*grads)[k];
    }
  }
  return result;
}

void CompiledFunctionNode::ReleaseSaved() {
  if (saved_.empty()) return;
  released_ = true;
  saved_.clear();
}

void FreedGraphNode::Attach(std::vector<Tensor*> outputs) {
  std::shared_ptr<FreedGraphNode> node(new FreedGraphNode());
  for (size_t j = 0; j < outputs.size(); ++j) {
    node->output_shapes_.push_back(ShapeOf(*outputs[j]));
    auto meta = std::make_shared<AutogradMeta>();
    meta->grad_fn = node;
    meta->output_nr = static_cast<int>(j);
    outputs[j]->set_autograd(std::move(meta));
  }
  node->retained_.resize(outputs.size());
}

absl::StatusOr<std::vector<Tensor>> FreedGraphNode::Apply(std::vector<Tensor> output_grads, bool create_graph) {
  return CheckSavedTensors(/*released=*/true, {}, name());
}

}  // namespace dt
