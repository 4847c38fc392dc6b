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

absl::StatusOr<Sym> Tracer::ConstructObject(PyTypeObject* cls, const SourceRef& cls_source, std::vector<Sym> args,
                                            Kwargs kwargs) {
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
