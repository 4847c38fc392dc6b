#include "autograd/op_node.h"

#include <cctype>

#include "autograd/views.h"
#include "runtime/errors.h"

namespace dt {
namespace {

bool Differentiable(const Tensor& t) { return t.defined() && IsFloating(t.dtype()) && RequiresGrad(t); }

// A shape-only stand-in for an argument the formula does not read.
Tensor ShapeOnly(const Tensor& t) { return Tensor::Empty(t.sizes(), t.dtype(), Device::Meta()); }

// A saved output without its grad_fn, which would point back at the node saving it.
Tensor Detached(const Tensor& t) {
  Tensor copy = t;
  copy.set_autograd(nullptr);
  return copy;
}

}  // namespace

absl::Status OpNode::Record(const OpDef& op, const OpArgs& args, OpResult& outputs) {
  std::shared_ptr<OpNode> node(new OpNode(op));
  node->wanted_.assign(args.size(), false);
  for (size_t i = 0; i < args.size(); ++i) {
    auto add_edge = [&](const Tensor& t, int item) -> absl::Status {
      if (!Differentiable(t)) return absl::OkStatus();
      DT_ASSIGN_OR_RETURN(Edge edge, GradientEdge(t));
      node->wanted_[i] = true;
      node->slots_.push_back(Slot{static_cast<int>(i), item});
      node->next_.push_back(std::move(edge));
      node->input_shapes_.push_back(ShapeOf(t));
      return absl::OkStatus();
    };
    if (const Tensor* t = std::get_if<Tensor>(&args[i])) DT_RETURN_IF_ERROR(add_edge(*t, -1));
    if (const auto* list = std::get_if<std::vector<Tensor>>(&args[i])) {
      for (size_t j = 0; j < list->size(); ++j) DT_RETURN_IF_ERROR(add_edge((*list)[j], static_cast<int>(j)));
    }
  }
  node->SaveArgs(args);
  node->SaveOutputs(outputs);
  for (size_t k = 0; k < outputs.size(); ++k) {
    node->output_shapes_.push_back(ShapeOf(outputs[k]));
    if (!IsFloating(outputs[k].dtype())) {
      outputs[k].set_autograd(nullptr);
      continue;
    }
    auto meta = std::make_shared<AutogradMeta>();
    meta->grad_fn = node;
    meta->output_nr = static_cast<int>(k);
    if (op.kind == OpKind::kView) {
      meta->view = MakeViewInfo(op, args, k, outputs[k]);
      meta->version = outputs[k].storage()->version();
    }
    outputs[k].set_autograd(std::move(meta));
  }
  node->retained_.resize(outputs.size());
  return absl::OkStatus();
}

void OpNode::SaveArgs(const OpArgs& args) {
  std::vector<ArgValue> values;
  values.reserve(args.size());
  auto keep = [&](const Tensor& t) {
    if (!op_.derivative.uses_inputs) return ShapeOnly(t);
    saved_.push_back(SavedTensor{t, t.storage()->version()});
    return t;
  };
  for (size_t i = 0; i < args.size(); ++i) {
    if (const Tensor* t = std::get_if<Tensor>(&args[i])) {
      values.push_back(keep(*t));
    } else if (const auto* list = std::get_if<std::vector<Tensor>>(&args[i])) {
      std::vector<Tensor> kept;
      for (const Tensor& t : *list) kept.push_back(keep(t));
      values.push_back(std::move(kept));
    } else {
      values.push_back(args[i]);
    }
  }
  args_ = OpArgs(std::move(values));
}

void OpNode::SaveOutputs(const OpResult& outputs) {
  if (!op_.derivative.uses_outputs) return;
  for (const Tensor& t : outputs) {
    outputs_.push_back(Detached(t));
    saved_.push_back(SavedTensor{outputs_.back(), t.storage()->version()});
  }
}

std::string OpNode::name() const {
  std::string camel;
  bool upper = true;
  for (char ch : op_.name()) {
    if (ch == '_' || ch == '.') {
      upper = true;
      continue;
    }
    camel += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(ch))) : ch;
    upper = false;
  }
  return camel + "Backward0";
}

absl::Status OpNode::CheckVersions() const { return CheckSavedTensors(released_, saved_, name()); }

// Saved outputs, re-attached to this node under create_graph so formulas reading them record
// a path back through it.
std::vector<Tensor> OpNode::OutputsForFormula(bool create_graph) {
  std::vector<Tensor> outputs = outputs_;
  if (!create_graph) return outputs;
  for (size_t k = 0; k < outputs.size(); ++k) {
    if (!IsFloating(outputs[k].dtype())) continue;
    auto meta = std::make_shared<AutogradMeta>();
    meta->grad_fn = shared_from_this();
    meta->output_nr = static_cast<int>(k);
    outputs[k].set_autograd(std::move(meta));
  }
  return outputs;
}

absl::StatusOr<std::vector<Tensor>> OpNode::Apply(std::vector<Tensor> output_grads, bool create_graph) {
  DT_RETURN_IF_ERROR(CheckVersions());
  const std::vector<Tensor> outputs = OutputsForFormula(create_graph);
  const GradContext context{op_, args_, outputs, output_grads, wanted_};
  DT_ASSIGN_OR_RETURN(ArgGrads grads, op_.derivative.fn(context));
  std::vector<Tensor> result(slots_.size());
  for (size_t e = 0; e < slots_.size(); ++e) {
    const ArgValue& g = grads.at(slots_[e].param);
    if (slots_[e].item < 0) {
      if (const Tensor* t = std::get_if<Tensor>(&g)) result[e] = *t;
    } else if (const auto* list = std::get_if<std::vector<Tensor>>(&g)) {
      result[e] = list->at(slots_[e].item);
    }
  }
  return result;
}

void OpNode::ReleaseSaved() {
  if (saved_.empty()) return;
  released_ = true;
  saved_.clear();
  outputs_.clear();
  std::vector<ArgValue> values;
  for (size_t i = 0; i < args_.size(); ++i) {
    // Tensor arguments go; the rest (dims, scalars) are small and formulas may still need them.
    if (std::holds_alternative<Tensor>(args_[i])) {
      values.push_back(Tensor());
    } else if (std::holds_alternative<std::vector<Tensor>>(args_[i])) {
      values.push_back(std::vector<Tensor>());
    } else {
      values.push_back(args_[i]);
    }
  }
  args_ = OpArgs(std::move(values));
}

}  // namespace dt
