// interpreter/trace_objects.cc: objects the traced code makes by calling a plain class.
//
// `Point(x, y)` or a dataclass built inside compiled code is followed, not left to CPython: the
// trace stands for the new instance with a blank one of the class (made at trace time by
// object.__new__, which runs no user code), inlines __init__ on it, and records its attribute
// stores on the Sym. When the object leaves the trace (returned, stored, in a frame state at a
// break) it is built for real each run: object.__new__, then those attributes (an
// OutputSpec::kNewObject).
#include <Python.h>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "interpreter/cpython_frame.h"
#include "interpreter/tracer_internal.h"

namespace dt::interpreter::trace {
namespace {

// Whether `name` (__setattr__ or __delattr__) of `cls` is object's, or the one dataclasses wrote
// for a frozen dataclass: the class in the MRO that defines it carries __dataclass_params__ with
// `frozen` set in its own __dict__ (dataclasses refuses a user's own __setattr__ when frozen).
bool ObjectsOrFrozenDataclasses(PyTypeObject* cls, const char* name) {
  PyObject* mro = cls->tp_mro;
  if (mro == nullptr || !PyTuple_Check(mro)) return false;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(mro); ++i) {
    auto* base = reinterpret_cast<PyTypeObject*>(PyTuple_GET_ITEM(mro, i));
    if (base == &PyBaseObject_Type) return true;
    if (base->tp_dict == nullptr || PyDict_GetItemString(base->tp_dict, name) == nullptr) continue;
    PyObject* params = PyDict_GetItemString(base->tp_dict, "__dataclass_params__");
    if (params == nullptr) return false;
    PyRef frozen = PyRef::Steal(PyObject_GetAttrString(params, "frozen"));
    if (!frozen) PyErr_Clear();
    return frozen && frozen.get() == Py_True;
  }
  return false;
}

// A frozen dataclass's __init__ stores its fields with object.__setattr__, which the trace
// follows (ObjectSetattr); any other store on the instance runs the class's own __setattr__,
// which the trace leaves to CPython (it raises FrozenInstanceError).
bool FrozenDataclass(PyTypeObject* cls) {
  return ObjectsOrFrozenDataclasses(cls, "__setattr__") && ObjectsOrFrozenDataclasses(cls, "__delattr__");
}

// A class whose instances the trace can make: a metaclass whose call is type's (abc.ABCMeta,
// which contextlib's managers have, adds no code to making an instance), object's __new__ and
// __setattr__ (or a frozen dataclass's), a __dict__ per instance, no __del__ (a blank instance
// is made and dropped at trace time), and __init__ a Python function or object's own.
absl::Status PlainClass(PyTypeObject* cls) {
  const std::string name = cls->tp_name;
  if (Py_TYPE(cls)->tp_call != PyType_Type.tp_call) {
    return Unsupported(absl::StrCat("making a ", name, " (its metaclass defines __call__)"));
  }
  const bool object_setattr = cls->tp_setattro == PyBaseObject_Type.tp_setattro || FrozenDataclass(cls);
  if (cls->tp_new != PyBaseObject_Type.tp_new || !object_setattr || cls->tp_dictoffset == 0) {
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
  if (cls_source != nullptr) {
    // Read through the class, so its defaults and closure (a dataclass's default factories) are
    // found from a source, and a replaced __init__ is noticed.
    fn->source = guards::AttrSource(cls_source, "__init__");
    guards_.Add(LeafGuard::Identity(fn->source, init, Here()));
  }
  args.insert(args.begin(), self);
  DT_ASSIGN_OR_RETURN(Sym result, Inline(fn, std::move(args), std::move(kwargs)));
  if (result->kind != SymKind::kConst || result->obj.get() != Py_None) {
    return Raises("the traced code raises: __init__() should return None");
  }
  return self;
}

namespace {

// Whether `code`, a class body, only stores constants (and __module__, __qualname__).
absl::Status ConstantClassBody(PyObject* code) {
  if (!PyCode_Check(code)) return Unsupported("a class statement whose body is not a code object");
  DT_ASSIGN_OR_RETURN(std::shared_ptr<const DecodedCode> decoded, Decode(reinterpret_cast<PyCodeObject*>(code)));
  static const auto* allowed = new absl::flat_hash_set<std::string>{
      "RESUME", "NOP", "CACHE", "LOAD_CONST", "STORE_NAME", "BUILD_TUPLE", "RETURN_VALUE", "RETURN_CONST", "LOAD_NAME"};
  for (const Instr& in : decoded->instrs) {
    if (!allowed->contains(in.opname)) {
      return Unsupported(absl::StrCat("a class body with ", in.opname, " (only constant attributes are traced)"));
    }
    if (in.opname == "LOAD_NAME" && !(in.argval && PyUnicode_Check(in.argval.get()) &&
                                      PyUnicode_CompareWithASCIIString(in.argval.get(), "__name__") == 0)) {
      return Unsupported("a class body that reads a name other than __name__");
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Tracer::DoLoadBuildClass(TFrame& f, const Instr& in) {
  PyObject* build = PyDict_GetItemString(frame_.inputs.builtins, "__build_class__");  // borrowed
  PyObject* globals_builtins = PyDict_GetItemString(f.globals, "__builtins__");
  if (globals_builtins != nullptr && PyModule_Check(globals_builtins)) globals_builtins = PyModule_GetDict(globals_builtins);
  if (globals_builtins != frame_.inputs.builtins) return Unsupported("a class statement in a function with different builtins");
  if (build == nullptr || !PyCFunction_Check(build) ||
      std::string_view(reinterpret_cast<PyCFunctionObject*>(build)->m_ml->ml_name) != "__build_class__") {
    return Unsupported("builtins.__build_class__ is replaced");
  }
  // The statement's shape, read ahead so that a class the trace will not make breaks here, before
  // anything of it is traced: LOAD_CONST body, MAKE_FUNCTION 0, LOAD_CONST name, (PRECALL) CALL 2.
  auto at = f.decoded->index_of_offset.find(in.offset);
  const std::vector<Instr>& instrs = f.decoded->instrs;
  const size_t i = at == f.decoded->index_of_offset.end() ? instrs.size() : static_cast<size_t>(at->second);
  size_t call = i + 4;
  if (call < instrs.size() && instrs[call].op == Op::kPrecall) ++call;
  if (call >= instrs.size() || instrs[i + 1].opname != "LOAD_CONST" || instrs[i + 2].op != Op::kMakeFunction ||
      instrs[i + 2].arg != 0 || instrs[i + 3].opname != "LOAD_CONST" || instrs[call].op != Op::kCall || instrs[call].arg != 2) {
    return Unsupported("a class statement with bases, keywords or a closure");
  }
  DT_RETURN_IF_ERROR(ConstantClassBody(instrs[i + 1].argval.get()));
  guards_.Add(LeafGuard::Identity(guards::BuiltinSource("__build_class__"), build, Here()));
  f.stack.push_back(ConstSym(PyRef::Borrow(build)));
  return absl::OkStatus();
}

bool Tracer::IsTraceClass(PyObject* obj) const {
  for (const PyRef& cls : trace_classes_) {
    if (cls.get() == obj) return true;
  }
  return false;
}

// `class Name: ...` with no bases, keywords, decorators' effects or methods: a body that only
// stores constants (`name = "enc"`, `dims = (2, 3)`, `pass`). Running such a body and type()
// runs no user code, so the class is made here, at trace time; CPython would make a new one on
// every call, which no one can tell apart as long as the class and its instances stay inside
// the trace (ToOutput refuses them). Anything else in the body is CPython's to run.
absl::StatusOr<Sym> Tracer::BuildClass(const std::vector<Sym>& args, const Kwargs& kwargs) {
  if (!kwargs.empty() || args.size() != 2) return Unsupported("a class statement with bases or keywords");
  const Sym& body = args[0];
  const Sym& name = args[1];
  if (body->kind != SymKind::kFunction || !PyCode_Check(body->obj.get()) || body->defaults || body->kwdefaults ||
      body->closure || body->globals == nullptr || name->kind != SymKind::kConst || !PyUnicode_CheckExact(name->obj.get())) {
    return Unsupported("a class statement whose body is not a plain function");
  }
  DT_RETURN_IF_ERROR(ConstantClassBody(body->obj.get()));
  // __module__ comes from the globals' __name__, read when the class is made.
  // (guarded: the class body reads it by name, as LOAD_GLOBAL would).
  PyObject* module_name = PyDict_GetItemString(body->globals, "__name__");
  if (body->globals != frame_.inputs.globals || module_name == nullptr || !PyUnicode_CheckExact(module_name)) {
    return Unsupported("a class statement in a function of another module, or without a module __name__");
  }
  DT_RETURN_IF_ERROR(Wrap(module_name, guards::GlobalSource("__name__")).status());
  PyRef fn = PyRef::Steal(PyFunction_New(body->obj.get(), body->globals));
  PyObject* build = PyDict_GetItemString(frame_.inputs.builtins, "__build_class__");
  PyRef cls = fn && build ? PyRef::Steal(PyObject_CallFunctionObjArgs(build, fn.get(), name->obj.get(), nullptr)) : PyRef();
  if (!cls || !PyType_CheckExact(cls.get())) {
    PyErr_Clear();
    return Unsupported("making a class at trace time failed");
  }
  trace_classes_.push_back(cls);
  return ConstSym(std::move(cls));
}

// `object.__setattr__(obj, "name", v)` on an object the trace made: a store on it that skips
// its class's __setattr__ (how a frozen dataclass's __init__ sets its fields).
absl::StatusOr<Sym> Tracer::ObjectSetattr(const std::vector<Sym>& args, const Kwargs& kwargs) {
  if (args.size() != 3 || !kwargs.empty() || args[0]->kind != SymKind::kObject || !args[0]->made_by_trace ||
      args[1]->kind != SymKind::kConst || !PyUnicode_CheckExact(args[1]->obj.get())) {
    return Unsupported("object.__setattr__ other than on an object the traced code made, with a str name");
  }
  DT_RETURN_IF_ERROR(StoreAttr(args[0], args[1]->obj.get(), args[2], /*through_object_setattr=*/true));
  return ConstSym(PyRef::Borrow(Py_None));
}

bool IsObjectSetattr(PyObject* fn) {
  static PyObject* const object_setattr =
      PyObject_GetAttrString(reinterpret_cast<PyObject*>(&PyBaseObject_Type), "__setattr__");
  return fn != nullptr && fn == object_setattr;
}

}  // namespace dt::interpreter::trace
