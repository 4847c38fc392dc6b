// interpreter/trace_attributes.cc: attribute reads on traced values.
#include <Python.h>

#include "absl/container/flat_hash_set.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
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
  if (name == "grad") return GradOf(obj);
  if (name == "backward" || (name == "detach" && CanDetach(obj))) {
    return BoundTo(SymKind::kBoundMethod, PyRef::Borrow(PyDict_GetItemString(py::TensorType.tp_dict, name.c_str())),
                   obj);
  }
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
  if (Py_TYPE(attr) == &PyGetSetDescr_Type || Py_TYPE(attr) == &PyMemberDescr_Type) {
    // A data attribute (Parameter's flag `_is_parameter`, `is_leaf` ...) the cases above do not
    // model: its value is not a method to bind, and a traced value has none to read.
    return Unsupported(absl::StrCat("Tensor.", name, " (a data attribute the tracer does not model)"));
  }
  return BoundTo(py::IsOpFunction(attr) ? SymKind::kOpMethod : SymKind::kBoundMethod, PyRef::Borrow(attr), obj);
}

// The methods of containers the trace follows (trace_calls.cc CallContainerMethod).
absl::StatusOr<Sym> Tracer::ContainerAttr(const Sym& obj, const std::string& name) {
  if (obj->named_type) {
    if (std::optional<size_t> field = py::NamedResultField(obj->named_type.get(), name)) return obj->items.at(*field);
    if (IsNamedTupleClass(obj->named_type.get())) {
      // A namedtuple's fields (its class's `_fields`, fixed when it was made) and the methods the
      // trace follows (trace_calls.cc).
      PyObject* fields = PyDict_GetItemString(reinterpret_cast<PyTypeObject*>(obj->named_type.get())->tp_dict, "_fields");
      for (Py_ssize_t i = 0; fields != nullptr && i < PyTuple_GET_SIZE(fields); ++i) {
        if (PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(fields, i), name.c_str()) == 0) return obj->items.at(i);
      }
      if (name == "_replace" || name == "_asdict") {
        return BoundTo(SymKind::kBoundMethod, PyRef::Steal(py::FromUtf8(name)), obj);
      }
      return Unsupported(absl::StrCat("attribute '", name, "' of a ", ShortRepr(obj->named_type.get()), " named tuple"));
    }
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
  if (IsKeyedCallerDict(obj) && (name == "get" || name == "setdefault")) {
    return BoundTo(SymKind::kBoundMethod, PyRef::Steal(py::FromUtf8(name)), obj);
  }
  if (!GenericAttributeLookup(Py_TYPE(obj->obj.get()))) {
    return Unsupported(absl::StrCat("attribute '", name, "' of a ", Py_TYPE(obj->obj.get())->tp_name,
                                    " (its type reads attributes its own way)"));
  }
  for (size_t i = 0; i < obj->keys.size(); ++i) {  // stored earlier in this trace
    if (PyUnicode_CompareWithASCIIString(obj->keys[i].get(), name.c_str()) == 0) return obj->items[i];
  }
  PyObject* o = obj->obj.get();
  {
    // A class attribute the trace stored (`Counter.count = 0`), unless the instance has its own.
    const SourceRef cls_source = obj->made_by_trace ? obj->class_source
                                 : obj->source != nullptr ? guards::TypeOfSource(obj->source) : nullptr;
    DT_ASSIGN_OR_RETURN(Sym pending, PendingClassAttr(Py_TYPE(o), name, cls_source));
    if (pending != nullptr) {
      PyObject* dict = cpython::InstanceDict(o);
      PyObject* own_value = dict != nullptr ? PyDict_GetItemString(dict, name.c_str()) : nullptr;
      if (own_value == nullptr && (pending->kind == SymKind::kTensor || pending->kind == SymKind::kNumber ||
                                   (pending->kind == SymKind::kConst && IsPureConstType(pending->obj.get())))) {
        if (!obj->made_by_trace) {
          if (obj->source == nullptr) return Unsupported("attribute of an object without a source");
          guards_.Add(LeafGuard::Absent(guards::AttrSource(obj->source, name), Here()));
        }
        return pending;
      }
      return Unsupported(absl::StrCat("attribute '", name, "' the trace stored on the class of ", ShortRepr(o)));
    }
  }
  PyObject* own = nullptr;
  if (PyObject* dict = cpython::InstanceDict(o); dict != nullptr) own = PyDict_GetItemString(dict, name.c_str());
  PyObject* cls_attr = cpython::LookupOnType(Py_TYPE(o), PyRef::Steal(py::FromUtf8(name)).get());
  if (cls_attr != nullptr && Py_TYPE(cls_attr)->tp_descr_set != nullptr) {
    DT_ASSIGN_OR_RETURN(Sym getter, PropertyFunction(obj, cls_attr, name, /*setter=*/false));
    if (getter != nullptr) return CallSym(getter, {obj}, {});
    return Unsupported(absl::StrCat("attribute '", name, "' is a descriptor (property or slot)"));
  }
  if (own == nullptr && cls_attr != nullptr) {
    if (PyFunction_Check(cls_attr)) return ClassMethodOf(obj, cls_attr, name);
    if (Py_IS_TYPE(cls_attr, &PyStaticMethod_Type)) return StaticMethodOf(obj, cls_attr, name);
    if (IsPureConstType(cls_attr)) return ClassConstantOf(obj, cls_attr, name);
    return Unsupported(absl::StrCat("class attribute '", name, "' of ", Py_TYPE(o)->tp_name));
  }
  if (own == nullptr) {
    // Neither the instance nor its class has it, and no __getattr__ would answer: CPython raises
    // AttributeError (hasattr() and getattr() with a default catch it). Guards say the instance
    // and the class still lack it.
    static PyObject* const getattr_name = PyUnicode_InternFromString("__getattr__");
    const SourceRef cls_source = obj->made_by_trace ? obj->class_source
                                 : obj->source != nullptr ? guards::TypeOfSource(obj->source) : nullptr;
    // (A class the trace made needs no guard: only the trace sees it.)
    const bool trace_class = obj->made_by_trace && IsTraceClass(reinterpret_cast<PyObject*>(Py_TYPE(o)));
    if (cls_attr == nullptr && (cls_source != nullptr || trace_class) &&
        cpython::LookupOnType(Py_TYPE(o), getattr_name) == nullptr) {
      if (!obj->made_by_trace) guards_.Add(LeafGuard::Absent(guards::AttrSource(obj->source, name), Here()));
      if (cls_source != nullptr) guards_.Add(LeafGuard::Absent(guards::AttrSource(cls_source, name), Here()));
      return Raises(absl::StrCat("the traced code raises AttributeError: '", Py_TYPE(o)->tp_name,
                                 "' object has no attribute '", name, "'"));
    }
    return Unsupported(absl::StrCat("attribute '", name, "' of ", ShortRepr(o), " (the code raises or reads a class attribute)"));
  }
  if (obj->source == nullptr) return Unsupported("attribute of an object without a source");
  return Wrap(own, guards::AttrSource(obj->source, name));
}

// The getter (or setter) of a property whose function is a plain Python function, which the trace
// inlines: the property is guarded by identity on the object's class. Null when `descriptor` is
// no such property (a slot, a C getset, a property subclass, a missing fget/fset).
absl::StatusOr<Sym> Tracer::PropertyFunction(const Sym& obj, PyObject* descriptor, const std::string& name,
                                             bool setter) {
  if (!Py_IS_TYPE(descriptor, &PyProperty_Type)) return Sym();
  PyRef function = PyRef::Steal(PyObject_GetAttrString(descriptor, setter ? "fset" : "fget"));
  if (!function) {
    PyErr_Clear();
    return Sym();
  }
  if (!PyFunction_Check(function.get())) return Sym();
  const SourceRef cls_source = obj->made_by_trace ? obj->class_source
                               : obj->source != nullptr ? guards::TypeOfSource(obj->source) : nullptr;
  if (cls_source == nullptr) return Sym();
  guards_.Add(LeafGuard::Identity(guards::AttrSource(cls_source, name), descriptor, Here()));
  Sym s = MakeSym(SymKind::kFunction);
  s->obj = std::move(function);
  return s;
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
  if (cls_source == nullptr && obj->made_by_trace && IsTraceClass(reinterpret_cast<PyObject*>(Py_TYPE(obj->obj.get()))) &&
      IsPureConstType(value)) {
    return ConstSym(PyRef::Borrow(value));  // a class made in the trace, which only the trace sees
  }
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
  Sym method = BoundTo(SymKind::kBoundMethod, PyRef::Borrow(function), obj);
  method->function_source = guards::AttrSource(cls_source, name);
  return method;
}

// A static method found on the class, read through an instance: its function, unbound. Guarded
// as a method is (the instance does not shadow it; the class still holds this staticmethod).
absl::StatusOr<Sym> Tracer::StaticMethodOf(const Sym& obj, PyObject* descriptor, const std::string& name) {
  PyObject* function = PyStaticMethod_Type.tp_descr_get(descriptor, obj->obj.get(), nullptr);
  if (function == nullptr) {
    PyErr_Clear();
    return Unsupported(absl::StrCat("static method '", name, "' could not be read"));
  }
  PyRef held = PyRef::Steal(function);
  if (!PyFunction_Check(function)) return Unsupported(absl::StrCat("static method '", name, "' wraps a non-function"));
  SourceRef cls_source = obj->made_by_trace ? obj->class_source
                         : obj->source != nullptr ? guards::TypeOfSource(obj->source) : nullptr;
  if (cls_source == nullptr) return Unsupported(absl::StrCat("method '", name, "' of an object of an unknown class"));
  if (!obj->made_by_trace) guards_.Add(LeafGuard::Absent(guards::AttrSource(obj->source, name), Here()));
  guards_.Add(LeafGuard::Identity(guards::AttrSource(cls_source, name), descriptor, Here()));
  Sym s = MakeSym(SymKind::kFunction);
  s->obj = std::move(held);
  return s;
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
  if ((Py_IS_TYPE(own, &PyMethodDescr_Type) || Py_IS_TYPE(own, &PyClassMethodDescr_Type) ||
       Py_IS_TYPE(own, &PyWrapperDescr_Type)) &&
      !(reinterpret_cast<PyTypeObject*>(cls)->tp_flags & Py_TPFLAGS_HEAPTYPE)) {
    // An unbound method of a builtin type (`str.lower`, `object.__setattr__`) or its classmethod
    // bound to it (`dict.fromkeys`): a builtin type's attributes never change. Calls decide what
    // they do.
    PyRef value = PyRef::Steal(PyObject_GetAttrString(cls, name.c_str()));
    if (!value) {
      PyErr_Clear();
      return Unsupported(absl::StrCat("class attribute '", name, "' of a builtin type"));
    }
    return ConstSym(std::move(value));
  }
  if (Py_TYPE(own)->tp_descr_get != nullptr) {
    return Unsupported(absl::StrCat("class attribute '", name, "' is a descriptor (", Py_TYPE(own)->tp_name, ")"));
  }
  return Wrap(own, source);
}

// `cls.name = value` on a plain class (its metaclass is type) for a name that is not a dunder (those
// can be type's own descriptors, or slots): a plain store into the class's __dict__.
absl::Status Tracer::StoreClassAttr(const Sym& cls, PyObject* name_obj, const Sym& value) {
  PyObject* o = cls->obj.get();
  DT_ASSIGN_OR_RETURN(const std::string name, NameText(name_obj));
  if (!PyType_CheckExact(o) || !PyType_HasFeature(reinterpret_cast<PyTypeObject*>(o), Py_TPFLAGS_HEAPTYPE) ||
      absl::StartsWith(name, "__") || cls->source == nullptr || value->kind == SymKind::kNull) {
    return Unsupported(absl::StrCat("storing attribute '", name, "' on ", ShortRepr(o)));
  }
  Sym& stores = class_stores_[o];
  if (stores == nullptr) {
    stores = ConstSym(PyRef::Borrow(o));
    stores->source = cls->source;
  } else if (stores->source->ToString() != cls->source->ToString()) {
    guards_.Add(LeafGuard::Same(cls->source, stores->source, Here()));
  }
  Mutating(stores);
  if (stores->keys.empty()) stored_objects_.push_back(stores);
  for (size_t i = 0; i < stores->keys.size(); ++i) {
    if (PyUnicode_Compare(stores->keys[i].get(), name_obj) == 0) {
      stores->items[i] = value;
      return absl::OkStatus();
    }
  }
  stores->keys.push_back(PyRef::Borrow(name_obj));
  stores->items.push_back(value);
  return absl::OkStatus();
}

absl::StatusOr<Sym> Tracer::PendingClassAttr(PyTypeObject* type, const std::string& name, const SourceRef& reader) {
  if (class_stores_.empty()) return Sym();
  PyObject* mro = type->tp_mro;
  if (mro == nullptr || !PyTuple_Check(mro)) return Unsupported("a class without an MRO");
  PyRef key = PyRef::Steal(py::FromUtf8(name));
  if (!key) {
    PyErr_Clear();
    return Unsupported("an attribute name UTF-8 cannot encode");
  }
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(mro); ++i) {
    PyObject* k = PyTuple_GET_ITEM(mro, i);
    if (auto it = class_stores_.find(k); it != class_stores_.end()) {
      const Sym& stores = it->second;
      for (size_t j = 0; j < stores->keys.size(); ++j) {
        if (PyUnicode_Compare(stores->keys[j].get(), key.get()) != 0) continue;
        if (reader == nullptr) {
          return Unsupported(absl::StrCat("class attribute '", name, "' the trace stored, read or shadowed through a class it cannot guard"));
        }
        // The class read is `k` itself or a subclass: guard that it is still the one whose MRO
        // leads to the stored class (the store's own source when it is `k`).
        if (k == reinterpret_cast<PyObject*>(type)) {
          if (reader->ToString() != stores->source->ToString()) guards_.Add(LeafGuard::Same(reader, stores->source, Here()));
        } else {
          guards_.Add(LeafGuard::Identity(reader, reinterpret_cast<PyObject*>(type), Here()));
        }
        return stores->items[j];
      }
    }
    // The class's own attribute (what an earlier class of the MRO has) comes first.
    PyObject* dict = reinterpret_cast<PyTypeObject*>(k)->tp_dict;
    if (!PyType_HasFeature(reinterpret_cast<PyTypeObject*>(k), Py_TPFLAGS_HEAPTYPE)) {
      // A builtin class: what it has cannot be a store of the trace; later classes are builtin too
      // in the MROs the trace meets (object last). Stop unless a store sits further on.
      for (Py_ssize_t j = i + 1; j < PyTuple_GET_SIZE(mro); ++j) {
        if (class_stores_.contains(PyTuple_GET_ITEM(mro, j))) return Unsupported("a class store behind a builtin base");
      }
      return Sym();
    }
    if (dict != nullptr && PyDict_GetItemWithError(dict, key.get()) != nullptr) return Sym();
    PyErr_Clear();
  }
  return Sym();
}

// `__name__` or `__qualname__` of a class (type's own descriptors) or of a function: a constant
// str. A builtin type's name never changes; a class's or function's can be reassigned
// (`cls.__name__ = ...`, functools.wraps), so a guard re-reads it where the object came from,
// which the trace must know. A function made by MAKE_FUNCTION in this trace is named by its code
// (nothing the trace follows renames it). Null: not one of these.
absl::StatusOr<Sym> Tracer::NameAttr(const Sym& obj, const std::string& name) {
  const bool qualified = name == "__qualname__";
  if (!qualified && name != "__name__") return Sym();
  PyObject* o = obj->obj.get();
  if (obj->kind == SymKind::kFunction && PyCode_Check(o)) {
    PyCodeObject* code = reinterpret_cast<PyCodeObject*>(o);
    return ConstSym(PyRef::Borrow(qualified ? code->co_qualname : code->co_name));
  }
  if (obj->kind == SymKind::kConst && (PyCFunction_Check(o) || Py_IS_TYPE(o, &PyMethodDescr_Type) ||
                                       Py_IS_TYPE(o, &PyClassMethodDescr_Type) || Py_IS_TYPE(o, &PyWrapperDescr_Type))) {
    // A builtin function's or method's name is fixed when it is made.
    PyRef value = PyRef::Steal(PyObject_GetAttrString(o, name.c_str()));
    if (value && PyUnicode_CheckExact(value.get())) return ConstSym(std::move(value));
    PyErr_Clear();
    return Sym();
  }
  const bool is_function = obj->kind == SymKind::kFunction && PyFunction_Check(o);
  const bool is_type = obj->kind == SymKind::kConst && PyType_Check(o);
  if (!is_function && !is_type) return Sym();
  PyRef key = PyRef::Steal(py::FromUtf8(name));
  if (is_type && cpython::LookupOnType(Py_TYPE(o), key.get()) !=
                     cpython::LookupOnType(&PyType_Type, key.get())) {
    return Sym();  // a metaclass with a __name__ of its own
  }
  PyRef value = PyRef::Steal(PyObject_GetAttr(o, key.get()));
  if (!value || !PyUnicode_CheckExact(value.get())) {
    PyErr_Clear();
    return Sym();
  }
  // A builtin type's name is fixed; so is that of a class the trace made (only the trace sees it).
  const bool fixed = is_type && (!(reinterpret_cast<PyTypeObject*>(o)->tp_flags & Py_TPFLAGS_HEAPTYPE) || IsTraceClass(o));
  if (fixed) return ConstSym(std::move(value));
  if (obj->source == nullptr) {
    return Unsupported(absl::StrCat("attribute '", name, "' of a ", is_type ? "class" : "function",
                                    " the trace cannot guard (no source)"));
  }
  const SourceRef source = obj->source;
  PyRef expected = value;
  auto same_name = std::make_shared<const LeafGuard::RelationFn>(
      [source, expected, qualified, is_type](const guards::FrameInputs& inputs) -> std::optional<bool> {
        PyObject* x = source->Resolve(inputs);
        if (x == nullptr) return std::nullopt;
        PyObject* current = nullptr;
        if (is_type) {
          if (!PyType_Check(x) || !(reinterpret_cast<PyTypeObject*>(x)->tp_flags & Py_TPFLAGS_HEAPTYPE)) return false;
          auto* heap = reinterpret_cast<PyHeapTypeObject*>(x);
          current = qualified ? heap->ht_qualname : heap->ht_name;
        } else {
          if (!PyFunction_Check(x)) return false;
          auto* fn = reinterpret_cast<PyFunctionObject*>(x);
          current = qualified ? fn->func_qualname : fn->func_name;
        }
        // Exact strs compare without running Python code.
        return current != nullptr && PyUnicode_CheckExact(current) &&
               PyUnicode_Compare(current, expected.get()) == 0;
      });
  guards_.Add(LeafGuard::Relation(source, absl::StrCat(source->ToString(), ".", name, " == ", ShortRepr(value.get())),
                                  true, std::move(same_name), Here()));
  return ConstSym(std::move(value));
}

// Attributes of constants: a module's globals, a class's attributes, or a pure constant's
// (folded by calling getattr for real).
absl::StatusOr<Sym> Tracer::ConstAttr(const Sym& obj, const std::string& name) {
  PyObject* o = obj->obj.get();
  if (IsTraceException(obj)) return ExceptionAttr(obj, name);
  if (PyType_Check(o)) {
    DT_ASSIGN_OR_RETURN(Sym pending, PendingClassAttr(reinterpret_cast<PyTypeObject*>(o), name, obj->source));
    if (pending != nullptr) return pending;
  }
  if (PyModule_Check(o) || PyType_Check(o)) {
    PyObject* own = PyModule_Check(o)
                        ? PyDict_GetItemString(PyModule_GetDict(o), name.c_str())
                        // The MRO lookup, not tp_dict: 3.12 keeps builtin types' dicts elsewhere.
                        : cpython::LookupOnType(reinterpret_cast<PyTypeObject*>(o), PyRef::Steal(py::FromUtf8(name)).get());
    if (own == nullptr) {
      return Unsupported(absl::StrCat("attribute '", name, "' of ", ShortRepr(o), " (the code raises or reads a class attribute)"));
    }
    // A constant of a class a `class` statement made in the trace: only the trace sees that class.
    if (obj->source == nullptr && IsTraceClass(o) && IsPureConstType(own)) return ConstSym(PyRef::Borrow(own));
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
  DT_ASSIGN_OR_RETURN(Sym named, NameAttr(obj, name));
  if (named != nullptr) return named;
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
