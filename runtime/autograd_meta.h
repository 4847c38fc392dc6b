// runtime/autograd_meta.h: what a tensor carries for autograd, and the thread's grad mode.
//
// The runtime only holds this state; autograd/ gives it meaning (recording calls, the backward
// engine). It lives here because graph/CallOp must ask "does any argument require grad?" on
// every call, below the layer that defines the graph of backward nodes.
//
//   if (RecordsGrad(args)) ...       // grad mode on and a tensor argument requires grad
//   GradModeGuard off(false);        // like `with torch.no_grad():` for this scope
#ifndef DYNTRACE_RUNTIME_AUTOGRAD_META_H_
#define DYNTRACE_RUNTIME_AUTOGRAD_META_H_

#include <functional>
#include <memory>

#include "absl/status/statusor.h"

#include "runtime/tensor.h"

namespace dt {

class GradNode;  // autograd/node.h
struct ViewInfo;

struct AutogradMeta {
  // Set on leaves by the user (requires_grad=True); results of recorded calls have grad_fn.
  bool requires_grad = false;
  // The node computing this tensor's gradient from its users' gradients, and which of that
  // node's outputs this tensor is; null on leaves.
  std::shared_ptr<GradNode> grad_fn;
  int output_nr = 0;
  // A leaf's accumulated gradient, or a non-leaf's where retain_grad() asked for it.
  Tensor grad;
  bool retains_grad = false;
  // A leaf's node writing into `grad`, shared by every backward pass while any holds it.
  std::weak_ptr<GradNode> grad_accumulator;
  // The storage version `grad_fn` describes, for views: another, and the base changed in place.
  uint64_t version = 0;
  // Set on results of view ops (sharing storage) of tensors that require grad; see ViewInfo.
  std::shared_ptr<const ViewInfo> view;
};

// What autograd keeps about a view, as PyTorch's view metadata does: an in-place change through
// the view rewrites its base's history (autograd/'s CopySlices), and a view whose base changed
// in place since its grad_fn was made takes its grad_fn afresh from the base's new history.
struct ViewInfo {
  // The tensor the view was taken of, never itself a view (views of views compose `take`); it
  // shares the base's AutogradMeta, whose history in-place changes update in place.
  Tensor base;
  // Takes the same view of any tensor of the base's shape: the base (recording a fresh grad_fn),
  // or a gradient or mask of the base's shape (selecting the view's elements).
  std::function<absl::StatusOr<Tensor>(const Tensor& of)> take;
};

inline bool RequiresGrad(const Tensor& t) {
  const AutogradMeta* meta = t.autograd().get();
  return meta != nullptr && (meta->requires_grad || meta->grad_fn != nullptr);
}
inline bool IsLeaf(const Tensor& t) { return t.autograd() == nullptr || t.autograd()->grad_fn == nullptr; }

// Whether calls record backward nodes on this thread (`torch.is_grad_enabled()`).
bool GradEnabled();
void SetGradEnabled(bool enabled);

// Whether autograd follows `t` now: it requires grad and grad mode is on. Such a tensor must
// take registry paths (so ops on it are recorded) and never enters a compiled graph.
inline bool TracksGrad(const Tensor& t) { return GradEnabled() && RequiresGrad(t); }

class GradModeGuard {
 public:
  explicit GradModeGuard(bool enabled) : previous_(GradEnabled()) { SetGradEnabled(enabled); }
  ~GradModeGuard() { SetGradEnabled(previous_); }
  GradModeGuard(const GradModeGuard&) = delete;
  GradModeGuard& operator=(const GradModeGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace dt

#endif  // DYNTRACE_RUNTIME_AUTOGRAD_META_H_
