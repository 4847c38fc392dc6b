// interpreter/py_autograd.h: autograd's Python surface: Tensor.requires_grad, .grad, .grad_fn,
// backward(), detach(); dyntrace.autograd.grad's engine entry; grad mode.
#ifndef DYNTRACE_INTERPRETER_PY_AUTOGRAD_H_
#define DYNTRACE_INTERPRETER_PY_AUTOGRAD_H_

#include <Python.h>

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/autograd_meta.h"
#include "runtime/tensor.h"

namespace dt::interpreter::py {

// Tensor attributes and methods, spliced into the Tensor type's tables (py_tensor.cc).
extern PyGetSetDef autograd_getset[];
extern PyMethodDef autograd_methods[];

// dyntrace.is_grad_enabled, _set_grad_enabled, _autograd_grad, _autograd_backward, and the
// grad_fn type; installs the grad recorder.
[[nodiscard]] bool AddAutogradBindings(PyObject* module);

// tensor.requires_grad = value, with PyTorch's checks (leaves only; floating dtypes only); false
// with a Python error set when refused.
[[nodiscard]] bool SetRequiresGradFlag(PyObject* tensor, bool value);

// ", grad_fn=<MulBackward0>" or ", requires_grad=True" for repr, else "".
std::string AutogradReprSuffix(const Tensor& t);

// The in-place step shared by `x.add_(y)` and `x[i] = v`: refuses leaves that require grad,
// views of them, and parts of tensors autograd does not follow (autograd/views.h); false with
// a Python error set when refused. `target` is the Python tensor written into.
[[nodiscard]] bool CheckInplaceTarget(PyObject* target, absl::string_view op);
// A copy of `target`'s current values carrying its autograd identity: what a recorded call
// computing an in-place change takes as its input, since the target itself is about to be
// overwritten (and the backward pass may read the old values).
[[nodiscard]] absl::StatusOr<Tensor> OldValues(const Tensor& target);
// Makes `result`'s history the target's (through a view: its base's, by CopySlices) and bumps
// the storage version; false with a Python error set when that failed.
[[nodiscard]] bool AdoptHistory(PyObject* target, const Tensor& result);

}  // namespace dt::interpreter::py

#endif  // DYNTRACE_INTERPRETER_PY_AUTOGRAD_H_
