#include "autograd/node.h"

#include "absl/strings/str_format.h"
#include "autograd/views.h"
#include "runtime/errors.h"

namespace dt {

AccumulateGrad::AccumulateGrad(std::shared_ptr<AutogradMeta> leaf, GradShape shape) : leaf_(std::move(leaf)) {
  output_shapes_.push_back(std::move(shape));
  retained_.resize(1);
}

absl::Status AccumulateGradient(AutogradMeta& meta, const Tensor& g, bool create_graph) {
  Tensor& grad = meta.grad;
  if (!grad.defined()) {
    // A fresh copy: the arriving gradient may be shared with other leaves (add passes its
    // gradient to both operands) and the user may change .grad in place.
    if (create_graph) {
      grad = g;
    } else {
      DT_ASSIGN_OR_RETURN(grad, Call("clone", {g}));
    }
  } else {
    DT_ASSIGN_OR_RETURN(grad, Call("add", {grad, g}));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Tensor>> AccumulateGrad::Apply(std::vector<Tensor> output_grads, bool create_graph) {
  const Tensor& g = output_grads.at(0);
  if (g.defined()) DT_RETURN_IF_ERROR(AccumulateGradient(*leaf_, g, create_graph));
  return std::vector<Tensor>{};
}

GradShape ShapeOf(const Tensor& t) { return GradShape{t.sizes(), t.dtype(), t.device()}; }

absl::StatusOr<Edge> GradientEdge(const Tensor& t) {
  DT_RETURN_IF_ERROR(RefreshView(t));
  const std::shared_ptr<AutogradMeta>& meta = t.autograd();
  if (meta->grad_fn != nullptr) return Edge{meta->grad_fn, meta->output_nr};
  std::shared_ptr<GradNode> accumulator = meta->grad_accumulator.lock();
  if (accumulator == nullptr) {
    accumulator = std::make_shared<AccumulateGrad>(meta, ShapeOf(t));
    meta->grad_accumulator = accumulator;
  }
  return Edge{accumulator, 0};
}

absl::Status CheckSavedTensors(bool released, const std::vector<SavedTensor>& saved, const std::string& node_name) {
  if (released) {
    return Error(ErrorKind::kRuntime,
                 "Trying to backward through the graph a second time (or directly access saved tensors after they "
                 "have already been freed). Saved intermediate values of the graph are freed when you call "
                 ".backward() or autograd.grad(). Specify retain_graph=True if you need to backward through the "
                 "graph a second time or if you need to access saved tensors after calling backward.");
  }
  for (const SavedTensor& s : saved) {
    const uint64_t now = s.tensor.storage()->version();
    if (now == s.version) continue;
    return Error(ErrorKind::kRuntime,
                 absl::StrFormat("one of the variables needed for gradient computation has been modified by an "
                                 "inplace operation: [%s %s], which is needed by %s, is at version %d; expected "
                                 "version %d instead",
                                 DTypeName(s.tensor.dtype()), s.tensor.ShapeString(), node_name, now, s.version));
  }
  return absl::OkStatus();
}

}  // namespace dt
