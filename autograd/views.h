// autograd/views.h: views of tensors that require grad, and in-place changes through them.
//
// A view shares its base's storage, so changing either in place changes the other. As in
// PyTorch, autograd remembers how each view was taken (ViewInfo in runtime/autograd_meta.h):
//
//   y = x * 2; v = y[:, 0]     // v's ViewInfo: base y, take = t -> t[:, 0]
//   v.mul_(3)                  // y's history becomes CopySlices(y's old history, v * 3)
//   y.sum().backward()         // x.grad: 6 in column 0, 2 elsewhere
//   y.add_(1); v.sum()         // v's grad_fn is taken afresh from y's new history
#ifndef DYNTRACE_AUTOGRAD_VIEWS_H_
#define DYNTRACE_AUTOGRAD_VIEWS_H_

#include <memory>

#include "absl/status/status.h"
#include "graph/op_registry.h"
#include "runtime/autograd_meta.h"

namespace dt {

// The ViewInfo of `output` (output number `index` of the view op `op` called with `args`), or
// null when it is no view of args[0] (reshape may copy) or args[0] does not require grad.
std::shared_ptr<const ViewInfo> MakeViewInfo(const OpDef& op, const OpArgs& args, size_t index,
                                             const Tensor& output);

// Brings a view's grad_fn up to date when its storage changed in place since the grad_fn was
// made (through its base or another view); nothing for other tensors.
[[nodiscard]] absl::Status RefreshView(const Tensor& t);

// Why `target` may not be changed in place with autograd recording the change (a view of a
// leaf that requires grad, as PyTorch; part of a tensor autograd does not follow, whose other
// views it could not update), or OK.
[[nodiscard]] absl::Status CheckInplaceTarget(const Tensor& target, absl::string_view op);

// After `target`'s values were overwritten by `result` (computed out of place, with its
// history): `result`'s history becomes the target's; for a view, its base's history becomes
// CopySlices(the base's old history, result) and the view's is taken afresh from it. Bumps
// the storage's version. `target` is the tensor the caller holds (its AutogradMeta may be set).
[[nodiscard]] absl::Status RebaseHistory(Tensor& target, const Tensor& result);

}  // namespace dt

#endif  // DYNTRACE_AUTOGRAD_VIEWS_H_
