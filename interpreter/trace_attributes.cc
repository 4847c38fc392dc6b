// interpreter/trace_attributes.cc: attribute reads on traced values.
#include <Python.h>

#include "absl/container/flat_hash_set.h"

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

namespace {

Sym BoundTo(SymKind kind, PyRef function, const Sym& self) {
  Sym s = MakeSym(kind);
  s->obj = std::move(function);
  s->items.push_back(self);
  return s;
}

}  // namespace

absl::StatusOr<Sym> Tracer::TensorAttr(const Sym& obj, const std::string& name) {
  const Tensor& m = obj->meta;
  if (name == "shape") {
    Sym s = MakeSym(SymKind::kShape);
    s->items.push_back(obj);
    return s;
  }
  if (name == "dtype") return ConstSym(PyRef::Steal(py::WrapDType(m.dtype())));
  if (name == "device" || name == "is_cuda") {
    DT_ASSIGN_OR_RETURN(const Device device, DeviceOf(obj));
    if (name == "device") return ConstSym(PyRef::Steal(py::WrapDevice(device)));
    return ConstSym(PyRef::Borrow(device.type == DeviceType::kCuda ? Py_True : Py_False));
  }
  if (name == "ndim") return ConstSym(PyRef::Steal(PyLong_FromLongLong(m.ndim())));
  if (name == "T" || name == "mT") {
    Dims perm;
    for (int64_t d = 0; d < m.ndim(); ++d) perm.push_back(d);
    if (name == "T") std::reverse(perm.begin(), perm.end());
    else if (m.ndim() >= 2) std::swap(perm[m.ndim() - 1], perm[m.ndim() - 2]);
    else return Raises("the traced code raises: .mT of a tensor with fewer than 2 dims");
    const OpDef* op = OpRegistry::Get().Find("permute");
    DT_ASSIGN_OR_RETURN(std::vector<Sym> outs,
                        Emit(op, {m, perm}, {GraphArg::Value(obj->value), GraphArg{ArgValue(perm)}}, false));
    return outs[0];
  }
  if (name == "__class__") return ConstSym(PyRef::Borrow(reinterpret_cast<PyObject*>(&py::TensorType)));
  static const auto* autograd_state = new absl::flat_hash_set<std::string>{
      "requires_grad", "requires_grad_", "grad", "grad_fn", "is_leaf", "retain_grad", "retains_grad", "backward",
      "register_hook", "detach", "detach_", "data", "_version"};
  if (autograd_state->contains(name)) {
    // Autograd's state of a value the graph makes exists only once the graph has run.
    return Unsupported(absl::StrCat("Tensor.", name, " (autograd state) inside compiled code"));
  }
  PyObject* attr = PyDict_GetItemString(py::TensorType.tp_dict, name.c_str());
  if (attr == nullptr) {
    // object's own attributes (__eq__, __sizeof__ ...); 3.12 keeps a builtin type's dict apart
    // from tp_dict, so it is looked up through the type.
    PyRef name_obj = PyRef::Steal(py::FromUtf8(name));
    if (!name_obj) {
      PyErr_Clear();
      return Unsupported("an attribute name UTF-8 cannot encode");
    }
    if (cpython::LookupOnType(&PyBaseObject_Type, name_obj.get()) != nullptr) {
      return Unsupported(absl::StrCat("Tensor.", name, ", inherited from object"));
    }
  }
  if (attr == nullptr) return Raises(absl::StrCat("the traced code raises AttributeError: Tensor has no attribute ", name));
  return BoundTo(py::IsOpFunction(attr) ? SymKind::kOpMethod : SymKind::kBoundMethod, PyRef::Borrow(attr), obj);
}

// The methods of containers the trace follows (trace_calls.cc CallContainerMethod).
absl::StatusOr<Sym> Tracer::ContainerAttr(const Sym& obj, const std::string& name) {
  if (obj->named_type) {
    if (std::optional<size_t> field = py::NamedResultField(obj->named_type.get(), name)) return obj->items.at(*field);
  }
  static const auto* dict_methods = new absl::flat_hash_set<std::string>{
      "get", "items", "keys", "values", "pop", "setdefault", "update", "copy", "clear"};
  static const auto* list_methods = new absl::flat_hash_set<std::string>{
      "append", "extend", "index", "count", "pop", "insert", "clear", "reverse", "copy", "remove", "sort"};
  static const auto* set_methods = new absl::flat_hash_set<std::string>{
      "add", "discard", "remove", "pop", "update", "union", "clear", "copy", "issubset", "issuperset", "isdisjoint"};
  const bool followed = (obj->kind == SymKind::kDict && dict_methods->contains(name)) ||
                        (obj->kind == SymKind::kSet && set_methods->contains(name)) ||
                        (obj->kind == SymKind::kList && list_methods->contains(name)) ||
                        (obj->kind == SymKind::kTuple && (name == "index" || name == "count"));
  if (!followed) return Unsupported(absl::StrCat("attribute '", name, "' of a ", Describe(obj)));
  return BoundTo(SymKind::kBoundMethod, PyRef::Steal(py::FromUtf8(name)), obj);
}

// True when reading an attribute of an instance of `type` is object.__getattribute__ (a Python
// __getattr__ only runs once that found nothing, when the tracer gives up anyway). A type with a
// __getattribute__ of its own, Python or C (threading.local keeps a dict per thread), is not.
static bool GenericAttributeLookup(PyTypeObject* type) {
  if (type->tp_getattro == PyObject_GenericGetAttr) return true;
  static PyObject* const name = PyUnicode_InternFromString("__getattribute__");
  PyObject* own = cpython::LookupOnType(type, name);
  return own != nullptr && own == cpython::LookupOnType(&PyBaseObject_Type, name);
}

// object.__getattribute__ for a plain object: the instance dict, unless a data descriptor of the
// class wins; methods found on the class are bound.
absl::StatusOr<Sym> Tracer::ObjectAttr(const Sym& obj, const std::string& name) {
  if (name == "__class__" && Py_TYPE(obj->obj.get())->tp_getattro == PyBaseObject_Type.tp_getattro) {
    // object's own __class__ descriptor (a class that defines __class__ is read the usual way).
    PyRef key = PyRef::Steal(PyUnicode_FromString("__class__"));
    if (cpython::LookupOnType(Py_TYPE(obj->obj.get()), key.get()) ==
        cpython::LookupOnType(&PyBaseObject_Type, key.get())) {
      return TypeOfObject(obj);
    }
  }
  if (!GenericAttributeLookup(Py_TYPE(obj->obj.get()))) {
    return Unsupported(absl::StrCat("attribute '", name, "' of a ", Py_TYPE(obj->obj.get())->tp_name,
                                    " (its type reads attributes its own way)"));
  }
  for (size_t i = 0; i < obj->keys.size(); ++i) {  // stored earlier in this trace
    if (PyUnicode_CompareWithASCIIString(obj->keys[i].get(), name.c_str()) == 0) return obj->items[i];
  }
  PyObject* o = obj->obj.get();
  PyObject* own = nullptr;
  if (PyObject* dict = cpython::InstanceDict(o); dict != nullptr) own = PyDict_GetItemString(dict, name.c_str());
  PyObject* cls_attr = cpython::LookupOnType(Py_TYPE(o), PyRef::Steal(py::FromUtf8(name)).get());
  if (cls_attr != nullptr && Py_TYPE(cls_attr)->tp_descr_set != nullptr) {
    return Unsupported(absl::StrCat("attribute '", name, "' is a descriptor (property or slot)"));
  }
  if (own == nullptr && cls_attr != nullptr) {
    if (PyFunction_Check(cls_attr)) return ClassMethodOf(obj, cls_attr, name);
    if (IsPureConstType(cls_attr)) return ClassConstantOf(obj, cls_attr, name);
    return Unsupported(absl::StrCat("class attribute '", name, "' of ", Py_TYPE(o)->tp_name));
  }
  if (own == nullptr) {
    return Unsupported(absl::StrCat("attribute '", name, "' of ", ShortRepr(o), " (the code raises or reads a class attribute)"));
  }
  if (obj->source == nullptr) return Unsupported("attribute of an object without a source");
  return Wrap(own, guards::AttrSource(obj->source, name));
}

// type(obj) of a plain object: its class, read from where the object is (so attributes of the
// class are guarded there).
Sym Tracer::TypeOfObject(const Sym& obj) {
  Sym cls = ConstSym(PyRef::Borrow(reinterpret_cast<PyObject*>(Py_TYPE(obj->obj.get()))));
  cls->source = obj->made_by_trace ? obj->class_source
                : obj->source != nullptr ? guards::TypeOfSource(obj->source) : nullptr;
  return cls;
}

absl::StatusOr<Sym> Tracer::ClassConstantOf(const Sym& obj, PyObject* value, const std::string& name) {
  SourceRef cls_source = obj->made_by_trace ? obj->class_source
                         : obj->source != nullptr ? guards::TypeOfSource(obj->source) : nullptr;
  if (cls_source == nullptr) return Unsupported(absl::StrCat("class attribute '", name, "' of an object of an unknown class"));
  // A later instance could shadow it in its own __dict__ (a made one starts blank).
  if (!obj->made_by_trace) guards_.Add(LeafGuard::Absent(guards::AttrSource(obj->source, name), Here()));
  return Wrap(value, guards::AttrSource(cls_source, name));
}

// A method found on the class, bound to obj. Another instance of the class may hold a callable
// of its own under that name (`runner._makeResult = lambda: result`), and the class's function
// may be replaced between calls: both are guarded, as for a class constant.
absl::StatusOr<Sym> Tracer::ClassMethodOf(const Sym& obj, PyObject* function, const std::string& name) {
  SourceRef cls_source = obj->made_by_trace ? obj->class_source
                         : obj->source != nullptr ? guards::TypeOfSource(obj->source) : nullptr;
  if (cls_source == nullptr) return Unsupported(absl::StrCat("method '", name, "' of an object of an unknown class"));
  if (!obj->made_by_trace) guards_.Add(LeafGuard::Absent(guards::AttrSource(obj->source, name), Here()));
  guards_.Add(LeafGuard::Identity(guards::AttrSource(cls_source, name), function, Here()));
  return BoundTo(SymKind::kBoundMethod, PyRef::Borrow(function), obj);
}

// type.__getattribute__: a data descriptor of the metaclass (__dict__, __doc__, __name__) wins
// over the class's own attribute, and a descriptor found in the class is bound with
// __get__(None, cls) (classmethod, staticmethod, property ...).
absl::StatusOr<Sym> Tracer::ClassAttr(const Sym& obj, PyObject* own, const std::string& name) {
  PyObject* cls = obj->obj.get();
  const SourceRef source = guards::AttrSource(obj->source, name);
  if (PyFunction_Check(own)) {
    Sym s = MakeSym(SymKind::kFunction);
    s->obj = PyRef::Borrow(own);
    s->source = source;
    guards_.Add(LeafGuard::Identity(source, own, Here()));
    return s;
  }
  PyObject* meta_attr = cpython::LookupOnType(Py_TYPE(cls), PyRef::Steal(py::FromUtf8(name)).get());
  if (meta_attr != nullptr && Py_TYPE(meta_attr)->tp_descr_set != nullptr) {
    return Unsupported(absl::StrCat("attribute '", name, "' of a class is a descriptor of its metaclass"));
  }
  const bool is_classmethod = Py_IS_TYPE(own, &PyClassMethod_Type);
  if (is_classmethod || Py_IS_TYPE(own, &PyStaticMethod_Type)) {
    PyRef function = PyRef::Steal(PyObject_GetAttrString(own, "__func__"));
    if (function && !is_classmethod && PyCFunction_Check(function.get())) {
      // A builtin as a static method (dyntrace.cuda.is_available): the call decides. The static
      // method's identity fixes the builtin it holds.
      guards_.Add(LeafGuard::Identity(source, own, Here()));
      return ConstSym(std::move(function));
    }
    if (!function || !PyFunction_Check(function.get())) {
      PyErr_Clear();
      return Unsupported(absl::StrCat("class attribute '", name, "' wraps a non-function"));
    }
    guards_.Add(LeafGuard::Identity(source, own, Here()));
    if (is_classmethod) return BoundTo(SymKind::kBoundMethod, function, obj);
    Sym s = MakeSym(SymKind::kFunction);
    s->obj = function;
    return s;
  }
  if (Py_TYPE(own)->tp_descr_get != nullptr) {
    return Unsupported(absl::StrCat("class attribute '", name, "' is a descriptor (", Py_TYPE(own)->tp_name, ")"));
  }
  return Wrap(own, source);
}

// Attributes of constants: a module's globals, a class's attributes, or a pure constant's
// (folded by calling getattr for real).
absl::StatusOr<Sym> Tracer::ConstAttr(const Sym& obj, const std::string& name) {
  PyObject* o = obj->obj.get();
  if (PyModule_Check(o) || PyType_Check(o)) {
    PyObject* own = PyModule_Check(o)
                        ? PyDict_GetItemString(PyModule_GetDict(o), name.c_str())
                        // The MRO lookup, not tp_dict: 3.12 keeps builtin types' dicts elsewhere.
                        : cpython::LookupOnType(reinterpret_cast<PyTypeObject*>(o), PyRef::Steal(py::FromUtf8(name)).get());
    if (own == nullptr) {
      return Unsupported(absl::StrCat("attribute '", name, "' of ", ShortRepr(o), " (the code raises or reads a class attribute)"));
    }
    if (obj->source == nullptr) return Unsupported("attribute of an object without a source");
    if (PyType_Check(o)) return ClassAttr(obj, own, name);
    return Wrap(own, guards::AttrSource(obj->source, name));
  }
  if (!IsPureConstType(o)) return Unsupported(absl::StrCat("attribute '", name, "' of a ", Describe(obj)));
  PyObject* r = PyObject_GetAttrString(o, name.c_str());
  if (r == nullptr) {
    PyErr_Clear();
    return Raises("the traced code raises AttributeError");
  }
  return ConstSym(PyRef::Steal(r));
}

absl::StatusOr<Sym> Tracer::GetAttr(const Sym& obj, const std::string& name) {
  switch (obj->kind) {
    case SymKind::kTensor: return TensorAttr(obj, name);
    case SymKind::kTuple:
    case SymKind::kList:
    case SymKind::kDict: return ContainerAttr(obj, name);
    case SymKind::kObject: return ObjectAttr(obj, name);
    case SymKind::kConst: return ConstAttr(obj, name);
    case SymKind::kNumber: {
      // `f.as_integer_ratio()`, `n.bit_length()`: the value is needed, so it is specialised.
      DT_ASSIGN_OR_RETURN(Sym constant, Specialize(obj));
      return ConstAttr(constant, name);
    }
    case SymKind::kShape:
    case SymKind::kNull:
    case SymKind::kIter:
    case SymKind::kCell:
    case SymKind::kBoundMethod:
    case SymKind::kOpMethod:
    case SymKind::kFunction:
    case SymKind::kSlice:
    case SymKind::kRunIter:
    case SymKind::kPartial:
    case SymKind::kGenManager: break;
    case SymKind::kSuper: return SuperAttr(obj, name);
    case SymKind::kSet: return ContainerAttr(obj, name);
    case SymKind::kRunSeq:
      // append needs no items (trace_run_sequence.cc); any other attribute does.
      if (name == "append" && PyList_CheckExact(obj->obj.get())) {
        return BoundTo(SymKind::kBoundMethod, PyRef::Steal(py::FromUtf8(name)), obj);
      }
      DT_RETURN_IF_ERROR(Materialise(obj));
      return ContainerAttr(obj, name);
  }
  return Unsupported(absl::StrCat("attribute '", name, "' of a ", Describe(obj)));
}

}  // namespace dt::interpreter::trace
