// interpreter/trace_calls.cc: calls of dyntrace ops, tensor and container methods, and inlined user functions.
#include <Python.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "graph/pointwise.h"
#include "interpreter/cpython_frame.h"
#include "interpreter/py_str.h"
#include "interpreter/py_types.h"
#include "interpreter/sym_dict.h"
#include "interpreter/tracer_internal.h"
#include "runtime/errors.h"
#include "runtime/indexing.h"

namespace dt::interpreter::trace {

absl::StatusOr<Sym> Tracer::CallOpFunction(PyObject* fn, const Sym& bound_self,
                                           const std::vector<Sym>& args,
                                           const std::vector<std::pair<std::string, Sym>>& kwargs) {
  // Run-time ints reach the op's parser as TracedInts (see traced_int.h), found again below.
  absl::flat_hash_map<PyObject*, Sym> traced;
  TracedIntScope scope(*this, traced);
  std::vector<PyObject*> flat;
  if (bound_self != nullptr) {
    DT_ASSIGN_OR_RETURN(PyObject* s, ToPython(bound_self));
    flat.push_back(s);
  }
  for (const Sym& a : args) {
    DT_ASSIGN_OR_RETURN(PyObject* o, ToPython(a));
    flat.push_back(o);
  }
  PyRef kwnames;
  if (!kwargs.empty()) {
    kwnames = PyRef::Steal(PyTuple_New(kwargs.size()));
    for (size_t i = 0; i < kwargs.size(); ++i) {
      PyTuple_SET_ITEM(kwnames.get(), i, py::FromUtf8(kwargs[i].first));
      DT_ASSIGN_OR_RETURN(PyObject* o, ToPython(kwargs[i].second));
      flat.push_back(o);
    }
  }
  const Py_ssize_t nargs = static_cast<Py_ssize_t>(flat.size() - kwargs.size());
  auto bound = py::BindOpCall(fn, flat.data(), nargs, kwnames.get());
  if (!bound.ok()) return Raises(absl::StrCat("the traced code raises: ", bound.status().message()));
  std::vector<ArgValue> metas;
  std::vector<GraphArg> gargs;
  for (size_t i = 0; i < bound->args.size(); ++i) {
    metas.push_back(bound->args[i]);
    PyObject* from = bound->supplied[i].get();
    if (bound->args.is_tensor(i)) {
      auto it = sym_of_wrapper_.find(from);
      if (it == sym_of_wrapper_.end()) return Unsupported("a tensor argument of unknown origin");
      gargs.push_back(GraphArg::Value(it->second->value));
    } else if (std::holds_alternative<std::vector<Tensor>>(bound->args[i])) {
      std::vector<ValueId> ids;
      PyRef seq = PyRef::Steal(PySequence_Fast(from, ""));
      for (Py_ssize_t k = 0; k < PySequence_Fast_GET_SIZE(seq.get()); ++k) {
        auto it = sym_of_wrapper_.find(PySequence_Fast_GET_ITEM(seq.get(), k));
        if (it == sym_of_wrapper_.end()) return Unsupported("a tensor list of unknown origin");
        ids.push_back(it->second->value);
      }
      gargs.push_back(GraphArg{std::move(ids)});
    } else {
      DT_ASSIGN_OR_RETURN(GraphArg arg, NumberArgument(bound->op->schema.params[i], from, bound->args[i], traced));
      gargs.push_back(std::move(arg));
    }
  }
  if (bound->inplace) {
    auto it = sym_of_wrapper_.find(bound->supplied[0].get());
    if (it == sym_of_wrapper_.end()) return Unsupported(absl::StrCat(bound->op->name(), "_ on a tensor of unknown origin"));
    return EmitInPlace(bound->op, std::move(metas), std::move(gargs), it->second);  // x.add_(y) returns x itself
  }
  DT_RETURN_IF_ERROR(AutocastArguments(*bound->op, metas, gargs));
  DT_ASSIGN_OR_RETURN(std::vector<Sym> outs, Emit(bound->op, std::move(metas), std::move(gargs), false));
  if (bound->op->schema.returns_list && !(bound->op->has(kOneResultBare) && outs.size() == 1)) {
    Sym tuple = MakeSym(SymKind::kTuple);
    tuple->items = outs;
    if (!bound->op->schema.result_names.empty()) {
      PyObject* type = py::NamedResultType(*bound->op);
      if (type == nullptr) {
        PyErr_Clear();
        return Unsupported(absl::StrCat(bound->op->name(), ": its named-result type could not be made"));
      }
      tuple->named_type = PyRef::Borrow(type);
    }
    return tuple;
  }
  return outs[0];
}

// A non-tensor argument of an op call: a shape holding run-time sizes becomes a DimsRef, a
// run-time number given as a scalar a ScalarRef; a run-time number anywhere else (a dim, a
// flag) is specialised (its value guarded), since the op's meaning depends on it.
absl::StatusOr<GraphArg> Tracer::NumberArgument(const Param& param, PyObject* from, const ArgValue& value,
                                                const absl::flat_hash_map<PyObject*, Sym>& traced) {
  if (traced.empty() || from == nullptr) return GraphArg{value};
  std::vector<PyObject*> parts = {from};
  if (PyTuple_Check(from) || PyList_Check(from)) {
    parts.assign(PySequence_Fast_ITEMS(from), PySequence_Fast_ITEMS(from) + PySequence_Fast_GET_SIZE(from));
  }
  std::vector<int> slots;
  bool any = false;
  for (PyObject* part : parts) {
    auto it = traced.find(part);
    slots.push_back(it != traced.end() ? it->second->value : -1);
    any |= it != traced.end();
  }
  if (!any) return GraphArg{value};
  if (param.type == ParamType::kShape && std::holds_alternative<Dims>(value) &&
      std::get<Dims>(value).size() == slots.size()) {
    return GraphArg{DimsRef{std::get<Dims>(value), std::move(slots)}};
  }
  if ((param.type == ParamType::kScalar || param.type == ParamType::kOperand) && parts.size() == 1 &&
      parts[0] == from) {
    return GraphArg{ScalarRef{slots[0]}};
  }
  for (PyObject* part : parts) {
    if (auto it = traced.find(part); it != traced.end()) DT_RETURN_IF_ERROR(Specialize(it->second).status());
  }
  return GraphArg{value};
}

absl::StatusOr<Sym> Tracer::CallTensorMethod(const Sym& self, const std::string& name,
                                             const std::vector<Sym>& args,
                                             const std::vector<std::pair<std::string, Sym>>& kwargs) {
  const Tensor& m = self->meta;
  auto const_int = [&](const Sym& s) -> std::optional<int64_t> {
    if (s->kind == SymKind::kConst && PyLong_Check(s->obj.get())) return PyLong_AsLongLong(s->obj.get());
    return std::nullopt;
  };
  if (name == "backward") return TraceBackward(self, args, kwargs);
  if (name == "detach" && args.empty() && kwargs.empty()) return Detach(self);
  if (name == "size" && kwargs.empty()) {
    if (args.empty()) {
      Sym s = MakeSym(SymKind::kShape);
      s->items.push_back(self);
      return s;
    }
    auto d = const_int(args[0]);
    if (!d) return Unsupported("size() with a non-constant dim");
    auto nd = NormalizeDim(*d, m.ndim());
    if (!nd.ok()) return Raises("the traced code raises: size() dim out of range");
    return SizeOf(self, *nd);
  }
  if (name == "__len__" && args.empty() && kwargs.empty()) return BuiltinLen(self);
  if ((name == "dim" || name == "ndimension") && args.empty()) {
    return ConstSym(PyRef::Steal(PyLong_FromLongLong(m.ndim())));
  }
  if (name == "numel" && args.empty()) return NumelOf(self);
  if (name == "is_floating_point" && args.empty()) return ConstSym(PyRef::Borrow(IsFloating(m.dtype()) ? Py_True : Py_False));
  if (name == "element_size" && args.empty()) return ConstSym(PyRef::Steal(PyLong_FromLongLong(m.itemsize())));
  if (name == "cpu" && args.empty()) {
    // A CUDA tensor's copy to the host is left to CPython (the graph has no device copies).
    DT_ASSIGN_OR_RETURN(const Device device, DeviceOf(self));
    if (device.is_cpu()) return self;
    return Unsupported("Tensor.cpu() of a CUDA tensor");
  }
  static const auto* casts = new absl::flat_hash_map<std::string, DType>{
      {"float", DType::kFloat32}, {"double", DType::kFloat64}, {"half", DType::kFloat16},
      {"int", DType::kInt32}, {"long", DType::kInt64}, {"bool", DType::kBool},
      {"byte", DType::kUInt8}, {"char", DType::kInt8}, {"short", DType::kInt16},
      {"bfloat16", DType::kBFloat16}};
  std::optional<DType> target;
  if (auto it = casts->find(name); it != casts->end() && args.empty() && kwargs.empty()) target = it->second;
  if (name == "type" && kwargs.empty() && args.size() <= 1) {
    if (args.empty()) {
      DT_ASSIGN_OR_RETURN(const Device device, DeviceOf(self));
      return ConstSym(PyRef::Steal(PyUnicode_FromString(py::LegacyTensorTypeName(m.dtype(), device).c_str())));
    }
    if (args[0]->kind != SymKind::kConst) return Unsupported("Tensor.type() of a value known only at run time");
    PyObject* given = args[0]->obj.get();
    std::optional<DType> named;
    if (PyUnicode_Check(given)) {
      const char* utf8 = PyUnicode_AsUTF8(given);
      if (utf8 == nullptr) PyErr_Clear();
      if (utf8 != nullptr) named = py::DTypeOfLegacyTypeName(utf8);
    } else if (absl::StatusOr<DType> d = py::ToDType(given, "type()"); d.ok()) {
      named = *d;
    }
    if (!named.has_value()) return Unsupported("Tensor.type() of an argument CPython would refuse");
    target = named;
  }
  if (name == "to") {
    std::vector<Sym> all = args;
    for (const auto& [k, v] : kwargs) {
      if (k != "dtype" && k != "device" && k != "copy") return Unsupported("to() with unusual arguments");
      all.push_back(v);
    }
    for (const Sym& a : all) {
      if (a->kind == SymKind::kTensor) {
        target = a->meta.dtype();
      } else if (a->kind == SymKind::kConst) {
        auto dt = py::ToDType(a->obj.get(), "to()");
        if (dt.ok() && !PyUnicode_Check(a->obj.get())) {
          target = *dt;
          continue;
        }
        auto dev = py::ToDevice(a->obj.get(), "to()");
        if (dev.ok()) {
          DT_ASSIGN_OR_RETURN(const Device device, DeviceOf(self));
          if (*dev == device) continue;  // already there: to() is the identity
        }
        if (a->obj.get() == Py_False) continue;
        return Unsupported("to() to another device or with copy=True");
      }
    }
    if (!target) return self;
  }
  if (target) {
    if (*target == m.dtype()) return self;
    const OpDef* op = OpRegistry::Get().Find("_to");
    DT_ASSIGN_OR_RETURN(std::vector<Sym> outs,
                        Emit(op, {m, *target}, {GraphArg::Value(self->value), GraphArg{ArgValue(*target)}}, false));
    return outs[0];
  }
  return Unsupported(absl::StrCat("Tensor.", name, "() ",
                                  name == "item" || name == "tolist" || name == "numpy"
                                      ? "needs the tensor's values, which are only known at run time"
                                      : "is not supported by the tracer"));
}

namespace {

Sym None() { return ConstSym(PyRef::Borrow(Py_None)); }

// A list index as Python normalises it (negative from the end); nullopt when out of range.
std::optional<size_t> ListIndex(const Sym& list, PyObject* index) {
  const Py_ssize_t n = static_cast<Py_ssize_t>(list->items.size());
  Py_ssize_t i = PyLong_AsSsize_t(index);
  if (i == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    return std::nullopt;
  }
  if (i < 0) i += n;
  if (i < 0 || i >= n) return std::nullopt;
  return static_cast<size_t>(i);
}

}  // namespace

// Methods of dicts the trace holds. Reading ones work on the caller's dicts too; mutating ones
// only on dicts the trace built (the caller's would need the mutation replayed).
absl::StatusOr<Sym> Tracer::CallDictMethod(const Sym& self, const std::string& name, const std::vector<Sym>& args,
                                           const Kwargs& kwargs) {
  if (!kwargs.empty() && name != "update") return Unsupported(absl::StrCat("dict.", name, "() with keywords"));
  if (name == "get" || name == "pop" || name == "setdefault") {
    if (args.empty() || args.size() > 2) return Raises(absl::StrCat("the traced code raises: dict.", name, "() arguments"));
    DT_ASSIGN_OR_RETURN(PyRef key, DictKey(args[0]));
    DT_ASSIGN_OR_RETURN(std::optional<size_t> at, DictFind(*self, key.get()));
    const Sym fallback = args.size() == 2 ? args[1] : nullptr;
    if (name == "get") return at ? self->items[*at] : (fallback ? fallback : None());
    if (name == "pop") {
      if (!at) {
        if (fallback) return fallback;
        return Raises("the traced code raises KeyError in dict.pop()");
      }
      DT_RETURN_IF_ERROR(MutatingContainer(self));
      Sym value = self->items[*at];
      self->items.erase(self->items.begin() + *at);
      self->keys.erase(self->keys.begin() + *at);
      return value;
    }
    if (at) return self->items[*at];  // setdefault of a present key
    DT_RETURN_IF_ERROR(MutatingContainer(self));
    DT_RETURN_IF_ERROR(DictInsert(*self, std::move(key), fallback ? fallback : None()));
    return fallback ? fallback : None();
  }
  if (name == "copy") {
    Sym copy = MakeSym(SymKind::kDict);
    copy->keys = self->keys;
    copy->items = self->items;
    return copy;
  }
  if (name == "update" || name == "clear") {
    if (name == "clear") {
      if (!args.empty()) return Raises("the traced code raises: dict.clear() takes no arguments");
      DT_RETURN_IF_ERROR(MutatingContainer(self));
      self->keys.clear();
      self->items.clear();
      return None();
    }
    if (args.size() > 1) return Raises("the traced code raises: dict.update() takes at most 1 argument");
    DT_RETURN_IF_ERROR(MutatingContainer(self));
    if (!args.empty()) DT_RETURN_IF_ERROR(UpdateDict(*self, args[0]));
    for (const auto& [k, v] : kwargs) DT_RETURN_IF_ERROR(DictInsert(*self, PyRef::Steal(py::FromUtf8(k)), v));
    return None();
  }
  DT_RETURN_IF_ERROR(GuardKeyOrder(self));
  Sym it = MakeSym(SymKind::kIter);  // keys(), values(), items()
  it->dict_view = true;
  it->keys_view = name == "keys";
  for (size_t i = 0; i < self->keys.size(); ++i) {
    if (name == "keys") {
      it->items.push_back(KeySym(self->keys[i]));
    } else if (name == "values") {
      it->items.push_back(self->items[i]);
    } else {
      Sym pair = MakeSym(SymKind::kTuple);
      pair->items = {KeySym(self->keys[i]), self->items[i]};
      it->items.push_back(pair);
    }
  }
  return it;
}

// Inserts `source`'s items into `dict` (REQUIRES: the caller journaled it): another dict, or an
// iterable of (key, value) pairs, as dict.update and dict() take them.
absl::Status Tracer::UpdateDict(SymValue& dict, const Sym& source) {
  if (source->kind == SymKind::kDict) {
    DT_RETURN_IF_ERROR(GuardKeyOrder(source));
    for (size_t i = 0; i < source->keys.size(); ++i) DT_RETURN_IF_ERROR(DictInsert(dict, source->keys[i], source->items[i]));
    return absl::OkStatus();
  }
  DT_ASSIGN_OR_RETURN(std::vector<Sym> pairs, Iterate(source));
  for (const Sym& pair : pairs) {
    DT_ASSIGN_OR_RETURN(std::vector<Sym> kv, Iterate(pair));
    if (kv.size() != 2) return Raises("the traced code raises: a dict update sequence element is not a pair");
    DT_ASSIGN_OR_RETURN(PyRef key, DictKey(kv[0]));
    DT_RETURN_IF_ERROR(DictInsert(dict, std::move(key), kv[1]));
  }
  return absl::OkStatus();
}

absl::StatusOr<Sym> Tracer::CallListMethod(const Sym& self, const std::string& name, const std::vector<Sym>& args) {
  if (name == "copy") {
    Sym copy = MakeSym(SymKind::kList);
    copy->items = self->items;
    return copy;
  }
  if (name == "append" || name == "extend") {
    if (args.size() != 1) return Raises("the traced code raises: list method arguments");
    std::vector<Sym> items = {args[0]};
    if (name == "extend") {
      DT_ASSIGN_OR_RETURN(items, Iterate(args[0]));
    }
    DT_RETURN_IF_ERROR(MutatingContainer(self));
    self->items.insert(self->items.end(), items.begin(), items.end());
    return None();
  }
  if (name == "pop") {
    if (args.size() > 1) return Raises("the traced code raises: list.pop() takes at most 1 argument");
    if (self->items.empty()) return Raises("the traced code raises IndexError: pop from empty list");
    size_t at = self->items.size() - 1;
    if (!args.empty()) {
      DT_ASSIGN_OR_RETURN(PyRef index, ConstValue(args[0]));
      if (!PyLong_Check(index.get())) return Raises("the traced code raises TypeError in list.pop()");
      std::optional<size_t> i = ListIndex(self, index.get());
      if (!i) return Raises("the traced code raises IndexError: pop index out of range");
      at = *i;
    }
    DT_RETURN_IF_ERROR(MutatingContainer(self));
    Sym value = self->items[at];
    self->items.erase(self->items.begin() + at);
    return value;
  }
  if (name == "insert") {
    if (args.size() != 2) return Raises("the traced code raises: list.insert() takes 2 arguments");
    DT_ASSIGN_OR_RETURN(PyRef index, ConstValue(args[0]));
    if (!PyLong_Check(index.get())) return Raises("the traced code raises TypeError in list.insert()");
    const Py_ssize_t n = static_cast<Py_ssize_t>(self->items.size());
    Py_ssize_t i = PyLong_AsSsize_t(index.get());
    if (i == -1 && PyErr_Occurred()) {  // beyond Py_ssize_t: clamped like any out-of-range index
      PyErr_Clear();
      PyRef zero = PyRef::Steal(PyLong_FromLong(0));
      i = PyObject_RichCompareBool(index.get(), zero.get(), Py_LT) == 1 ? -n : n;
    }
    if (i < 0) i = std::max<Py_ssize_t>(i + n, 0);
    i = std::min(i, n);
    DT_RETURN_IF_ERROR(MutatingContainer(self));
    self->items.insert(self->items.begin() + i, args[1]);
    return None();
  }
  if (name == "remove") return ListRemove(self, args);
  if ((name == "clear" || name == "reverse") && args.empty()) {
    DT_RETURN_IF_ERROR(MutatingContainer(self));
    if (name == "clear") self->items.clear();
    else std::reverse(self->items.begin(), self->items.end());
    return None();
  }
  return Unsupported(absl::StrCat("list.", name, "() here"));
}

absl::StatusOr<Sym> Tracer::CallContainerMethod(const Sym& self, const std::string& name, const std::vector<Sym>& args,
                                                const Kwargs& kwargs) {
  if (self->kind == SymKind::kRunSeq && name == "append" && args.size() == 1 && kwargs.empty()) {
    DT_RETURN_IF_ERROR(AppendToRunSequence(self, args[0]));
    return None();
  }
  if (IsKeyedCallerDict(self)) return CallKeyedDictMethod(self, name, args, kwargs);
  DT_RETURN_IF_ERROR(Materialise(self));
  if (self->kind == SymKind::kTuple && self->named_type && (name == "_replace" || name == "_asdict")) {
    // A namedtuple's _replace(**changes) (a new one of its class) and _asdict() (a dict by field).
    PyObject* fields = PyDict_GetItemString(reinterpret_cast<PyTypeObject*>(self->named_type.get())->tp_dict, "_fields");
    if (fields == nullptr || static_cast<size_t>(PyTuple_GET_SIZE(fields)) != self->items.size() || !args.empty()) {
      return Unsupported(absl::StrCat("namedtuple.", name, "() here"));
    }
    if (name == "_asdict") {
      if (!kwargs.empty()) return Unsupported("namedtuple._asdict() with arguments");
      Sym d = MakeSym(SymKind::kDict);
      for (size_t i = 0; i < self->items.size(); ++i) {
        DT_RETURN_IF_ERROR(DictInsert(*d, PyRef::Borrow(PyTuple_GET_ITEM(fields, i)), self->items[i]));
      }
      return d;
    }
    Sym t = MakeSym(SymKind::kTuple);
    t->items = self->items;
    t->named_type = self->named_type;
    for (const auto& [k, v] : kwargs) {
      bool found = false;
      for (size_t i = 0; i < self->items.size(); ++i) {
        if (PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(fields, i), k.c_str()) == 0) {
          t->items[i] = v;
          found = true;
        }
      }
      if (!found) return Unsupported(absl::StrCat("namedtuple._replace() of an unknown field ", k));  // CPython raises
    }
    return t;
  }
  if (self->kind == SymKind::kDict) return CallDictMethod(self, name, args, kwargs);
  if (self->kind == SymKind::kSet) return CallSetMethod(self, name, args, kwargs);
  if (self->kind == SymKind::kList && name == "sort") return ListSort(self, args, kwargs);
  if (!kwargs.empty()) return Unsupported(absl::StrCat(name, "() with keyword arguments"));
  if (self->kind == SymKind::kList && name != "index" && name != "count") return CallListMethod(self, name, args);
  // index() and count(): on the values, folded. A list or tuple of pure constants (whose == runs
  // no user code) is asked for real, with pure constant arguments; anything else is CallBuiltin's.
  DT_ASSIGN_OR_RETURN(PyRef seq, ConstValue(self));
  PyRef method = PyRef::Steal(PyObject_GetAttrString(seq.get(), name.c_str()));
  if (!method) {
    PyErr_Clear();
    return Raises(absl::StrCat("the traced code raises: no method ", name));
  }
  if (IsPureConstType(seq.get()) && (name == "index" || name == "count")) {
    PyRef call_args = PyRef::Steal(PyTuple_New(args.size()));
    bool pure = true;
    for (size_t i = 0; i < args.size() && pure; ++i) {
      auto value = ConstValue(args[i]);
      pure = value.ok() && IsPureConstType(value->get());
      if (pure) PyTuple_SET_ITEM(call_args.get(), i, value->Release());
    }
    if (pure) {
      PyRef r = PyRef::Steal(PyObject_Call(method.get(), call_args.get(), nullptr));
      if (!r) {
        PyErr_Clear();
        return Raises(absl::StrCat("the traced code raises in ", name, "()"));
      }
      return ConstSym(std::move(r));
    }
  }
  return CallBuiltin(method.get(), args, kwargs);
}

absl::StatusOr<Sym> Tracer::CallSym(const Sym& callable, std::vector<Sym> args,
                                    std::vector<std::pair<std::string, Sym>> kwargs) {
  if (callable->kind == SymKind::kConst) {
    DT_ASSIGN_OR_RETURN(Sym decided, CallOnRunSequence(callable->obj.get(), args, kwargs));
    if (decided != nullptr) return decided;
  }
  DT_RETURN_IF_ERROR(MaterialiseCallArguments(callable, args, kwargs));
  switch (callable->kind) {
    case SymKind::kOpMethod:
      return CallOpFunction(callable->obj.get(), callable->items.empty() ? nullptr : callable->items[0], args, kwargs);
    case SymKind::kBoundMethod: {
      const Sym& self = callable->items[0];
      if (self->kind == SymKind::kGenManager) return ExitGeneratorManager(self, args);
      if (PyUnicode_Check(callable->obj.get())) {
        DT_ASSIGN_OR_RETURN(std::string method, Text(callable->obj.get()));
        return CallContainerMethod(self, method, args, kwargs);
      }
      if (self->kind == SymKind::kTensor) {
        PyRef name = PyRef::Steal(PyObject_GetAttrString(callable->obj.get(), "__name__"));
        if (!name) {
          PyErr_Clear();
          return Unsupported("an unnamed tensor method");
        }
        DT_ASSIGN_OR_RETURN(std::string method, Text(name.get()));
        return CallTensorMethod(self, method, args, kwargs);
      }
      if (!PyFunction_Check(callable->obj.get())) {
        DT_ASSIGN_OR_RETURN(Sym slot, CallBoundSlot(callable, args, kwargs));
        if (slot != nullptr) return slot;
      }
      Sym fn = MakeSym(SymKind::kFunction);
      fn->obj = callable->obj;
      fn->source = callable->function_source;
      args.insert(args.begin(), self);
      return Inline(fn, std::move(args), std::move(kwargs));
    }
    case SymKind::kFunction:
      if (IsContextManagerHelper(callable->obj.get())) {
        return MakeGeneratorManager(callable, std::move(args), std::move(kwargs));
      }
      return Inline(callable, std::move(args), std::move(kwargs));
    case SymKind::kObject: {
      PyRef name = PyRef::Steal(PyUnicode_FromString("__call__"));
      PyObject* call = cpython::LookupOnType(Py_TYPE(callable->obj.get()), name.get());
      if (call == nullptr || !PyFunction_Check(call)) {
        return Unsupported(absl::StrCat("call to ", ShortRepr(callable->obj.get()), " is not supported by the tracer"));
      }
      Sym fn = MakeSym(SymKind::kFunction);
      fn->obj = PyRef::Borrow(call);
      args.insert(args.begin(), callable);
      return Inline(fn, std::move(args), std::move(kwargs));
    }
    case SymKind::kConst: {
      PyObject* fn = callable->obj.get();
      if (fn == PartialType()) return MakePartial(args, kwargs);
      if (IsObjectSetattr(fn)) return ObjectSetattr(args, kwargs);
      if (PyCFunction_Check(fn) && std::string_view(reinterpret_cast<PyCFunctionObject*>(fn)->m_ml->ml_name) == "__build_class__" &&
          PyCFunction_GET_SELF(fn) != nullptr && PyModule_Check(PyCFunction_GET_SELF(fn)) &&
          std::string_view(PyModule_GetName(PyCFunction_GET_SELF(fn)) ? PyModule_GetName(PyCFunction_GET_SELF(fn)) : "") == "builtins") {
        return BuildClass(args, kwargs);
      }
      // functools, itertools (heap types on 3.12) and operator functions.
      DT_ASSIGN_OR_RETURN(Sym functional, CallItertools(fn, args, kwargs));
      if (functional != nullptr) return functional;
      if (fn == reinterpret_cast<PyObject*>(&PySuper_Type)) return MakeSuper(args, kwargs);
      if (fn == reinterpret_cast<PyObject*>(&PySet_Type)) return BuiltinSet(args, kwargs);
      if (fn == reinterpret_cast<PyObject*>(&PyFrozenSet_Type)) return BuiltinFrozenset(args, kwargs);
      if (PyExceptionClass_Check(fn) && PlainExceptionClass(fn)) return MakeException(fn, args, kwargs);
      if (PyType_Check(fn) && !PyType_HasFeature(reinterpret_cast<PyTypeObject*>(fn), Py_TPFLAGS_HEAPTYPE)) {
        return CallBuiltin(fn, args, kwargs);
      }
      // A builtin, or an unbound method of a builtin type (`str.lower`; CallBuiltin decides).
      if (PyCFunction_Check(fn) || Py_IS_TYPE(fn, &PyMethodDescr_Type)) return CallBuiltin(fn, args, kwargs);
      if (PyType_Check(fn)) {
        return ConstructObject(reinterpret_cast<PyTypeObject*>(fn), callable->source, std::move(args), std::move(kwargs));
      }
      return Unsupported(absl::StrCat("call to ", ShortRepr(fn), " is not supported by the tracer"));
    }
    case SymKind::kTensor:
    case SymKind::kTuple:
    case SymKind::kList:
    case SymKind::kDict:
    case SymKind::kNull:
    case SymKind::kIter:
    case SymKind::kCell:
    case SymKind::kSlice:
    case SymKind::kShape:
    case SymKind::kNumber:
    case SymKind::kPartial: return CallPartial(callable, std::move(args), std::move(kwargs));
    case SymKind::kRunIter:
    case SymKind::kRunSeq:
    case SymKind::kGenManager:
    case SymKind::kSuper:
    case SymKind::kSet:
      return Unsupported(absl::StrCat("calling a ", Describe(callable)));
  }
}

namespace {

// Parameter names are identifiers; one UTF-8 cannot encode (a code.replace()d name) matches no
// keyword, so binding fails and CPython makes the call.
std::string ParameterName(PyCodeObject* code, int i) {
  return py::Utf8Or(cpython::LocalNameObject(code, i), "\xff");
}

}  // namespace

// Binds a call's arguments to the frame's parameters like CPython: positional, extra positional
// into *args, keywords, extra keywords into **kwargs (defaults come after, BindDefaults).
absl::Status Tracer::BindArguments(TFrame& f, std::vector<Sym> args, Kwargs kwargs) {
  PyCodeObject* code = f.code;
  const int argcount = code->co_argcount;
  const int kwonly = code->co_kwonlyargcount;
  const bool varargs = code->co_flags & CO_VARARGS;
  const bool varkw = code->co_flags & CO_VARKEYWORDS;
  auto name_at = [&](int i) { return ParameterName(code, i); };
  for (size_t i = 0; i < args.size() && static_cast<int>(i) < argcount; ++i) f.locals[i] = args[i];
  if (static_cast<int>(args.size()) > argcount) {
    if (!varargs) return Raises("the traced code raises: too many positional arguments");
    Sym rest = MakeSym(SymKind::kTuple);
    rest->items.assign(args.begin() + argcount, args.end());
    f.locals[argcount + kwonly] = rest;
  } else if (varargs) {
    f.locals[argcount + kwonly] = MakeSym(SymKind::kTuple);
  }
  Sym extra_kwargs = varkw ? MakeSym(SymKind::kDict) : nullptr;
  for (auto& [k, v] : kwargs) {
    int found = -1;
    for (int i = code->co_posonlyargcount; i < argcount + kwonly; ++i) {
      if (name_at(i) == k) found = i;
    }
    if (found < 0) {
      if (!varkw) return Raises(absl::StrCat("the traced code raises: unexpected keyword ", k));
      PyRef key = PyRef::Steal(py::FromUtf8(k));
      if (!key) {
        PyErr_Clear();
        return Unsupported("a keyword name that is not valid UTF-8");
      }
      DT_RETURN_IF_ERROR(DictInsert(*extra_kwargs, std::move(key), v));
      continue;
    }
    if (f.locals[found] != nullptr) return Raises("the traced code raises: multiple values for an argument");
    f.locals[found] = v;
  }
  if (varkw) f.locals[argcount + kwonly + (varargs ? 1 : 0)] = extra_kwargs;
  return absl::OkStatus();
}

// Fills the parameters no argument bound from the function's defaults: those of a function
// object, or those MAKE_FUNCTION got from the trace (a constant tuple or a tuple it built).
absl::Status Tracer::BindDefaults(TFrame& f, const Sym& function, PyObject* defaults, PyObject* kwdefaults) {
  PyCodeObject* code = f.code;
  const int argcount = code->co_argcount;
  const int kwonly = code->co_kwonlyargcount;
  auto name_at = [&](int i) { return ParameterName(code, i); };
  std::vector<Sym> made_defaults;
  if (defaults == nullptr && function->defaults != nullptr) {
    if (function->defaults->kind == SymKind::kConst && PyTuple_Check(function->defaults->obj.get())) {
      PyObject* t = function->defaults->obj.get();
      for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(t); ++i) made_defaults.push_back(ConstSym(PyRef::Borrow(PyTuple_GET_ITEM(t, i))));
    } else {
      made_defaults = function->defaults->items;
    }
  }
  const int ndefaults = defaults != nullptr ? static_cast<int>(PyTuple_GET_SIZE(defaults))
                                            : static_cast<int>(made_defaults.size());
  for (int i = 0; i < argcount; ++i) {
    if (f.locals[i] != nullptr) continue;
    const int d = i - (argcount - ndefaults);
    if (d < 0) return Raises(absl::StrCat("the traced code raises: missing argument ", name_at(i)));
    if (defaults == nullptr) {
      f.locals[i] = made_defaults[d];
      continue;
    }
    // Read through the function (and guarded) when it has a source: `fn.__defaults__` can be
    // reassigned without changing the function's identity.
    PyObject* value = PyTuple_GET_ITEM(defaults, d);
    if (function->source != nullptr) {
      DT_ASSIGN_OR_RETURN(f.locals[i], Wrap(value, guards::ItemSource(guards::FuncDefaultsSource(function->source), d)));
    } else if (IsPureConstType(value)) {
      f.locals[i] = ConstSym(PyRef::Borrow(value));
    } else {
      return Unsupported("a non-constant default of a local function");
    }
  }
  for (int i = argcount; i < argcount + kwonly; ++i) {
    if (f.locals[i] != nullptr) continue;
    PyObject* dv = nullptr;
    if (kwdefaults != nullptr) dv = PyDict_GetItemString(kwdefaults, name_at(i).c_str());
    if (dv != nullptr && function->source != nullptr) {
      DT_ASSIGN_OR_RETURN(f.locals[i], Wrap(dv, guards::DictItemSource(guards::FuncKwDefaultsSource(function->source),
                                                                        name_at(i))));
    } else if (dv != nullptr) {
      if (!IsPureConstType(dv)) return Unsupported("a non-constant keyword default of a local function");
      f.locals[i] = ConstSym(PyRef::Borrow(dv));
    } else if (function->kwdefaults != nullptr) {
      DT_ASSIGN_OR_RETURN(f.locals[i], Subscript(function->kwdefaults, ConstSym(PyRef::Borrow(cpython::LocalNameObject(code, i)))));
    } else {
      return Raises(absl::StrCat("the traced code raises: missing keyword argument ", name_at(i)));
    }
  }
  return absl::OkStatus();
}

namespace {

bool ReadsGlobals(const DecodedCode& code) {
  for (const Instr& in : code.instrs) {
    if (in.op == Op::kLoadGlobal || in.opname == "LOAD_NAME" || in.opname == "IMPORT_NAME" ||
        in.opname == "STORE_GLOBAL" || in.opname == "DELETE_GLOBAL") {
      return true;
    }
  }
  return false;
}

}  // namespace

absl::StatusOr<Sym> Tracer::Inline(const Sym& function, std::vector<Sym> args, Kwargs kwargs) {
  TFrame f;
  DT_RETURN_IF_ERROR(PrepareFrame(function, std::move(args), std::move(kwargs), f));
  TFrame* saved = current_;
  current_ = &f;
  auto result = f.generator ? RunGenerator(f) : RunFrame(f);
  current_ = saved;
  return result;
}

// A frame for calling `function` from the current frame, its arguments bound as CPython binds
// them.
absl::Status Tracer::PrepareFrame(const Sym& function, std::vector<Sym> args, Kwargs kwargs, TFrame& f) {
  if (current_ != nullptr && current_->depth + 1 > kMaxDepth) {
    return LimitReached(absl::StrCat("calls nested more than ", kMaxDepth, " deep (recursion?)"));
  }
  PyObject* fn = function->obj.get();
  PyCodeObject* code;
  PyObject* defaults = nullptr;
  PyObject* kwdefaults = nullptr;
  PyObject* globals;
  PyObject* fn_object = nullptr;
  if (PyFunction_Check(fn)) {
    fn_object = fn;
    code = reinterpret_cast<PyCodeObject*>(PyFunction_GET_CODE(fn));
    defaults = PyFunction_GET_DEFAULTS(fn);
    kwdefaults = PyFunction_GET_KW_DEFAULTS(fn);
    globals = PyFunction_GET_GLOBALS(fn);
  } else if (PyCode_Check(fn)) {
    code = reinterpret_cast<PyCodeObject*>(fn);
    globals = function->globals;
  } else {
    return Unsupported("calling an unknown function object");
  }
  if (code->co_flags & (CO_COROUTINE | CO_ASYNC_GENERATOR | CO_ITERABLE_COROUTINE)) {
    return Unsupported("calling a coroutine function");
  }
  f.code = code;
  f.generator = (code->co_flags & CO_GENERATOR) != 0;
  DT_ASSIGN_OR_RETURN(f.decoded, Decode(code));
  f.locals.assign(code->co_nlocalsplus, nullptr);
  f.globals = globals;
  f.function = fn_object;
  f.function_source = function->source;
  f.function_sym = function;
  f.depth = current_ == nullptr ? 0 : current_->depth + 1;
  f.caller = current_;
  if (globals != frame_.inputs.globals) {
    // Guards on another module's globals are read through the function; a method found on a
    // class (contextlib.nullcontext.__enter__) has no source, which is fine while it reads none.
    if (function->source != nullptr) {
      f.globals_source = guards::FuncGlobalsSource(function->source);
    } else if (ReadsGlobals(*f.decoded)) {
      DT_ASSIGN_OR_RETURN(f.globals_source, ModuleGlobalsSource(globals));
    }
  } else if (current_ != nullptr) {
    f.globals_source = current_->globals_source;
  }
  DT_RETURN_IF_ERROR(BindArguments(f, std::move(args), std::move(kwargs)));
  return BindDefaults(f, function, defaults, kwdefaults);
}

namespace {

// Whether `target` is among `roots` or reachable through their items (tuples, lists, dict values,
// an object's attributes).
bool Reaches(const std::vector<Sym>& roots, const Sym& target) {
  std::vector<const SymValue*> stack;
  for (const Sym& r : roots) {
    if (r != nullptr) stack.push_back(r.get());
  }
  std::vector<const SymValue*> seen;
  while (!stack.empty()) {
    const SymValue* s = stack.back();
    stack.pop_back();
    if (s == target.get()) return true;
    if (std::find(seen.begin(), seen.end(), s) != seen.end()) continue;
    seen.push_back(s);
    for (const Sym& item : s->items) {
      if (item != nullptr) stack.push_back(item.get());
    }
  }
  return false;
}

}  // namespace

// Whether mutating `sym` during a generator's run (which began when MakeSym's serial was
// `first_serial`) is the run's own business: a list, dict, set or object the run made itself
// (not the caller's, not read from the frame) that it neither yielded nor returned, so the
// consumer can never see it (a walk's `seen` set, the list it collects into).
bool Tracer::PrivateToGeneratorRun(const Sym& sym, uint64_t first_serial, const std::vector<Sym>& out) const {
  const bool container = sym->kind == SymKind::kList || sym->kind == SymKind::kDict ||
                         sym->kind == SymKind::kSet || (sym->kind == SymKind::kObject && sym->made_by_trace);
  return container && sym->serial >= first_serial && sym->source == nullptr && !sym->from_frame &&
         CallerObject(sym) == nullptr && !Reaches(out, sym);
}

// A generator called in the trace runs to its end at once; the consumer iterates what it
// yielded. That keeps the program's meaning only while the body has no effects the consumer
// could observe in between (mutations of containers or objects it did not make for itself,
// in-place tensor ops); such a body, or one that breaks (print, .item()), leaves the call to
// CPython. A generator that never ends hits the trace's length limit the same way.
absl::StatusOr<Sym> Tracer::RunGenerator(TFrame& f) {
  const size_t journal_before = journal_.size();
  const size_t nodes_before = graph_->nodes().size();
  const uint64_t first_serial = next_sym_serial.load(std::memory_order_relaxed);
  absl::StatusOr<Sym> run = RunFrame(f);
  Sym raised;
  if (!run.ok()) {
    raised = TakeRaising(run.status());  // raised by the generator after its last yield
    if (raised == nullptr) return run.status();
  }
  bool effects = false;
  for (size_t i = nodes_before; i < graph_->nodes().size(); ++i) effects |= graph_->nodes()[i].inplace;
  // Advancing iterators (its own loops, the iterator a generator expression is given) and
  // filling containers it made and keeps is the generator's own business; anything else it
  // mutates is an effect.
  std::vector<Sym> out = f.yields;
  if (run.ok()) out.push_back(*run);
  out.push_back(raised);
  for (size_t i = journal_before; i < journal_.size(); ++i) {
    const Sym& changed = journal_[i].sym;
    effects |= changed->kind != SymKind::kIter && !PrivateToGeneratorRun(changed, first_serial, out);
  }
  if (effects) {
    return Unsupported("a generator whose body mutates state, run ahead of its consumer, could reorder effects");
  }
  Sym it = MakeSym(SymKind::kIter);  // not a loop's own iterator: it cannot cross a break
  it->items = std::move(f.yields);
  if (raised != nullptr) {
    it->items.push_back(std::move(raised));
    it->raises_when_exhausted = true;
  } else {
    it->returned = *std::move(run);
  }
  return it;
}

// The globals of a method found on a class (no source of its own: `no_grad().__enter__`,
// `unittest.TestResult.__init__`) read through the module they belong to,
// sys.modules[__name__].__dict__, guarded to still be that module. Any module qualifies. (This
// was limited to dyntrace's own modules while the dict was an AttrSource, which reads a module's
// dict for the key "__dict__" and so never resolved after tracing: guards through it always
// failed, so every call traced anew, and a value rebuilt from it, `self._original_stdout =
// sys.stdout` in unittest.result, "disappeared". ModuleDictSource reads the module's dict.)
absl::StatusOr<SourceRef> Tracer::ModuleGlobalsSource(PyObject* globals) {
  PyObject* name = PyDict_GetItemString(globals, "__name__");  // borrowed
  const std::optional<std::string> module_name = name != nullptr && PyUnicode_Check(name) ? py::Utf8(name) : std::nullopt;
  PyObject* modules = PyImport_GetModuleDict();
  PyObject* module = module_name ? PyDict_GetItemString(modules, module_name->c_str()) : nullptr;
  if (module == nullptr || !PyModule_Check(module) || PyModule_GetDict(module) != globals) {
    return Unsupported("a function from another module without a source (its globals are no module's)");
  }
  guards_.Add(LeafGuard::Identity(guards::SysModuleSource(*module_name), module, Here()));
  return guards::ModuleDictSource(guards::SysModuleSource(*module_name));
}

}  // namespace dt::interpreter::trace
