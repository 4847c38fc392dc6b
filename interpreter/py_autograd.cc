#include "interpreter/py_autograd.h"

#include "absl/strings/str_format.h"
#include "autograd/engine.h"
#include "autograd/node.h"
#include "autograd/record.h"
#include "autograd/views.h"
#include "graph/autocast.h"
#include "interpreter/py_ref.h"
#include "interpreter/py_types.h"
#include "runtime/autograd_meta.h"
#include "runtime/errors.h"

namespace dt::interpreter::py {
namespace {

Tensor& Mutable(PyObject* self) { return reinterpret_cast<PyTensor*>(self)->tensor; }

AutogradMeta& MetaOf(PyObject* self) {
  Tensor& t = Mutable(self);
  if (t.autograd() == nullptr) t.set_autograd(std::make_shared<AutogradMeta>());
  return *t.autograd();
}

// ---- grad_fn objects ----
struct PyGradFn {
  PyObject_HEAD
  std::shared_ptr<GradNode> node;
};

PyTypeObject GradFnType = {PyVarObject_HEAD_INIT(nullptr, 0) "dyntrace.autograd.Node"};

PyObject* WrapNode(std::shared_ptr<GradNode> node) {
  if (node == nullptr) Py_RETURN_NONE;
  PyGradFn* obj = PyObject_New(PyGradFn, &GradFnType);
  if (obj == nullptr) return nullptr;
  new (&obj->node) std::shared_ptr<GradNode>(std::move(node));
  return reinterpret_cast<PyObject*>(obj);
}

void GradFnDealloc(PyObject* self) {
  reinterpret_cast<PyGradFn*>(self)->node.~shared_ptr();
  PyObject_Free(self);
}

GradNode& NodeOf(PyObject* self) { return *reinterpret_cast<PyGradFn*>(self)->node; }

PyObject* GradFnRepr(PyObject* self) {
  return PyUnicode_FromFormat("<%s object at %p>", NodeOf(self).name().c_str(), self);
}

PyObject* GradFnName(PyObject* self, PyObject*) { return PyUnicode_FromString(NodeOf(self).name().c_str()); }

PyObject* GradFnNext(PyObject* self, void*) {
  const std::vector<Edge>& next = NodeOf(self).next();
  PyRef tuple = PyRef::Steal(PyTuple_New(static_cast<Py_ssize_t>(next.size())));
  if (!tuple) return nullptr;
  for (size_t i = 0; i < next.size(); ++i) {
    PyRef node = PyRef::Steal(WrapNode(next[i].node));
    if (!node) return nullptr;
    PyObject* pair = Py_BuildValue("(Oi)", node.get(), next[i].input_nr);
    if (pair == nullptr) return nullptr;
    PyTuple_SET_ITEM(tuple.get(), static_cast<Py_ssize_t>(i), pair);
  }
  return tuple.Release();
}

PyObject* GradFnCompare(PyObject* a, PyObject* b, int op) {
  if (!PyObject_TypeCheck(b, &GradFnType) || (op != Py_EQ && op != Py_NE)) Py_RETURN_NOTIMPLEMENTED;
  const bool same = &NodeOf(a) == &NodeOf(b);
  return PyBool_FromLong(op == Py_EQ ? same : !same);
}

Py_hash_t GradFnHash(PyObject* self) { return static_cast<Py_hash_t>(reinterpret_cast<uintptr_t>(&NodeOf(self)) >> 4); }

PyMethodDef grad_fn_methods[] = {
    {"name", GradFnName, METH_NOARGS, "the node's name, as PyTorch's (MulBackward0)"},
    {nullptr, nullptr, 0, nullptr},
};
PyGetSetDef grad_fn_getset[] = {
    {"next_functions", GradFnNext, nullptr, "(node, output) for each input gradients flow to", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

// ---- Tensor attributes ----
PyObject* GetRequiresGrad(PyObject* self, void*) { return PyBool_FromLong(RequiresGrad(Unwrap(self))); }

}  // namespace

bool SetRequiresGradFlag(PyObject* self, bool value) {
  const Tensor& t = Unwrap(self);
  if (!IsLeaf(t)) {
    if (value) return true;
    PyErr_SetString(PyExc_RuntimeError,
                    "you can only change requires_grad flags of leaf variables. If you want to use a computed "
                    "variable in a subgraph that doesn't require differentiation use var_no_grad = var.detach().");
    return false;
  }
  if (value && !IsFloating(t.dtype())) {
    PyErr_Format(PyExc_RuntimeError, "only Tensors of floating point dtype can require gradients (got %s)",
                 std::string(DTypeName(t.dtype())).c_str());
    return false;
  }
  if (!value && t.autograd() == nullptr) return true;
  MetaOf(self).requires_grad = value;
  return true;
}

// Whether `a` and `b` are one tensor (storage, place, geometry, dtype).
static bool SameTensor(const Tensor& a, const Tensor& b) {
  return a.storage() == b.storage() && a.offset() == b.offset() && a.sizes() == b.sizes() &&
         a.strides() == b.strides() && a.dtype() == b.dtype();
}

PyObject* GradObject(PyObject* tensor) {
  auto* self = reinterpret_cast<PyTensor*>(tensor);
  const AutogradMeta* meta = self->tensor.autograd().get();
  if (meta == nullptr || !meta->grad.defined()) {
    Py_CLEAR(self->grad_object);
    return Py_None;
  }
  if (self->grad_object == nullptr || !SameTensor(Unwrap(self->grad_object), meta->grad)) {
    PyObject* fresh = Wrap(meta->grad);
    if (fresh == nullptr) return nullptr;
    Py_XSETREF(self->grad_object, fresh);
  }
  return self->grad_object;
}

namespace {

int SetRequiresGrad(PyObject* self, PyObject* value, void*) {
  if (value == nullptr || !PyBool_Check(value)) {
    PyErr_SetString(PyExc_TypeError, "requires_grad must be a bool");
    return -1;
  }
  return SetRequiresGradFlag(self, value == Py_True) ? 0 : -1;
}

PyObject* GetGrad(PyObject* self, void*) {
  PyObject* grad = GradObject(self);
  Py_XINCREF(grad);
  return grad;
}

int SetGrad(PyObject* self, PyObject* value, void*) {
  if (value == nullptr || value == Py_None) {
    if (Unwrap(self).autograd() != nullptr) MetaOf(self).grad = Tensor();
    return 0;
  }
  if (!IsTensor(value)) {
    PyErr_Format(PyExc_TypeError, "assigned grad expected to be a Tensor or None but got grad of type %s",
                 Py_TYPE(value)->tp_name);
    return -1;
  }
  const Tensor& t = Unwrap(self);
  const Tensor& g = Unwrap(value);
  if (g.sizes() != t.sizes() || g.dtype() != t.dtype() || g.device() != t.device()) {
    PyErr_Format(PyExc_RuntimeError, "assigned grad has data of shape %s, dtype %s on %s; the tensor has shape %s, "
                 "dtype %s on %s", g.ShapeString().c_str(), std::string(DTypeName(g.dtype())).c_str(),
                 g.device().ToString().c_str(), t.ShapeString().c_str(), std::string(DTypeName(t.dtype())).c_str(),
                 t.device().ToString().c_str());
    return -1;
  }
  MetaOf(self).grad = g;
  Py_INCREF(value);  // `p.grad = g` then `p.grad is g`, as in PyTorch
  Py_XSETREF(reinterpret_cast<PyTensor*>(self)->grad_object, value);
  return 0;
}

PyObject* GetGradFn(PyObject* self, void*) {
  // A view whose base changed in place shows the grad_fn backward would use.
  if (absl::Status s = RefreshView(Unwrap(self)); !s.ok()) return RaiseStatus(s);
  const AutogradMeta* meta = Unwrap(self).autograd().get();
  return WrapNode(meta == nullptr ? nullptr : meta->grad_fn);
}

PyObject* GetIsLeaf(PyObject* self, void*) { return PyBool_FromLong(IsLeaf(Unwrap(self))); }
PyObject* GetVersion(PyObject* self, void*) {
  return PyLong_FromUnsignedLongLong(Unwrap(self).storage()->version());
}
// tensor.data: the same values outside autograd; assigning swaps the values (storage, sizes,
// dtype, device) under the same tensor object and autograd identity, as Module.to() needs.
PyObject* GetData(PyObject* self, void*) {
  Tensor t = Unwrap(self);
  t.set_autograd(nullptr);
  return Wrap(std::move(t));
}

int SetData(PyObject* self, PyObject* value, void*) {
  if (value == nullptr || !IsTensor(value)) {
    PyErr_SetString(PyExc_TypeError, "data must be a Tensor");
    return -1;
  }
  Tensor replacement = Unwrap(value);
  replacement.set_autograd(Unwrap(self).autograd());
  Mutable(self) = std::move(replacement);
  return 0;
}

PyObject* GetIsParameter(PyObject* self, void*) {
  return PyBool_FromLong(reinterpret_cast<PyTensor*>(self)->is_parameter);
}

PyObject* GetRetainsGrad(PyObject* self, void*) {
  const AutogradMeta* meta = Unwrap(self).autograd().get();
  return PyBool_FromLong(meta != nullptr && meta->retains_grad);
}

}  // namespace

PyGetSetDef autograd_getset[] = {
    {"requires_grad", GetRequiresGrad, SetRequiresGrad, "whether gradients are computed for this tensor", nullptr},
    {"grad", GetGrad, SetGrad, "the gradient accumulated by backward() (None until then)", nullptr},
    {"grad_fn", GetGradFn, nullptr, "the backward node that made this tensor (None for leaves)", nullptr},
    {"is_leaf", GetIsLeaf, nullptr, "whether the tensor was made by the user rather than by a recorded op", nullptr},
    {"_version", GetVersion, nullptr, "the count of in-place changes of the tensor's storage", nullptr},
    {"retains_grad", GetRetainsGrad, nullptr, "whether retain_grad() was called on this non-leaf", nullptr},
    {"data", GetData, SetData, "the values outside autograd (assigning replaces them in place)", nullptr},
    {"_is_parameter", GetIsParameter, nullptr, "made by dyntrace.nn.Parameter", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

std::string AutogradReprSuffix(const Tensor& t) {
  const AutogradMeta* meta = t.autograd().get();
  if (meta == nullptr) return "";
  if (meta->grad_fn != nullptr) return absl::StrFormat(", grad_fn=<%s>", meta->grad_fn->name());
  return meta->requires_grad ? ", requires_grad=True" : "";
}

}  // namespace dt::interpreter::py

namespace dt::interpreter::py {
namespace {

PyObject* MethodRequiresGrad(PyObject* self, PyObject* args, PyObject* kwargs) {
  static const char* keywords[] = {"requires_grad", nullptr};
  int value = 1;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|p:requires_grad_", const_cast<char**>(keywords), &value)) {
    return nullptr;
  }
  if (!SetRequiresGradFlag(self, value != 0)) return nullptr;
  return Py_NewRef(self);
}

// copy.deepcopy(x) (and so of a module, a state_dict, an optimizer): a leaf's data cloned, with
// its requires_grad, its parameter flag and a copy of its .grad, entered in the memo so tensors
// shared in the original stay shared in the copy. A tensor with a history raises PyTorch's error.
PyObject* MethodDeepcopy(PyObject* self, PyObject* memo) {
  PyRef key = PyRef::Steal(PyLong_FromVoidPtr(self));
  if (!key) return nullptr;
  if (PyDict_Check(memo)) {
    PyObject* known = PyDict_GetItemWithError(memo, key.get());
    if (known != nullptr) return Py_NewRef(known);
    if (PyErr_Occurred()) return nullptr;
  }
  const Tensor& t = Unwrap(self);
  if (!IsLeaf(t)) {
    PyErr_SetString(PyExc_RuntimeError, "Only Tensors created explicitly by the user (graph leaves) support the "
                                        "deepcopy protocol at the moment");
    return nullptr;
  }
  absl::StatusOr<Tensor> data;
  {
    GradModeGuard off(false);
    data = Call("clone", {t});
  }
  if (!data.ok()) return RaiseStatus(data.status());
  data->set_autograd(nullptr);
  PyRef copy = PyRef::Steal(Wrap(*std::move(data)));
  if (!copy || (RequiresGrad(t) && !SetRequiresGradFlag(copy.get(), true))) return nullptr;
  reinterpret_cast<PyTensor*>(copy.get())->is_parameter = reinterpret_cast<PyTensor*>(self)->is_parameter;
  if (PyDict_Check(memo) && PyDict_SetItem(memo, key.get(), copy.get()) < 0) return nullptr;
  PyObject* grad = GradObject(self);  // borrowed
  if (grad != nullptr && grad != Py_None) {
    PyRef grad_copy = PyRef::Steal(MethodDeepcopy(grad, memo));
    if (!grad_copy || PyObject_SetAttrString(copy.get(), "grad", grad_copy.get()) < 0) return nullptr;
  }
  return copy.Release();
}

PyObject* MethodDetach(PyObject* self, PyObject*) {
  Tensor t = Unwrap(self);
  t.set_autograd(nullptr);
  return Wrap(std::move(t));
}

PyObject* MethodDetachInplace(PyObject* self, PyObject*) {
  Mutable(self).set_autograd(nullptr);
  return Py_NewRef(self);
}

PyObject* MethodRetainGrad(PyObject* self, PyObject*) {
  const Tensor& t = Unwrap(self);
  if (!RequiresGrad(t)) {
    PyErr_SetString(PyExc_RuntimeError, "can't retain_grad on Tensor that has requires_grad=False");
    return nullptr;
  }
  if (IsLeaf(t)) Py_RETURN_NONE;  // leaves keep .grad anyway
  AutogradMeta& meta = *t.autograd();
  meta.retains_grad = true;
  meta.grad_fn->retained().resize(std::max<size_t>(meta.grad_fn->retained().size(), meta.output_nr + 1));
  meta.grad_fn->retained()[meta.output_nr] = t.autograd();
  Py_RETURN_NONE;
}

// A tensor or a sequence of tensors (None allowed where `allow_none`) as a vector.
bool TensorsFrom(PyObject* obj, const char* what, bool allow_none, std::vector<Tensor>& out) {
  if (obj == Py_None && allow_none) return true;
  if (IsTensor(obj)) {
    out.push_back(Unwrap(obj));
    return true;
  }
  PyRef seq = PyRef::Steal(PySequence_Fast(obj, what));
  if (!seq) return false;
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq.get()); ++i) {
    PyObject* item = PySequence_Fast_GET_ITEM(seq.get(), i);
    if (item == Py_None && allow_none) {
      out.emplace_back();
    } else if (IsTensor(item)) {
      out.push_back(Unwrap(item));
    } else {
      PyErr_Format(PyExc_TypeError, "%s: expected tensors, got %s", what, Py_TYPE(item)->tp_name);
      return false;
    }
  }
  return true;
}

// backward(inputs=...): a tensor or a non-empty sequence of tensors (None: every leaf).
bool BackwardInputsFrom(PyObject* inputs, std::vector<Tensor>& out) {
  if (inputs == Py_None) return true;
  if (!TensorsFrom(inputs, "backward(): inputs", false, out)) return false;
  if (out.empty()) {
    PyErr_SetString(PyExc_RuntimeError, "'inputs' argument to backward() cannot be empty.");
    return false;
  }
  return true;
}

absl::StatusOr<std::vector<Tensor>> RunBackwardWithoutGil(const BackwardRequest& request) {
  absl::StatusOr<std::vector<Tensor>> result;
  Py_BEGIN_ALLOW_THREADS
  result = RunBackward(request);
  Py_END_ALLOW_THREADS
  return result;
}

PyObject* MethodBackward(PyObject* self, PyObject* args, PyObject* kwargs) {
  static const char* keywords[] = {"gradient", "retain_graph", "create_graph", "inputs", nullptr};
  PyObject *gradient = Py_None, *retain = Py_None, *inputs = Py_None;
  int create_graph = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|OOpO:backward", const_cast<char**>(keywords), &gradient,
                                   &retain, &create_graph, &inputs)) {
    return nullptr;
  }
  BackwardRequest request;
  request.roots.push_back(Unwrap(self));
  if (!BackwardInputsFrom(inputs, request.inputs)) return nullptr;
  if (gradient != Py_None) {
    if (!IsTensor(gradient)) {
      PyErr_Format(PyExc_TypeError, "backward(): gradient must be a Tensor, got %s", Py_TYPE(gradient)->tp_name);
      return nullptr;
    }
    request.root_grads.push_back(Unwrap(gradient));
  }
  request.create_graph = create_graph != 0;
  request.retain_graph = retain == Py_None ? request.create_graph : PyObject_IsTrue(retain) == 1;
  auto result = RunBackwardWithoutGil(request);
  if (!result.ok()) return RaiseStatus(result.status());
  Py_RETURN_NONE;
}

PyObject* FnAutogradGrad(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* keywords[] = {"outputs", "inputs", "grad_outputs", "retain_graph", "create_graph",
                                   "allow_unused", "accumulate", nullptr};
  PyObject *outputs, *inputs, *grad_outputs = Py_None, *retain = Py_None;
  int create_graph = 0, allow_unused = 0, accumulate = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|OOppp:grad", const_cast<char**>(keywords), &outputs, &inputs,
                                   &grad_outputs, &retain, &create_graph, &allow_unused, &accumulate)) {
    return nullptr;
  }
  BackwardRequest request;
  request.accumulate = accumulate != 0;
  request.create_graph = create_graph != 0;
  request.retain_graph = retain == Py_None ? request.create_graph : PyObject_IsTrue(retain) == 1;
  request.allow_unused = allow_unused != 0;
  if (!TensorsFrom(outputs, "grad(): outputs", false, request.roots) ||
      !TensorsFrom(inputs, "grad(): inputs", false, request.inputs) ||
      !TensorsFrom(grad_outputs, "grad(): grad_outputs", true, request.root_grads)) {
    return nullptr;
  }
  if (!request.root_grads.empty() && request.root_grads.size() != request.roots.size()) {
    PyErr_Format(PyExc_RuntimeError, "grad(): got %zd grad_outputs for %zd outputs", request.root_grads.size(),
                 request.roots.size());
    return nullptr;
  }
  auto result = RunBackwardWithoutGil(request);
  if (!result.ok()) return RaiseStatus(result.status());
  PyRef tuple = PyRef::Steal(PyTuple_New(static_cast<Py_ssize_t>(result->size())));
  if (!tuple) return nullptr;
  for (size_t i = 0; i < result->size(); ++i) {
    PyObject* item = (*result)[i].defined() ? Wrap((*result)[i]) : Py_NewRef(Py_None);
    if (item == nullptr) return nullptr;
    PyTuple_SET_ITEM(tuple.get(), static_cast<Py_ssize_t>(i), item);
  }
  return tuple.Release();
}

// dyntrace.nn.Parameter's constructor: a new leaf over `data`'s values, flagged as a parameter.
PyObject* FnMakeParameter(PyObject*, PyObject* args) {
  PyObject* data;
  int requires_grad = 1;
  if (!PyArg_ParseTuple(args, "O!|p:Parameter", &TensorType, &data, &requires_grad)) return nullptr;
  Tensor t = Unwrap(data);
  t.set_autograd(nullptr);
  PyRef param = PyRef::Steal(Wrap(std::move(t)));
  if (!param || (requires_grad && !SetRequiresGradFlag(param.get(), true))) return nullptr;
  reinterpret_cast<PyTensor*>(param.get())->is_parameter = true;
  return param.Release();
}

PyObject* FnIsGradEnabled(PyObject*, PyObject*) { return PyBool_FromLong(GradEnabled()); }

PyObject* FnSetGradEnabled(PyObject*, PyObject* value) {
  if (!PyBool_Check(value)) {
    PyErr_Format(PyExc_TypeError, "set_grad_enabled(): expected a bool, got %s", Py_TYPE(value)->tp_name);
    return nullptr;
  }
  SetGradEnabled(value == Py_True);
  Py_RETURN_NONE;
}

// This thread's autocast state for a device type named "cpu" or "cuda"; null (a RuntimeError
// set) for another name.
AutocastState* AutocastStateNamed(PyObject* device_type) {
  if (PyUnicode_Check(device_type)) {
    if (PyUnicode_CompareWithASCIIString(device_type, "cuda") == 0) return &ThreadAutocast().cuda;
    if (PyUnicode_CompareWithASCIIString(device_type, "cpu") == 0) return &ThreadAutocast().cpu;
  }
  PyErr_Format(PyExc_RuntimeError, "autocast: device_type must be 'cpu' or 'cuda', not %R", device_type);
  return nullptr;
}

// _autocast_state(device_type) -> (enabled, dtype)
PyObject* FnAutocastState(PyObject*, PyObject* device_type) {
  const AutocastState* state = AutocastStateNamed(device_type);
  if (state == nullptr) return nullptr;
  PyRef dtype = PyRef::Steal(WrapDType(state->dtype));
  return Py_BuildValue("(OO)", state->enabled ? Py_True : Py_False, dtype.get());
}

// _set_autocast(device_type, enabled, dtype): what autocast's __enter__ and __exit__ call.
PyObject* FnSetAutocast(PyObject*, PyObject* args) {
  PyObject *device_type, *enabled, *dtype_obj;
  if (!PyArg_ParseTuple(args, "OO!O:_set_autocast", &device_type, &PyBool_Type, &enabled, &dtype_obj)) return nullptr;
  AutocastState* state = AutocastStateNamed(device_type);
  if (state == nullptr) return nullptr;
  absl::StatusOr<DType> dtype = ToDType(dtype_obj, "autocast dtype");
  if (!dtype.ok()) return RaiseStatus(dtype.status());
  if (!IsFloating(*dtype)) {
    PyErr_Format(PyExc_RuntimeError, "autocast: dtype must be a floating dtype, not %s", DTypeName(*dtype));
    return nullptr;
  }
  *state = AutocastState{enabled == Py_True, *dtype};
  Py_RETURN_NONE;
}

// {op name: "formula" | "body" | "none"}: how autograd differentiates each registry op (a
// declared formula, the composite's own body, or not at all), for the coverage tests.
PyObject* FnAutogradOps(PyObject*, PyObject*) {
  PyRef table = PyRef::Steal(PyDict_New());
  if (!table) return nullptr;
  for (const auto& op : OpRegistry::Get().ops()) {
    const char* how = op->derivative.fn != nullptr ? "formula" : HasDerivative(*op) ? "body" : "none";
    PyRef value = PyRef::Steal(PyUnicode_FromString(how));
    if (!value || PyDict_SetItemString(table.get(), op->name().c_str(), value.get()) < 0) return nullptr;
  }
  return table.Release();
}

PyMethodDef autograd_functions[] = {
    {"_make_parameter", FnMakeParameter, METH_VARARGS, "dyntrace.nn.Parameter(data, requires_grad=True)"},
    {"_autograd_ops", FnAutogradOps, METH_NOARGS, "how autograd differentiates each registry op"},
    {"is_grad_enabled", FnIsGradEnabled, METH_NOARGS, "whether ops record gradients on this thread"},
    {"_set_grad_enabled", FnSetGradEnabled, METH_O, "turns gradient recording on or off for this thread"},
    {"_autocast_state", FnAutocastState, METH_O, "_autocast_state(device_type) -> (enabled, dtype) of this thread"},
    {"_set_autocast", FnSetAutocast, METH_VARARGS,
     "_set_autocast(device_type, enabled, dtype): this thread's autocast state (dyntrace.autocast calls it)"},
    {"_autograd_grad", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(FnAutogradGrad)),
     METH_VARARGS | METH_KEYWORDS,
     "the engine behind dyntrace.autograd.grad (and, with accumulate=True, backward: into every leaf's .grad, or "
     "only into the inputs')"},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace

PyMethodDef autograd_methods[] = {
    {"requires_grad_", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(MethodRequiresGrad)),
     METH_VARARGS | METH_KEYWORDS, "requires_grad_(requires_grad=True): sets the flag on a leaf; returns self"},
    {"detach", MethodDetach, METH_NOARGS, "the same data, outside autograd's graph"},
    {"__deepcopy__", MethodDeepcopy, METH_O, "copy.deepcopy: a leaf's copy with requires_grad and .grad"},
    {"detach_", MethodDetachInplace, METH_NOARGS, "takes this tensor out of autograd's graph; returns self"},
    {"retain_grad", MethodRetainGrad, METH_NOARGS, "keeps .grad of this non-leaf after backward()"},
    {"backward", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(MethodBackward)),
     METH_VARARGS | METH_KEYWORDS, "backward(gradient=None, retain_graph=None, create_graph=False, inputs=None)"},
    {nullptr, nullptr, 0, nullptr},
};

bool CheckInplaceTarget(PyObject* target, absl::string_view op) {
  if (!GradEnabled()) return true;
  absl::Status refused = dt::CheckInplaceTarget(Unwrap(target), op);
  if (!refused.ok()) RaiseStatus(refused);
  return refused.ok();
}

absl::StatusOr<Tensor> OldValues(const Tensor& target) {
  absl::StatusOr<Tensor> old;
  {
    GradModeGuard off(false);
    old = Call("clone", {target});
  }
  if (!old.ok() || !RequiresGrad(target)) return old;
  // The target's history as it is now, in an AutogradMeta of its own: the target's own is
  // about to be rebased in place, and a saved copy must keep describing the old values.
  DT_RETURN_IF_ERROR(RefreshView(target));
  auto snapshot = std::make_shared<AutogradMeta>();
  snapshot->grad_fn = target.autograd()->grad_fn;
  snapshot->output_nr = target.autograd()->output_nr;
  old->set_autograd(std::move(snapshot));
  return old;
}

bool AdoptHistory(PyObject* target, const Tensor& result) {
  absl::Status rebased = RebaseHistory(Mutable(target), result);
  if (!rebased.ok()) RaiseStatus(rebased);
  return rebased.ok();
}

bool AddAutogradBindings(PyObject* module) {
  InstallAutograd();
  GradFnType.tp_basicsize = sizeof(PyGradFn);
  GradFnType.tp_flags = Py_TPFLAGS_DEFAULT;
  GradFnType.tp_dealloc = GradFnDealloc;
  GradFnType.tp_repr = GradFnRepr;
  GradFnType.tp_richcompare = GradFnCompare;
  GradFnType.tp_hash = GradFnHash;
  GradFnType.tp_methods = grad_fn_methods;
  GradFnType.tp_getset = grad_fn_getset;
  GradFnType.tp_doc = "A node of autograd's backward graph (a tensor's grad_fn).";
  if (PyType_Ready(&GradFnType) < 0) return false;
  if (PyModule_AddObjectRef(module, "_GradNode", reinterpret_cast<PyObject*>(&GradFnType)) < 0) return false;
  return PyModule_AddFunctions(module, autograd_functions) == 0;
}

}  // namespace dt::interpreter::py
