#include "autograd/views.h"

#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "autograd/node.h"
#include "runtime/copy.h"
#include "runtime/errors.h"

namespace dt {
namespace {

using TakeView = std::function<absl::StatusOr<Tensor>(const Tensor&)>;

// The base's history after an in-place change through one of its views (PyTorch's
// CopySlices): the view's elements now come from `value`, the others from the old base.
class CopySlices final : public GradNode {
 public:
  CopySlices(Edge old_base, GradShape base_shape, Edge value, GradShape value_shape, TakeView take)
      : take_(std::move(take)) {
    next_ = {std::move(old_base), std::move(value)};
    input_shapes_ = {base_shape, std::move(value_shape)};
    output_shapes_ = {std::move(base_shape)};
    retained_.resize(1);
  }

  std::string name() const override { return "CopySlices"; }

  // d base_new / d base_old keeps the gradient outside the view; d base_new / d value is the
  // gradient's view. Written with registry ops, so create_graph records through them.
  absl::StatusOr<std::vector<Tensor>> Apply(std::vector<Tensor> output_grads, bool create_graph) override {
    DT_ASSIGN_OR_RETURN(Tensor g, Call("contiguous", {output_grads.at(0)}));
    std::vector<Tensor> grads(2);
    if (next_[1].node != nullptr) {
      DT_ASSIGN_OR_RETURN(grads[1], take_(g));
    }
    if (next_[0].node != nullptr) {
      Tensor keep;
      {
        GradModeGuard off(false);  // a constant mask: ones outside the view, zeros inside
        DT_ASSIGN_OR_RETURN(keep, Call("full_like", {g, Scalar::Int(1), None{}, None{}}));
        DT_ASSIGN_OR_RETURN(Tensor inside, take_(keep));
        DT_RETURN_IF_ERROR(Fill(inside, Scalar::Int(0)));
      }
      DT_ASSIGN_OR_RETURN(grads[0], Call("mul", {g, keep}));
    }
    return grads;
  }

 private:
  TakeView take_;
};

// Whether `t` covers only part of its storage: one of several views of it, as far as one can
// tell without the base.
bool PartOfStorage(const Tensor& t) {
  return t.offset() != 0 || static_cast<size_t>(t.numel() * t.itemsize()) < t.storage()->nbytes();
}

void SetHistory(const std::shared_ptr<AutogradMeta>& meta, const AutogradMeta& from) {
  meta->grad_fn = from.grad_fn;
  meta->output_nr = from.output_nr;
  if (meta->retains_grad && meta->grad_fn != nullptr) meta->grad_fn->retained()[meta->output_nr] = meta;
}

absl::Status RebaseBase(Tensor& view, const Tensor& result) {
  const std::shared_ptr<AutogradMeta>& meta = view.autograd();
  const Tensor& base = meta->view->base;
  if (!RequiresGrad(base)) {
    return Error(ErrorKind::kRuntime, "an in-place change through a view whose base no longer requires grad "
                                      "(detach_()ed) cannot be recorded");
  }
  DT_ASSIGN_OR_RETURN(Edge old_base, GradientEdge(base));
  Edge value;
  if (RequiresGrad(result)) {
    DT_ASSIGN_OR_RETURN(value, GradientEdge(result));
  }
  auto node = std::make_shared<CopySlices>(std::move(old_base), ShapeOf(base), std::move(value), ShapeOf(result),
                                           meta->view->take);
  AutogradMeta history;
  history.grad_fn = std::move(node);
  SetHistory(base.autograd(), history);
  meta->version = view.storage()->version() - 1;  // stale: taken afresh from the new base
  return RefreshView(view);
}

}  // namespace

std::shared_ptr<const ViewInfo> MakeViewInfo(const OpDef& op, const OpArgs& args, size_t index,
                                             const Tensor& output) {
  const Tensor& input = args.tensor(0);
  if (!RequiresGrad(input) || !output.SharesStorageWith(input)) return nullptr;
  const ViewInfo* outer = input.autograd()->view.get();
  auto info = std::make_shared<ViewInfo>();
  info->base = outer != nullptr ? outer->base : input;
  OpArgs rest = args;
  rest[0] = Tensor();  // the tensor the view is taken of comes with each call
  TakeView inner = outer != nullptr ? outer->take : nullptr;
  info->take = [&op, rest = std::move(rest), index, inner](const Tensor& of) -> absl::StatusOr<Tensor> {
    OpArgs call = rest;
    if (inner) {
      DT_ASSIGN_OR_RETURN(call[0], inner(of));
    } else {
      call[0] = of;
    }
    DT_ASSIGN_OR_RETURN(OpResult r, CallOp(op, call));
    return r.at(index);
  };
  return info;
}

absl::Status RefreshView(const Tensor& t) {
  const std::shared_ptr<AutogradMeta>& meta = t.autograd();
  if (meta == nullptr || meta->view == nullptr || meta->version == t.storage()->version()) return absl::OkStatus();
  const ViewInfo& info = *meta->view;
  if (!RequiresGrad(info.base)) return absl::OkStatus();  // the base left the graph (detach_())
  Tensor fresh;
  {
    GradModeGuard on(true);
    DT_ASSIGN_OR_RETURN(fresh, info.take(info.base));
  }
  SetHistory(meta, *fresh.autograd());
  meta->version = t.storage()->version();
  return absl::OkStatus();
}

absl::Status CheckInplaceTarget(const Tensor& target, absl::string_view op) {
  const AutogradMeta* meta = target.autograd().get();
  if (meta != nullptr && meta->requires_grad && meta->grad_fn == nullptr) {
    return Error(ErrorKind::kRuntime,
                 absl::StrFormat("a leaf Variable that requires grad is being used in an in-place operation (%s).", op));
  }
  if (meta != nullptr && meta->view != nullptr && IsLeaf(meta->view->base)) {
    return Error(ErrorKind::kRuntime,
                 absl::StrFormat("a view of a leaf Variable that requires grad is being used in an in-place "
                                 "operation (%s).", op));
  }
  if (!RequiresGrad(target) && PartOfStorage(target)) {
    // Its base (and other views of it) would change without a history: a wrong gradient.
    return Error(ErrorKind::kRuntime,
                 absl::StrFormat("%s: this tensor is part of another tensor that does not require grad (a view "
                                 "of it), and the value written requires grad; dyntrace's autograd follows views "
                                 "only of tensors that require grad. Write into the whole tensor (x[index] = "
                                 "value) or make it require grad first",
                                 op));
  }
  return absl::OkStatus();
}

absl::Status RebaseHistory(Tensor& target, const Tensor& result) {
  target.storage()->BumpVersion();
  const std::shared_ptr<AutogradMeta>& meta = target.autograd();
  if (meta != nullptr && meta->view != nullptr) return RebaseBase(target, result);
  if (!RequiresGrad(result)) return absl::OkStatus();
  if (meta == nullptr) {
    target.set_autograd(std::make_shared<AutogradMeta>());
  }
  // In place, not a new AutogradMeta: views of `target` hold this one as their base's.
  SetHistory(target.autograd(), *result.autograd());
  return absl::OkStatus();
}

}  // namespace dt
