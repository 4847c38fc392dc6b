// interpreter/trace_super.cc: super(), with no arguments or two, and 3.12's LOAD_SUPER_ATTR.
//
// A super object is a kSuper Sym (the class the search starts after, and self); it never needs
// to exist at run time, because the trace only reads attributes through it: `super().forward(x)`
// and `super().__init__(...)` become the base class's Python function bound to self, inlined
// like any method. The attribute is found as CPython's super does: along type(self)'s MRO,
// after the given class, in each class's own dict.
#include <Python.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "interpreter/cpython_frame.h"
#include "interpreter/py_str.h"
#include "interpreter/tracer_internal.h"

namespace dt::interpreter::trace {
namespace {

// `cls`'s own attribute, without the MRO. Heap types keep their dict in tp_dict; builtin types
// (object) are asked through the type lookup, which for them finds what their own dict holds.
PyObject* OwnClassAttr(PyTypeObject* cls, PyObject* name) {
  if (PyType_HasFeature(cls, Py_TPFLAGS_HEAPTYPE) && cls->tp_dict != nullptr) {
    PyObject* attr = PyDict_GetItemWithError(cls->tp_dict, name);
    if (attr == nullptr) PyErr_Clear();
    return attr;
  }
  return cpython::LookupOnType(cls, name);
}

PyObject* ObjectInit() {
  static PyObject* init = [] {
    PyRef name = PyRef::Steal(PyUnicode_FromString("__init__"));
    return cpython::LookupOnType(&PyBaseObject_Type, name.get());
  }();
  return init;
}

bool FirstArgumentIsCell(PyCodeObject* code) {
  PyRef cells = PyRef::Steal(PyCode_GetCellvars(code));
  PyObject* first = cpython::LocalNameObject(code, 0);
  const int found = cells && first != nullptr ? PySequence_Contains(cells.get(), first) : -1;
  PyErr_Clear();
  return found == 1;
}

Sym Bound(PyObject* function, const Sym& self) {
  Sym s = MakeSym(SymKind::kBoundMethod);
  s->obj = PyRef::Borrow(function);
  s->items.push_back(self);
  return s;
}

}  // namespace

absl::StatusOr<Sym> Tracer::SuperOf(const Sym& cls, const Sym& self) {
  if (cls->kind != SymKind::kConst || !PyType_Check(cls->obj.get())) {
    return Unsupported(absl::StrCat("super() of a ", Describe(cls)));
  }
  if (self->kind != SymKind::kObject) return Unsupported(absl::StrCat("super() bound to a ", Describe(self)));
  if (!PyType_IsSubtype(Py_TYPE(self->obj.get()), reinterpret_cast<PyTypeObject*>(cls->obj.get()))) {
    return Raises("the traced code raises TypeError: super(type, obj): obj must be an instance or subtype of type");
  }
  Sym s = MakeSym(SymKind::kSuper);
  s->obj = cls->obj;
  s->items.push_back(self);
  return s;
}

// super() in a method: the class from its __class__ cell, self from its first argument (the
// cell's contents when that argument is a cell too), as CPython reads them from the frame.
absl::StatusOr<Sym> Tracer::ZeroArgumentSuper() {
  TFrame& f = *current_;
  if (f.code->co_argcount == 0) return Raises("the traced code raises RuntimeError: super(): no arguments");
  Sym cls;
  for (int i = f.code->co_nlocalsplus - f.code->co_nfreevars; i < f.code->co_nlocalsplus; ++i) {
    if (PyUnicode_CompareWithASCIIString(cpython::LocalNameObject(f.code, i), "__class__") == 0) {
      const Sym& cell = f.locals[i];
      if (cell != nullptr && cell->kind == SymKind::kCell && !cell->items.empty()) cls = cell->items[0];
    }
  }
  if (cls == nullptr) return Raises("the traced code raises RuntimeError: super(): __class__ cell not found");
  DT_ASSIGN_OR_RETURN(Sym self, LoadLocal(f, 0));
  // Only a first argument that is itself a cell variable is read through its cell; a cell
  // object passed as self is self (and super() raises on it).
  if (self->kind == SymKind::kCell && FirstArgumentIsCell(f.code)) {
    self = self->items.empty() ? nullptr : self->items[0];
  }
  if (self == nullptr) return Raises("the traced code raises RuntimeError: super(): arg[0] deleted");
  return SuperOf(cls, self);
}

absl::StatusOr<Sym> Tracer::MakeSuper(const std::vector<Sym>& args, const Kwargs& kwargs) {
  if (!kwargs.empty()) return Raises("the traced code raises TypeError: super() takes no keyword arguments");
  if (args.size() == 2) return SuperOf(args[0], args[1]);
  if (args.empty()) return ZeroArgumentSuper();
  return Unsupported("super() with one argument (an unbound super object)");
}

absl::StatusOr<Sym> Tracer::SuperAttr(const Sym& super, const std::string& name) {
  const Sym& self = super->items[0];
  PyObject* mro = Py_TYPE(self->obj.get())->tp_mro;
  PyRef key = PyRef::Steal(py::FromUtf8(name));
  if (!key || mro == nullptr) {
    PyErr_Clear();
    return Unsupported("super() attribute lookup");
  }
  Py_ssize_t i = 0;
  const Py_ssize_t n = PyTuple_GET_SIZE(mro);
  while (i < n && PyTuple_GET_ITEM(mro, i) != super->obj.get()) ++i;
  for (++i; i < n; ++i) {
    PyObject* attr = OwnClassAttr(reinterpret_cast<PyTypeObject*>(PyTuple_GET_ITEM(mro, i)), key.get());
    if (attr == nullptr) continue;
    if (PyFunction_Check(attr) || attr == ObjectInit()) return Bound(attr, self);
    if (Py_IS_TYPE(attr, &PyStaticMethod_Type) || Py_IS_TYPE(attr, &PyClassMethod_Type)) {
      PyRef function = PyRef::Steal(PyObject_GetAttrString(attr, "__func__"));
      if (!function || !PyFunction_Check(function.get())) {
        PyErr_Clear();
        return Unsupported(absl::StrCat("super().", name, " wraps a non-function"));
      }
      if (Py_IS_TYPE(attr, &PyClassMethod_Type)) {
        return Bound(function.get(), ConstSym(PyRef::Borrow(reinterpret_cast<PyObject*>(Py_TYPE(self->obj.get())))));
      }
      Sym s = MakeSym(SymKind::kFunction);
      s->obj = std::move(function);
      return s;
    }
    return Unsupported(absl::StrCat("super().", name, " is a ", Py_TYPE(attr)->tp_name));
  }
  return Raises(absl::StrCat("the traced code raises AttributeError: 'super' object has no attribute '", name, "'"));
}

// 3.12: [super, class, self] -> the attribute (with a NULL below it for a method call).
absl::Status Tracer::DoLoadSuperAttr(TFrame& f, const Instr& in) {
  DT_RETURN_IF_ERROR(f.Need(3, in));
  auto& st = f.stack;
  const Sym& global_super = st[st.size() - 3];
  if (global_super->kind != SymKind::kConst || global_super->obj.get() != reinterpret_cast<PyObject*>(&PySuper_Type)) {
    return Unsupported("LOAD_SUPER_ATTR with `super` bound to something else");
  }
  DT_ASSIGN_OR_RETURN(Sym super, SuperOf(st[st.size() - 2], st.back()));
  DT_ASSIGN_OR_RETURN(const std::string name, NameText(in.argval.get()));
  DT_ASSIGN_OR_RETURN(Sym attr, SuperAttr(super, name));
  st.resize(st.size() - 3);
  if (in.arg & 1) st.push_back(MakeSym(SymKind::kNull));
  st.push_back(std::move(attr));
  return absl::OkStatus();
}

// A bound method whose function is not a Python function: object.__init__ reached through
// super(), or a known context manager's __exit__. Null when it is neither.
absl::StatusOr<Sym> Tracer::CallBoundSlot(const Sym& method, const std::vector<Sym>& args, const Kwargs& kwargs) {
  if (method->obj.get() == ObjectInit()) {
    if (!args.empty() || !kwargs.empty()) {
      return Raises("the traced code raises TypeError: object.__init__() takes exactly one argument");
    }
    return ConstSym(PyRef::Borrow(Py_None));
  }
  return CallKnownExit(method, args);
}

}  // namespace dt::interpreter::trace
