// Python bindings generated from the op registry: one callable per op name (trying its overloads
// in registration order), bound as dyntrace.<name>, as Tensor.<name> and, for ops with an
// in-place variant, as Tensor.<name>_.
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "graph/autocast.h"
#include "graph/pointwise.h"
#include "interpreter/py_autograd.h"
#include "interpreter/py_str.h"
#include "interpreter/py_types.h"
#include "runtime/autograd_meta.h"
#include "runtime/copy.h"
#include "runtime/errors.h"

namespace dt::interpreter::py {
namespace {

struct PyOpFunction {
  PyObject_HEAD
  std::vector<const OpDef*>* overloads;  // owned by the binding table, never freed
  bool inplace;
  vectorcallfunc vectorcall;
};

std::string PythonName(const OpDef& op) {
  const std::string& name = op.name();
  return name.substr(0, name.find('.'));
}

absl::Status ArgError(const OpDef& op, const Param& p, absl::string_view why) {
  return Error(ErrorKind::kType, absl::StrFormat("%s(): argument '%s' %s", PythonName(op), p.name, why));
}

absl::StatusOr<ArgValue> ConvertArg(const OpDef& op, const Param& p, PyObject* obj) {
  if (obj == Py_None) {
    if (p.optional) return ArgValue(None{});
    return ArgError(op, p, "must not be None");
  }
  const std::string what = absl::StrFormat("%s(): argument '%s'", PythonName(op), p.name);
  switch (p.type) {
    case ParamType::kTensor:
      if (IsTensor(obj)) return ArgValue(Unwrap(obj));
      return ArgError(op, p, absl::StrCat("must be a Tensor, not ", Py_TYPE(obj)->tp_name));
    case ParamType::kOperand:
      if (IsTensor(obj)) return ArgValue(Unwrap(obj));
      if (PyBool_Check(obj) || PyLong_Check(obj) || PyFloat_Check(obj) ||
          PyIndex_Check(obj) || (Py_TYPE(obj)->tp_as_number && Py_TYPE(obj)->tp_as_number->nb_float &&
                                 !PySequence_Check(obj))) {
        auto s = ToScalar(obj, what);
        if (!s.ok()) return s.status();
        return ArgValue(*s);
      }
      return ArgError(op, p, absl::StrCat("must be a Tensor or a number, not ", Py_TYPE(obj)->tp_name));
    case ParamType::kScalar: {
      auto s = ToScalar(obj, what);
      if (!s.ok()) return s.status();
      return ArgValue(*s);
    }
    case ParamType::kInt: {
      if (PyFloat_Check(obj) || !PyIndex_Check(obj)) {
        return ArgError(op, p, absl::StrCat("must be an int, not ", Py_TYPE(obj)->tp_name));
      }
      auto s = ToScalar(obj, what);
      if (!s.ok()) return s.status();
      return ArgValue(Scalar::Int(s->ToInt()));
    }
    case ParamType::kFloat: {
      if (!PyFloat_Check(obj) && !PyLong_Check(obj)) {
        return ArgError(op, p, absl::StrCat("must be a float, not ", Py_TYPE(obj)->tp_name));
      }
      return ArgValue(Scalar::Float(PyFloat_AsDouble(obj)));
    }
    case ParamType::kBool:
      if (!PyBool_Check(obj)) {
        return ArgError(op, p, absl::StrCat("must be a bool, not ", Py_TYPE(obj)->tp_name));
      }
      return ArgValue(Scalar::Bool(obj == Py_True));
    case ParamType::kString:
      if (!PyUnicode_Check(obj)) {
        return ArgError(op, p, absl::StrCat("must be a str, not ", Py_TYPE(obj)->tp_name));
      }
      if (std::optional<std::string> text = py::Utf8(obj)) return ArgValue(*std::move(text));
      return ArgError(op, p, "must be valid UTF-8 text");
    case ParamType::kIntList:
    case ParamType::kShape: {
      auto dims = ToDims(obj, what);
      if (!dims.ok()) return dims.status();
      return ArgValue(*dims);
    }
    case ParamType::kTensorList: {
      if (!PyTuple_Check(obj) && !PyList_Check(obj)) {
        return ArgError(op, p, absl::StrCat("must be a tuple or list of Tensors, not ",
                                            Py_TYPE(obj)->tp_name));
      }
      PyRef seq = PyRef::Steal(PySequence_Fast(obj, ""));
      std::vector<Tensor> tensors;
      for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq.get()); ++i) {
        PyObject* item = PySequence_Fast_GET_ITEM(seq.get(), i);
        if (!IsTensor(item)) {
          return ArgError(op, p, absl::StrFormat("must contain only Tensors, but element %d is %s",
                                                 i, Py_TYPE(item)->tp_name));
        }
        tensors.push_back(Unwrap(item));
      }
      return ArgValue(std::move(tensors));
    }
    case ParamType::kDType: {
      auto d = ToDType(obj, what);
      if (!d.ok()) return d.status();
      return ArgValue(*d);
    }
    case ParamType::kDevice: {
      auto d = ToDevice(obj, what);
      if (!d.ok()) return d.status();
      return ArgValue(*d);
    }
  }
  __builtin_unreachable();
}

// Binds Python positional and keyword arguments to `op`'s schema.
absl::StatusOr<OpArgs> BindArgs(const OpDef& op, PyObject* const* args, Py_ssize_t nargs,
                                PyObject* kwnames, std::vector<PyRef>* supplied = nullptr) {
  const auto& params = op.schema.params;
  std::vector<PyObject*> slots(params.size(), nullptr);
  PyRef shape_tuple;  // keeps a varargs shape (or tensor list) alive
  Py_ssize_t next = 0;
  for (size_t i = 0; i < params.size() && next < nargs; ++i) {
    if (params[i].keyword_only) break;
    // A shape, or a tensor list that is the last positional parameter (einsum(eq, a, b)), may
    // be given as separate arguments.
    const bool last_positional = i + 1 == params.size() || params[i + 1].keyword_only;
    const bool varargs = params[i].type == ParamType::kShape ||
                         (params[i].type == ParamType::kTensorList && last_positional);
    if (varargs && (nargs - next > 1 || (!PyTuple_Check(args[next]) && !PyList_Check(args[next])))) {
      shape_tuple = PyRef::Steal(PyTuple_New(nargs - next));
      for (Py_ssize_t j = next; j < nargs; ++j) {
        Py_INCREF(args[j]);
        PyTuple_SET_ITEM(shape_tuple.get(), j - next, args[j]);
      }
      slots[i] = shape_tuple.get();
      next = nargs;
      break;
    }
    slots[i] = args[next++];
  }
  if (next < nargs) {
    size_t positional = 0;
    for (const Param& p : params) positional += !p.keyword_only;
    return Error(ErrorKind::kType,
                 absl::StrFormat("%s() takes %d positional arguments but %d were given",
                                 PythonName(op), positional, nargs));
  }
  const Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t k = 0; k < nkw; ++k) {
    // A name UTF-8 cannot encode names no parameter: it is reported as unexpected.
    const std::string name_text = py::Utf8Or(PyTuple_GET_ITEM(kwnames, k), "?");
    const char* name = name_text.c_str();
    const int index = op.schema.IndexOf(name_text);
    if (index < 0) {
      return Error(ErrorKind::kType, absl::StrFormat("%s() got an unexpected keyword argument '%s'",
                                                     PythonName(op), name));
    }
    if (slots[index] != nullptr) {
      return Error(ErrorKind::kType, absl::StrFormat("%s() got multiple values for argument '%s'",
                                                     PythonName(op), name));
    }
    slots[index] = args[nargs + k];
  }
  if (supplied != nullptr) {
    for (PyObject* slot : slots) supplied->push_back(PyRef::Borrow(slot));
  }
  std::vector<ArgValue> values;
  values.reserve(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    if (slots[i] == nullptr) {
      if (!params[i].default_value.has_value()) {
        return Error(ErrorKind::kType, absl::StrFormat("%s() missing required argument '%s'",
                                                       PythonName(op), params[i].name));
      }
      values.push_back(*params[i].default_value);
      continue;
    }
    DT_ASSIGN_OR_RETURN(ArgValue v, ConvertArg(op, params[i], slots[i]));
    values.push_back(std::move(v));
  }
  return OpArgs(std::move(values));
}

// Named-result types by type object, with their field names (kept for the process's life, as the
// op table is).
absl::flat_hash_map<PyObject*, std::vector<std::string>>& NamedResultTypes() {
  static auto* types = new absl::flat_hash_map<PyObject*, std::vector<std::string>>();
  return *types;
}

PyObject* ResultToPython(const OpDef& op, OpResult result) {
  if (!op.schema.returns_list || (op.has(kOneResultBare) && result.size() == 1)) return Wrap(std::move(result.at(0)));
  PyRef tuple = PyRef::Steal(PyTuple_New(static_cast<Py_ssize_t>(result.size())));
  if (!tuple) return nullptr;
  for (size_t i = 0; i < result.size(); ++i) {
    PyObject* item = Wrap(std::move(result[i]));
    if (item == nullptr) return nullptr;
    PyTuple_SET_ITEM(tuple.get(), static_cast<Py_ssize_t>(i), item);
  }
  if (op.schema.result_names.empty()) return tuple.Release();
  PyObject* type = NamedResultType(op);
  return type != nullptr ? PyObject_CallOneArg(type, tuple.get()) : nullptr;
}

// The in-place form where autograd follows the call: computed out of place (on a copy of the
// target's old values where the derivative reads them, since they are about to be overwritten),
// copied in, and the recorded call becomes the target's history.
PyObject* RunInplaceWithGrad(const OpDef& op, OpArgs args, PyObject* self) {
  if (!CheckInplaceTarget(self, PythonName(op) + "_()")) return nullptr;
  const Tensor target = args.tensor(0);
  if (op.derivative.uses_inputs) {
    absl::StatusOr<Tensor> old = OldValues(target);
    if (!old.ok()) return RaiseStatus(old.status());
    args[0] = *std::move(old);
  }
  auto r = CallOp(op, args);
  if (!r.ok()) return RaiseStatus(r.status());
  const Tensor& value = r->at(0);
  if (!CanCast(value.dtype(), target.dtype())) {
    return RaiseStatus(Error(ErrorKind::kType,
                             absl::StrFormat("%s_(): result type %s can't be cast to the desired output type %s",
                                             PythonName(op), DTypeScalarName(value.dtype()),
                                             DTypeScalarName(target.dtype()))));
  }
  absl::Status s = CopyInto(target, value);
  if (!s.ok()) return RaiseStatus(s);
  if (!AdoptHistory(self, value)) return nullptr;
  return Py_NewRef(self);
}

}  // namespace

PyObject* RunInplace(const OpDef& op, const OpArgs& args, PyObject* self) {
  if (RecordsGrad(args)) return RunInplaceWithGrad(op, args, self);
  const Tensor& target = args.tensor(0);
  target.storage()->BumpVersion();
  if (op.kind == OpKind::kPointwise) {
    auto r = RunPointwise(op, args, &target);
    if (!r.ok()) return RaiseStatus(r.status());
  } else {
    auto r = CallOp(op, args);
    if (!r.ok()) return RaiseStatus(r.status());
    const Tensor& value = r->at(0);
    if (!CanCast(value.dtype(), target.dtype())) {
      return RaiseStatus(Error(ErrorKind::kType,
                               absl::StrFormat("%s_(): result type %s can't be cast to the desired "
                                               "output type %s",
                                               PythonName(op), DTypeScalarName(value.dtype()),
                                               DTypeScalarName(target.dtype()))));
    }
    absl::Status s = CopyInto(target, value);
    if (!s.ok()) return RaiseStatus(s);
  }
  Py_INCREF(self);
  return self;
}

namespace {

PyObject* Dispatch(const std::vector<const OpDef*>& overloads, bool inplace, PyObject* const* args,
                   Py_ssize_t nargs, PyObject* kwnames) {
  absl::Status first_error;
  for (const OpDef* op : overloads) {
    auto bound = BindArgs(*op, args, nargs, kwnames);
    if (!bound.ok()) {
      if (first_error.ok()) first_error = bound.status();
      continue;
    }
    if (inplace) return RunInplace(*op, *bound, args[0]);
    if (ThreadAutocast().any()) {
      absl::StatusOr<OpArgs> cast = AutocastArgs(*op, *std::move(bound));
      if (!cast.ok()) return RaiseStatus(cast.status());
      bound = *std::move(cast);
    }
    absl::StatusOr<OpResult> result;
    Py_BEGIN_ALLOW_THREADS
    result = CallOp(*op, *bound);
    Py_END_ALLOW_THREADS
    if (!result.ok()) return RaiseStatus(result.status());
    return ResultToPython(*op, *std::move(result));
  }
  if (overloads.size() > 1) {
    std::vector<std::string> sigs;
    for (const OpDef* op : overloads) sigs.push_back(op->schema.text);
    return RaiseStatus(Error(ErrorKind::kType,
                             absl::StrCat(first_error.message(), "\n  (accepted signatures: ",
                                          absl::StrJoin(sigs, "; "), ")")));
  }
  return RaiseStatus(first_error);
}

// Where `requires_grad=` is among the keywords, its position there; -1 otherwise.
Py_ssize_t RequiresGradKeyword(PyObject* kwnames) {
  if (kwnames == nullptr) return -1;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kwnames); ++i) {
    if (PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, i), "requires_grad") == 0) return i;
  }
  return -1;
}

// Creation ops take PyTorch's `requires_grad=` keyword: the call runs without it, and the new
// leaf's flag is set after.
PyObject* CreateRequiringGrad(const PyOpFunction& fn, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames,
                              Py_ssize_t keyword) {
  const Py_ssize_t nkw = PyTuple_GET_SIZE(kwnames);
  std::vector<PyObject*> values(args, args + nargs);
  PyRef names = PyRef::Steal(PyTuple_New(nkw - 1));
  if (!names) return nullptr;
  for (Py_ssize_t i = 0, j = 0; i < nkw; ++i) {
    if (i == keyword) continue;
    values.push_back(args[nargs + i]);
    PyTuple_SET_ITEM(names.get(), j++, Py_NewRef(PyTuple_GET_ITEM(kwnames, i)));
  }
  PyRef result = PyRef::Steal(Dispatch(*fn.overloads, fn.inplace, values.data(), nargs,
                                       nkw > 1 ? names.get() : nullptr));
  if (!result) return nullptr;
  const int wants = PyObject_IsTrue(args[nargs + keyword]);
  if (wants < 0) return nullptr;
  if (IsTensor(result.get()) && !SetRequiresGradFlag(result.get(), wants == 1)) return nullptr;
  return result.Release();
}

PyObject* OpFunctionVectorcall(PyObject* self, PyObject* const* args, size_t nargsf,
                               PyObject* kwnames) {
  auto* fn = reinterpret_cast<PyOpFunction*>(self);
  const Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  if (fn->overloads->front()->kind == OpKind::kCreation) {
    if (Py_ssize_t keyword = RequiresGradKeyword(kwnames); keyword >= 0) {
      return CreateRequiringGrad(*fn, args, nargs, kwnames, keyword);
    }
  }
  return Dispatch(*fn->overloads, fn->inplace, args, nargs, kwnames);
}

PyObject* OpFunctionDescrGet(PyObject* self, PyObject* obj, PyObject*) {
  if (obj == nullptr || obj == Py_None) {
    Py_INCREF(self);
    return self;
  }
  return PyMethod_New(self, obj);
}

PyObject* OpFunctionRepr(PyObject* self) {
  auto* fn = reinterpret_cast<PyOpFunction*>(self);
  return PyUnicode_FromFormat("<dyntrace op %s%s>", PythonName(*fn->overloads->front()).c_str(),
                              fn->inplace ? "_" : "");
}

PyObject* OpFunctionDoc(PyObject* self, void*) {
  auto* fn = reinterpret_cast<PyOpFunction*>(self);
  std::vector<std::string> sigs;
  for (const OpDef* op : *fn->overloads) sigs.push_back(op->schema.text);
  return PyUnicode_FromString(absl::StrJoin(sigs, "\n").c_str());
}

PyObject* OpFunctionName(PyObject* self, void*) {
  auto* fn = reinterpret_cast<PyOpFunction*>(self);
  return PyUnicode_FromString(
      absl::StrCat(PythonName(*fn->overloads->front()), fn->inplace ? "_" : "").c_str());
}

PyGetSetDef op_function_getset[] = {
    {"__doc__", OpFunctionDoc, nullptr, nullptr, nullptr},
    {"__name__", OpFunctionName, nullptr, nullptr, nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

PyTypeObject OpFunctionType = {PyVarObject_HEAD_INIT(nullptr, 0) "dyntrace.op"};

// name -> overloads, in registration order.
absl::flat_hash_map<std::string, std::vector<const OpDef*>*>& Overloads() {
  static auto* table = new absl::flat_hash_map<std::string, std::vector<const OpDef*>*>();
  return *table;
}

PyObject* NewOpFunction(std::vector<const OpDef*>* overloads, bool inplace) {
  PyOpFunction* fn = PyObject_New(PyOpFunction, &OpFunctionType);
  if (fn == nullptr) return nullptr;
  fn->overloads = overloads;
  fn->inplace = inplace;
  fn->vectorcall = OpFunctionVectorcall;
  return reinterpret_cast<PyObject*>(fn);
}

}  // namespace

bool IsOpFunction(PyObject* obj) { return Py_TYPE(obj) == &OpFunctionType; }

PyObject* NamedResultType(const OpDef& op) {
  static auto* by_name = new absl::flat_hash_map<std::string, PyObject*>();
  const std::string name = PythonName(op);
  if (auto it = by_name->find(name); it != by_name->end()) return it->second;
  // PyStructSequence keeps pointers to the names and the description: they live as long as the type.
  auto* names = new std::vector<std::string>(op.schema.result_names);
  auto* fields = new std::vector<PyStructSequence_Field>();
  for (const std::string& field : *names) fields->push_back({field.c_str(), nullptr});
  fields->push_back({nullptr, nullptr});
  auto* type_name = new std::string("dyntrace.return_types." + name);
  auto* desc = new PyStructSequence_Desc{type_name->c_str(), nullptr, fields->data(),
                                         static_cast<int>(names->size())};
  PyObject* type = reinterpret_cast<PyObject*>(PyStructSequence_NewType(desc));
  if (type == nullptr) return nullptr;
  (*by_name)[name] = type;
  NamedResultTypes()[type] = *names;
  return type;
}

std::optional<size_t> NamedResultField(PyObject* type, absl::string_view name) {
  auto it = NamedResultTypes().find(type);
  if (it == NamedResultTypes().end()) return std::nullopt;
  for (size_t i = 0; i < it->second.size(); ++i) {
    if (it->second[i] == name) return i;
  }
  return std::nullopt;
}

absl::StatusOr<BoundCall> BindOpCall(PyObject* op_function, PyObject* const* args,
                                     Py_ssize_t nargs, PyObject* kwnames) {
  auto* fn = reinterpret_cast<PyOpFunction*>(op_function);
  absl::Status first_error;
  for (const OpDef* op : *fn->overloads) {
    std::vector<PyRef> supplied;
    auto bound = BindArgs(*op, args, nargs, kwnames, &supplied);
    if (bound.ok()) return BoundCall{op, *std::move(bound), std::move(supplied), fn->inplace};
    if (first_error.ok()) first_error = bound.status();
  }
  return first_error;
}

bool AddOpBindings(PyObject* module, PyObject* functional, PyObject* linalg) {
  OpFunctionType.tp_basicsize = sizeof(PyOpFunction);
  OpFunctionType.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR;
  OpFunctionType.tp_vectorcall_offset = offsetof(PyOpFunction, vectorcall);
  OpFunctionType.tp_call = PyVectorcall_Call;
  OpFunctionType.tp_descr_get = OpFunctionDescrGet;
  OpFunctionType.tp_repr = OpFunctionRepr;
  OpFunctionType.tp_getset = op_function_getset;
  if (PyType_Ready(&OpFunctionType) < 0) return false;

  auto& table = Overloads();
  std::vector<std::string> order;
  for (const auto& op : OpRegistry::Get().ops()) {
    const std::string name = PythonName(*op);
    auto& slot = table[name];
    if (slot == nullptr) {
      slot = new std::vector<const OpDef*>();
      order.push_back(name);
    }
    slot->push_back(op.get());
  }
  PyObject* tensor_dict = TensorType.tp_dict;
  for (const std::string& name : order) {
    std::vector<const OpDef*>* overloads = table[name];
    const OpDef& first = *overloads->front();
    PyRef fn = PyRef::Steal(NewOpFunction(overloads, false));
    if (!fn) return false;
    if (first.has(kFunction) && PyModule_AddObjectRef(module, name.c_str(), fn.get()) < 0) return false;
    if (first.has(kNNFunctional) && PyModule_AddObjectRef(functional, name.c_str(), fn.get()) < 0) {
      return false;
    }
    if (first.has(kLinalg) && absl::StartsWith(name, "linalg_") &&
        PyModule_AddObjectRef(linalg, name.substr(7).c_str(), fn.get()) < 0) {
      return false;
    }
    // Names Tensor already defines by hand (e.g. properties) win.
    if (first.has(kMethod) && PyDict_GetItemString(tensor_dict, name.c_str()) == nullptr &&
        PyDict_SetItemString(tensor_dict, name.c_str(), fn.get()) < 0) {
      return false;
    }
    if (first.has(kInplaceVariant)) {
      PyRef inplace = PyRef::Steal(NewOpFunction(overloads, true));
      if (!inplace || PyDict_SetItemString(tensor_dict, (name + "_").c_str(), inplace.get()) < 0) {
        return false;
      }
    }
  }
  PyType_Modified(&TensorType);
  return true;
}

}  // namespace dt::interpreter::py
