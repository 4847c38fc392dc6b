// interpreter/trace_objects.cc: objects the traced code makes by calling a plain class.
//
// `Point(x, y)` or a dataclass built inside compiled code is followed, not left to CPython: the
// trace stands for the new instance with a blank one of the class (made at trace time by
// object.__new__, which runs no user code), inlines __init__ on it, and records its attribute
// stores on the Sym. When the object leaves the trace (returned, stored, in a frame state at a
// break) it is built for real each run: object.__new__, then those attributes (an
// OutputSpec::kNewObject).
#include <Python.h>

#include "absl/strings/str_cat.h"
#include "interpreter/cpython_frame.h"
#include "interpreter/tracer_internal.h"

namespace dt::interpreter::trace {
namespace {

// A class whose instances the trace can make: a metaclass whose call is type's (abc.ABCMeta,
// which contextlib's managers have, adds no code to making an instance), object's __new__ and
// __setattr__, a __dict__ per instance, no __del__ (a blank instance is made and dropped at
// trace time), and __init__ a Python function or object's own.
absl::Status PlainClass(PyTypeObject* cls) {
  const std::string name = cls->tp_name;
  if (Py_TYPE(cls)->tp_call != PyType_Type.tp_call) {
    return Unsupported(absl::StrCat("making a ", name, " (its metaclass defines __call__)"));
  }
  if (cls->tp_new != PyBaseObject_Type.tp_new || cls->tp_setattro != PyBaseObject_Type.tp_setattro ||
      cls->tp_dictoffset == 0) {
    return Unsupported(absl::StrCat("making a ", name, " (a custom __new__ or __setattr__, a builtin base, or no __dict__)"));
  }
  PyRef del = PyRef::Steal(PyUnicode_FromString("__del__"));
  if (cpython::LookupOnType(cls, del.get()) != nullptr) {
    return Unsupported(absl::StrCat("making a ", name, " (it has __del__)"));
  }
  return absl::OkStatus();
}

}  // namespace

bool IsNamedTupleClass(PyObject* cls) {
  if (!PyType_CheckExact(cls)) return false;
  auto* type = reinterpret_cast<PyTypeObject*>(cls);
  if (type->tp_base != &PyTuple_Type || !PyType_HasFeature(type, Py_TPFLAGS_HEAPTYPE) || type->tp_dict == nullptr) {
    return false;
  }
  PyObject* fields = PyDict_GetItemString(type->tp_dict, "_fields");
  if (fields == nullptr || !PyTuple_CheckExact(fields) || PyDict_GetItemString(type->tp_dict, "_make") == nullptr) {
    return false;
  }
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(fields); ++i) {
    if (!PyUnicode_CheckExact(PyTuple_GET_ITEM(fields, i))) return false;
  }
  return true;
}

PyObject* MakeNamedTuple(PyObject* type, PyObject* items) {
  if (!IsNamedTupleClass(type)) return PyObject_CallOneArg(type, items);
  PyObject* args = PyTuple_Pack(1, items);
  if (args == nullptr) return nullptr;
  PyObject* result = PyTuple_Type.tp_new(reinterpret_cast<PyTypeObject*>(type), args, nullptr);
  Py_DECREF(args);
  return result;
}

// `Pair(x, y)` of a namedtuple class whose __new__, __init__ and __setattr__ are the ones
// collections.namedtuple gives it (the class's __new__ guarded by identity): a kTuple of its
// fields, named by the class. Arguments it cannot bind (CPython raises) stop the trace; so do
// defaults, which the trace does not read.
absl::StatusOr<Sym> Tracer::ConstructNamedTuple(PyTypeObject* cls, const SourceRef& cls_source, const std::vector<Sym>& args,
                                                const Kwargs& kwargs) {
  PyObject* dict = cls->tp_dict;
  PyObject* fields = PyDict_GetItemString(dict, "_fields");
  PyObject* new_fn = PyDict_GetItemString(dict, "__new__");
  PyRef init_name = PyRef::Steal(PyUnicode_FromString("__init__"));
  if (cls_source == nullptr || new_fn == nullptr || Py_TYPE(cls)->tp_call != PyType_Type.tp_call ||
      cpython::LookupOnType(cls, init_name.get()) != cpython::LookupOnType(&PyBaseObject_Type, init_name.get())) {
    return Unsupported(absl::StrCat("making a ", cls->tp_name, " (a named tuple changed after it was made)"));
  }
  const size_t n = static_cast<size_t>(PyTuple_GET_SIZE(fields));
  if (args.size() > n) return Unsupported(absl::StrCat("making a ", cls->tp_name, " with too many arguments"));
  std::vector<Sym> items(n);
  for (size_t i = 0; i < args.size(); ++i) items[i] = args[i];
  for (const auto& [name, value] : kwargs) {
    size_t at = n;
    for (size_t i = 0; i < n; ++i) {
      if (PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(fields, i), name.c_str()) == 0) at = i;
    }
    if (at == n || items[at] != nullptr) return Unsupported(absl::StrCat("making a ", cls->tp_name, ": keyword ", name));
    items[at] = value;
  }
  for (const Sym& item : items) {
    if (item == nullptr) return Unsupported(absl::StrCat("making a ", cls->tp_name, " from its defaults"));
    if (item->kind == SymKind::kNull) return Unsupported("a NULL field");
  }
  guards_.Add(LeafGuard::Identity(guards::AttrSource(cls_source, "__new__"), new_fn, Here()));
  Sym t = MakeSym(SymKind::kTuple);
  t->items = std::move(items);
  t->named_type = PyRef::Borrow(reinterpret_cast<PyObject*>(cls));
  return t;
}

absl::StatusOr<Sym> Tracer::ConstructObject(PyTypeObject* cls, const SourceRef& cls_source, std::vector<Sym> args,
                                            Kwargs kwargs) {
  if (IsNamedTupleClass(reinterpret_cast<PyObject*>(cls))) return ConstructNamedTuple(cls, cls_source, args, kwargs);
  DT_RETURN_IF_ERROR(PlainClass(cls));
  PyRef init_name = PyRef::Steal(PyUnicode_FromString("__init__"));
  PyObject* init = cpython::LookupOnType(cls, init_name.get());
  const bool object_init = init == nullptr || init == cpython::LookupOnType(&PyBaseObject_Type, init_name.get());
  if (!object_init && !PyFunction_Check(init)) {
    return Unsupported(absl::StrCat("making a ", cls->tp_name, " (its __init__ is not a Python function)"));
  }
  if (object_init && (!args.empty() || !kwargs.empty())) {
    return Raises(absl::StrCat("the traced code raises: ", cls->tp_name, "() takes no arguments"));
  }
  PyRef empty = PyRef::Steal(PyTuple_New(0));
  PyRef blank = PyRef::Steal(empty ? PyBaseObject_Type.tp_new(cls, empty.get(), nullptr) : nullptr);
  if (!blank) {
    PyErr_Clear();
    return Unsupported(absl::StrCat("making a ", cls->tp_name));
  }
  Sym self = MakeSym(SymKind::kObject);
  self->obj = std::move(blank);
  self->made_by_trace = true;
  self->class_source = cls_source;
  if (object_init) return self;
  Sym fn = MakeSym(SymKind::kFunction);
  fn->obj = PyRef::Borrow(init);
  args.insert(args.begin(), self);
  DT_ASSIGN_OR_RETURN(Sym result, Inline(fn, std::move(args), std::move(kwargs)));
  if (result->kind != SymKind::kConst || result->obj.get() != Py_None) {
    return Raises("the traced code raises: __init__() should return None");
  }
  return self;
}

}  // namespace dt::interpreter::trace
