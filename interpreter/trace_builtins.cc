// interpreter/trace_builtins.cc: calls of Python builtins.
#include <Python.h>

#include <algorithm>
#include <optional>
#include <string_view>
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

// A builtin of the dyntrace module, by name.
bool IsDyntraceFunction(PyObject* fn, std::string_view name) {
  if (!PyCFunction_Check(fn)) return false;
  PyObject* self = PyCFunction_GET_SELF(fn);
  if (self == nullptr || !PyModule_Check(self)) return false;
  const char* module = PyModule_GetName(self);
  if (module == nullptr) {
    PyErr_Clear();
    return false;
  }
  return std::string_view(reinterpret_cast<PyCFunctionObject*>(fn)->m_ml->ml_name) == name &&
         std::string_view(module) == "dyntrace";
}

namespace {

bool IsDyntraceTensorFunction(PyObject* fn) { return IsDyntraceFunction(fn, "tensor"); }

// Builtins without side effects whose results the trace may fold or replay: the listed ones, the
// methods of immutable constants ("abc".startswith, (1, 2).index), the math module, and facts
// fixed for the life of the process (dyntrace.cuda.is_available()).
bool IsPureBuiltin(PyObject* fn, PyObject* builtins) {
  static const char* kPure[] = {"abs", "min", "max", "float", "int", "bool", "str", "round", "len",
                                "range", "tuple", "divmod", "pow", "sum", "repr", "hash", "chr",
                                "ord", "any", "all", "sorted", "slice", "type", "ascii", "format", "bytes"};
  for (const char* name : kPure) {
    if (fn == PyDict_GetItemString(builtins, name)) return true;
  }
  if (PyCFunction_Check(fn)) {
    PyObject* self = PyCFunction_GET_SELF(fn);
    if (self != nullptr && !PyModule_Check(self) && IsPureConstType(self) && !PyList_Check(self)) return true;
    PyObject* module_name = reinterpret_cast<PyCFunctionObject*>(fn)->m_module;
    if (module_name != nullptr && PyUnicode_Check(module_name) &&
        PyUnicode_CompareWithASCIIString(module_name, "math") == 0) {
      return true;
    }
  }
  // An unbound method of an immutable builtin type (`str.lower` as a sort key): on pure constant
  // arguments it is as pure as the bound method.
  if (Py_IS_TYPE(fn, &PyMethodDescr_Type)) {
    PyTypeObject* owner = reinterpret_cast<PyDescrObject*>(fn)->d_type;
    if (owner == &PyUnicode_Type || owner == &PyBytes_Type || owner == &PyLong_Type || owner == &PyFloat_Type ||
        owner == &PyComplex_Type || owner == &PyTuple_Type) {
      return true;
    }
  }
  return py::IsProcessConstantFunction(fn);
}

// dict.fromkeys as the class attribute gives it (a builtin method bound to dict itself).
bool IsDictFromkeys(PyObject* fn) {
  return PyCFunction_Check(fn) && PyCFunction_GET_SELF(fn) == reinterpret_cast<PyObject*>(&PyDict_Type) &&
         std::string_view(reinterpret_cast<PyCFunctionObject*>(fn)->m_ml->ml_name) == "fromkeys";
}

}  // namespace

absl::StatusOr<PyRef> Tracer::ConstKeywords(const Kwargs& kwargs) {
  if (kwargs.empty()) return PyRef();
  PyRef kw = PyRef::Steal(PyDict_New());
  for (const auto& [k, v] : kwargs) {
    DT_ASSIGN_OR_RETURN(PyRef c, ConstValue(v));
    PyRef key = PyRef::Steal(py::FromUtf8(k));
    if (!kw || !key || PyDict_SetItem(kw.get(), key.get(), c.get()) < 0) {
      PyErr_Clear();
      return Unsupported("building keyword arguments failed");
    }
  }
  return kw;
}

// dyntrace.tensor(constants): made now, copied into each run by a constant node.
absl::StatusOr<Sym> Tracer::CallTensorConstructor(PyObject* fn, const std::vector<Sym>& args, const Kwargs& kwargs) {
  PyRef tuple = PyRef::Steal(PyTuple_New(args.size()));
  for (size_t i = 0; i < args.size(); ++i) {
    auto c = ConstValue(args[i]);
    if (!c.ok()) return Unsupported("dyntrace.tensor() of values only known at run time");
    PyTuple_SET_ITEM(tuple.get(), i, c->Release());
  }
  DT_ASSIGN_OR_RETURN(PyRef kw, ConstKeywords(kwargs));
  PyRef made = PyRef::Steal(PyObject_Call(fn, tuple.get(), kw.get()));
  if (!made) {
    PyErr_Clear();
    return Raises("the traced code raises in dyntrace.tensor()");
  }
  const Tensor& value = py::Unwrap(made.get());
  const OpDef* op = OpRegistry::Get().Find("_tensor_constant");
  Tensor meta(Storage::Allocate(0, Device::Meta()), value.sizes(), value.strides(), 0, value.dtype());
  touched_tensors_ = true;
  std::vector<ValueId> ids = graph_->AddNode(op, {GraphArg{ArgValue(value)}}, {meta}, false, HereLocation());
  Sym s = MakeSym(SymKind::kTensor);
  s->value = ids[0];
  s->meta = meta;
  value_device_[s->value] = value.device();
  return s;
}

absl::StatusOr<Sym> Tracer::BuiltinLen(const Sym& a) {
  switch (a->kind) {
    case SymKind::kTuple:
    case SymKind::kList:
    case SymKind::kDict: return ConstSym(PyRef::Steal(PyLong_FromSize_t(a->items.size())));
    case SymKind::kShape: return ConstSym(PyRef::Steal(PyLong_FromLongLong(a->items[0]->meta.ndim())));
    case SymKind::kRunSeq: return RunSequenceLength(a);
    case SymKind::kTensor:
      if (a->meta.ndim() == 0) return Raises("the traced code raises: len() of a 0-d tensor");
      return SizeOf(a, 0);
    case SymKind::kConst:
    case SymKind::kNull:
    case SymKind::kIter:
    case SymKind::kCell:
    case SymKind::kBoundMethod:
    case SymKind::kOpMethod:
    case SymKind::kFunction:
    case SymKind::kObject:
    case SymKind::kSlice:
    case SymKind::kNumber:
    case SymKind::kRunIter:
    case SymKind::kPartial:
    case SymKind::kGenManager:
    case SymKind::kSuper: break;
    case SymKind::kSet: {
      DT_ASSIGN_OR_RETURN(PyRef value, SetValue(a));
      return ConstSym(PyRef::Steal(PyLong_FromSsize_t(PySet_GET_SIZE(value.get()))));
    }
  }
  return Sym();  // not decided here: a pure call on a constant, or unsupported
}

namespace {

// Whether isinstance(it, cls) is False for any iterator the trace holds, whose exact type it does
// not keep (a generator, a list or dict iterator, a dict view, zip, map ...): `cls` (a plain class
// or a tuple of them) is no base of any of those types, as with `isinstance(params, Tensor)` in
// clip_grad_norm_.
bool NoIteratorIsInstance(PyObject* cls) {
  static PyTypeObject* const kIteratorTypes[] = {
      &PyGen_Type,         &PyListIter_Type,    &PyTupleIter_Type,    &PyRangeIter_Type, &PySetIter_Type,
      &PyDictKeys_Type,    &PyDictValues_Type,  &PyDictItems_Type,    &PyDictIterKey_Type,
      &PyDictIterValue_Type, &PyDictIterItem_Type, &PyZip_Type,       &PyMap_Type,       &PyFilter_Type,
      &PyEnum_Type,        &PyReversed_Type,    &PyCallIter_Type,     &PySeqIter_Type};
  const bool tuple = PyTuple_Check(cls);
  const Py_ssize_t n = tuple ? PyTuple_GET_SIZE(cls) : 1;
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* c = tuple ? PyTuple_GET_ITEM(cls, i) : cls;
    if (!PyType_Check(c) || !Py_IS_TYPE(c, &PyType_Type)) return false;  // its own instance check
    for (PyTypeObject* t : kIteratorTypes) {
      if (PyType_IsSubtype(t, reinterpret_cast<PyTypeObject*>(c))) return false;
    }
  }
  return true;
}

}  // namespace

absl::StatusOr<Sym> Tracer::BuiltinIsinstance(const Sym& value, const Sym& classes) {
  DT_ASSIGN_OR_RETURN(PyRef cls, ConstValue(classes));
  if (value->kind == SymKind::kIter) {
    if (NoIteratorIsInstance(cls.get())) return ConstSym(PyRef::Borrow(Py_False));
    return Unsupported("isinstance() of an iterator with a class an iterator may belong to");
  }
  PyObject* probe = nullptr;
  PyRef holder;  // an empty container of the value's exact type
  switch (value->kind) {
    case SymKind::kTensor: {
      // A traced tensor is probed through a meta stand-in, which carries no flags: a class whose
      // metaclass decides instances itself (nn.Parameter reads a tensor's parameter flag) must
      // see the real tensor, so CPython runs that call.
      const bool plain_classes = PyType_Check(cls.get())
                                     ? Py_IS_TYPE(cls.get(), &PyType_Type)
                                     : PyTuple_Check(cls.get());
      for (Py_ssize_t i = 0; plain_classes && PyTuple_Check(cls.get()) && i < PyTuple_GET_SIZE(cls.get()); ++i) {
        if (!Py_IS_TYPE(PyTuple_GET_ITEM(cls.get(), i), &PyType_Type)) {
          return Unsupported("isinstance() of a tensor with a class that checks instances its own way");
        }
      }
      if (!plain_classes) return Unsupported("isinstance() of a tensor with a class that checks instances its own way");
      DT_ASSIGN_OR_RETURN(probe, ToPython(value));
      break;
    }
    case SymKind::kConst:
    case SymKind::kObject:
    case SymKind::kRunSeq:  // its exact type is guarded
    case SymKind::kFunction: probe = value->obj.get(); break;
    case SymKind::kNumber: {
      // A read number's type is guarded; a computed one's may depend on the values (`n ** k`,
      // `max(n, 0.5)`), so it is specialised.
      const ScalarInstr::Kind made_by = scalar_program_[value->value].kind;
      if (made_by == ScalarInstr::Kind::kInput || made_by == ScalarInstr::Kind::kTensorSize) {
        probe = value->obj.get();
        break;
      }
      DT_ASSIGN_OR_RETURN(Sym constant, Specialize(value));
      probe = constant->obj.get();
      holder = constant->obj;
      break;
    }
    case SymKind::kTuple: holder = PyRef::Steal(PyTuple_New(0)); break;
    case SymKind::kList: holder = PyRef::Steal(PyList_New(0)); break;
    case SymKind::kDict: holder = PyRef::Steal(PyDict_New()); break;
    case SymKind::kSet: holder = PyRef::Steal(PySet_New(nullptr)); break;
    case SymKind::kNull:
    case SymKind::kIter:
    case SymKind::kCell:
    case SymKind::kBoundMethod:
    case SymKind::kOpMethod:
    case SymKind::kSlice:
    case SymKind::kShape:
    case SymKind::kRunIter:
    case SymKind::kPartial:
    case SymKind::kGenManager:
    case SymKind::kSuper: return Unsupported("isinstance() of an unusual value");
  }
  if (probe == nullptr) probe = holder.get();
  const int r = probe != nullptr ? PyObject_IsInstance(probe, cls.get()) : -1;
  if (r < 0) {
    PyErr_Clear();
    return Raises("the traced code raises in isinstance()");
  }
  return ConstSym(PyRef::Borrow(r ? Py_True : Py_False));
}

namespace {

// An iterator the trace made (not a dict view, which is reread): zip()/enumerate() over one
// read it lazily.
bool IsTracedIterator(const Sym& s) { return s->kind == SymKind::kIter && !s->dict_view; }

}  // namespace

// zip()/enumerate() with an iterator among its arguments: the sources are iterated lazily, by
// NextItem, so each is advanced exactly as far as CPython's zip would advance it.
absl::StatusOr<Sym> Tracer::LazyZip(const std::vector<Sym>& args, bool enumerate, bool strict) {
  if (strict) return Unsupported("zip(strict=True) of an iterator");
  if (enumerate && args.size() > 2) return Raises("the traced code raises: enumerate() takes at most 2 arguments");
  Sym it = MakeSym(SymKind::kIter);
  for (size_t i = 0; i < (enumerate ? 1 : args.size()); ++i) {
    if (IsTracedIterator(args[i])) {
      it->zip_sources.push_back(args[i]);
    } else {
      DT_ASSIGN_OR_RETURN(Sym source, IteratorOf(args[i], /*loop_iterator=*/false));
      it->zip_sources.push_back(std::move(source));
    }
  }
  if (enumerate) {
    it->enumerate_start = PyRef::Steal(PyLong_FromLong(0));
    if (args.size() > 1) {
      DT_ASSIGN_OR_RETURN(it->enumerate_start, ConstValue(args[1]));
      if (!PyLong_Check(it->enumerate_start.get())) return Raises("the traced code raises: enumerate() start is not an integer");
    }
  }
  return it;
}

// zip(*args) and enumerate(iterable, start): iterators of tuples, unrolled (lazy over iterators).
absl::StatusOr<Sym> Tracer::BuiltinZip(const std::vector<Sym>& args, bool enumerate, bool strict) {
  bool over_an_iterator = false;
  for (size_t i = 0; i < (enumerate ? 1 : args.size()); ++i) over_an_iterator |= IsTracedIterator(args[i]);
  if (over_an_iterator) return LazyZip(args, enumerate, strict);
  std::vector<std::vector<Sym>> seqs;
  if (enumerate) {
    if (args.size() > 2) return Raises("the traced code raises: enumerate() takes at most 2 arguments");
    DT_ASSIGN_OR_RETURN(std::vector<Sym> items, Iterate(args[0]));
    PyRef start = PyRef::Steal(PyLong_FromLong(0));
    if (args.size() > 1) {
      DT_ASSIGN_OR_RETURN(start, ConstValue(args[1]));
      if (!PyLong_Check(start.get())) return Raises("the traced code raises: enumerate() start is not an integer");
    }
    std::vector<Sym> indices;
    for (size_t i = 0; i < items.size(); ++i) {
      PyRef offset = PyRef::Steal(PyLong_FromSize_t(i));
      indices.push_back(ConstSym(PyRef::Steal(PyNumber_Add(start.get(), offset.get()))));
    }
    seqs = {indices, items};
  } else {
    for (const Sym& a : args) {
      DT_ASSIGN_OR_RETURN(std::vector<Sym> items, Iterate(a));
      seqs.push_back(items);
    }
  }
  size_t n = seqs[0].size();
  for (const auto& s : seqs) n = std::min(n, s.size());
  for (const auto& s : seqs) {
    if (strict && s.size() != n) return Raises("the traced code raises ValueError: zip(strict=True) of unequal lengths");
  }
  Sym it = MakeSym(SymKind::kIter);
  for (size_t i = 0; i < n; ++i) {
    Sym t = MakeSym(SymKind::kTuple);
    for (const auto& s : seqs) t->items.push_back(s[i]);
    it->items.push_back(t);
  }
  return it;
}

// id(x) of a value of the caller read from where the guards can find it again (a module, a
// parameter reached from an argument): that object's id now, with a guard that the source still
// gives the same object, so code keyed by ids (PyTorch's module walks dedupe by them) folds, and a
// replaced object recompiles. A value the trace made is a new object every call, and a constant
// guarded by value may be another object next time: their ids are unknown here.
absl::StatusOr<Sym> Tracer::BuiltinId(const Sym& a) {
  const bool made_here = (a->kind == SymKind::kObject && a->made_by_trace) ||
                         (a->kind == SymKind::kTensor && a->value >= 0 && graph_->value(a->value).producer >= 0);
  const bool caller_kind = a->kind == SymKind::kObject || a->kind == SymKind::kTensor ||
                           a->kind == SymKind::kList || a->kind == SymKind::kDict || a->kind == SymKind::kFunction;
  if (a->source == nullptr || made_here || !caller_kind) {
    return Unsupported(absl::StrCat("id() of a ", Describe(a), " the trace cannot find again from its arguments"));
  }
  PyObject* obj = a->source->Resolve(frame_.inputs);
  if (obj == nullptr) {
    PyErr_Clear();
    return Unsupported(absl::StrCat("id() of ", a->source->ToString(), ", which does not resolve"));
  }
  guards_.Add(LeafGuard::Identity(a->source, obj, Here()));
  return ConstSym(PyRef::Steal(PyLong_FromVoidPtr(obj)));
}

// Builtins the trace follows on symbolic values. Null: `fn` is not one of them (for these
// arguments).
absl::StatusOr<Sym> Tracer::CallFollowedBuiltin(PyObject* fn, const std::vector<Sym>& args, const Kwargs& kwargs) {
  auto is = [&](const char* name) { return fn == PyDict_GetItemString(frame_.inputs.builtins, name); };
  if (is("len") && args.size() == 1) return BuiltinLen(args[0]);
  if (is("id") && args.size() == 1 && kwargs.empty()) return BuiltinId(args[0]);
  if (is("isinstance") && args.size() == 2) return BuiltinIsinstance(args[0], args[1]);
  if ((is("tuple") || is("list")) && args.empty() && kwargs.empty()) {
    return MakeSym(is("tuple") ? SymKind::kTuple : SymKind::kList);  // a dataclass's default_factory=list
  }
  if ((is("tuple") || is("list")) && args.size() == 1 && kwargs.empty()) {
    // tuple(t) of an exact tuple is t itself in CPython (`tuple(args) is args`).
    if (is("tuple") && ((args[0]->kind == SymKind::kTuple && !args[0]->named_type) ||
                        (args[0]->kind == SymKind::kConst && PyTuple_CheckExact(args[0]->obj.get())))) {
      return args[0];
    }
    // An iterator is used up (`list(it)` twice gives its items, then []).
    DT_ASSIGN_OR_RETURN(std::vector<Sym> items, Consume(args[0]));
    Sym s = MakeSym(is("tuple") ? SymKind::kTuple : SymKind::kList);
    s->items = std::move(items);
    return s;
  }
  if ((is("enumerate") || is("zip")) && kwargs.empty() && !args.empty()) return BuiltinZip(args, is("enumerate"));
  if (is("zip") && kwargs.size() == 1 && kwargs[0].first == "strict" && !args.empty()) {
    DT_ASSIGN_OR_RETURN(const bool strict, Truth(kwargs[0].second));
    return BuiltinZip(args, false, strict);
  }
  if (is("enumerate") && kwargs.size() == 1 && kwargs[0].first == "start" && args.size() == 1) {
    return BuiltinZip({args[0], kwargs[0].second}, true);
  }
  if (is("map") && kwargs.empty()) return BuiltinMap(args);
  if (is("filter") && kwargs.empty()) return BuiltinFilter(args);
  if (is("sorted") && !kwargs.empty()) return SortedWithKey(args, kwargs);
  if ((is("type") || is("callable")) && args.size() == 1 && kwargs.empty()) return BuiltinTypeFacts(fn, args);
  if (is("reversed") && args.size() == 1) {
    DT_ASSIGN_OR_RETURN(std::vector<Sym> items, Iterate(args[0]));
    Sym it = MakeSym(SymKind::kIter);
    it->items.assign(items.rbegin(), items.rend());
    if (args[0]->kind == SymKind::kList || args[0]->kind == SymKind::kTuple) {
      it->reversed_of = args[0];
      it->reversed_items = args[0]->items;
    }
    return it;
  }
  if (is("abs") && args.size() == 1 && args[0]->kind == SymKind::kTensor) return EmitNamed("abs", args);
  if (is("dict")) {
    if (args.size() > 1) return Raises("the traced code raises: dict() takes at most 1 positional argument");
    Sym d = MakeSym(SymKind::kDict);
    if (!args.empty()) DT_RETURN_IF_ERROR(UpdateDict(*d, args[0]));
    for (const auto& [k, v] : kwargs) DT_RETURN_IF_ERROR(DictInsert(*d, PyRef::Steal(py::FromUtf8(k)), v));
    return d;
  }
  if ((is("getattr") || is("hasattr")) && (args.size() == 2 || (is("getattr") && args.size() == 3)) && kwargs.empty()) {
    return BuiltinGetattr(args, is("hasattr"));
  }
  if (IsDictFromkeys(fn) && (args.size() == 1 || args.size() == 2) && kwargs.empty()) {
    DT_ASSIGN_OR_RETURN(std::vector<Sym> keys, Iterate(args[0]));
    Sym d = MakeSym(SymKind::kDict);
    const Sym value = args.size() == 2 ? args[1] : ConstSym(PyRef::Borrow(Py_None));
    for (const Sym& k : keys) {
      DT_ASSIGN_OR_RETURN(PyRef key, DictKey(k));
      DT_RETURN_IF_ERROR(DictInsert(*d, std::move(key), value));
    }
    return d;
  }
  if ((is("repr") || is("str")) && args.size() == 1 && kwargs.empty() && args[0]->kind == SymKind::kConst &&
      PyType_CheckExact(args[0]->obj.get()) &&
      !PyType_HasFeature(reinterpret_cast<PyTypeObject*>(args[0]->obj.get()), Py_TPFLAGS_HEAPTYPE)) {
    // "<class 'int'>": a builtin type's module and name never change.
    PyRef text = PyRef::Steal(PyObject_Repr(args[0]->obj.get()));
    if (!text) {
      PyErr_Clear();
      return Raises("the traced code raises in repr() of a type");
    }
    return ConstSym(std::move(text));
  }
  if ((is("repr") || is("str")) && args.size() == 1 && kwargs.empty() && args[0]->kind == SymKind::kObject) {
    DT_ASSIGN_OR_RETURN(Sym text, ObjectText(args[0], is("repr")));
    if (text != nullptr) return text;
  }
  // iter() of an iterator is itself; of a tuple or str, an iterator over its items; of a list or
  // dict, one that reads the container live, as a loop's does (it cannot cross a graph break).
  if (is("iter") && args.size() == 1 && kwargs.empty() &&
      (args[0]->kind == SymKind::kIter || args[0]->kind == SymKind::kTuple || args[0]->kind == SymKind::kList ||
       args[0]->kind == SymKind::kDict ||
       (args[0]->kind == SymKind::kConst && (PyTuple_CheckExact(args[0]->obj.get()) ||
                                             PyUnicode_CheckExact(args[0]->obj.get()))))) {
    if (args[0]->kind == SymKind::kIter && !args[0]->dict_view) return args[0];
    return IteratorOf(args[0], /*loop_iterator=*/false);
  }
  if (is("next") && (args.size() == 1 || args.size() == 2) && kwargs.empty() && args[0]->kind == SymKind::kIter) {
    if (args[0]->dict_view) return Raises("the traced code raises TypeError: a dict view is not an iterator");
    DT_ASSIGN_OR_RETURN(Sym item, NextItem(args[0]));
    if (item != nullptr) return item;
    if (args.size() == 2) return args[1];
    DT_ASSIGN_OR_RETURN(Sym stop, MakeException(PyExc_StopIteration, {}, {}));
    return Throw(stop);  // a `try: next(it) except StopIteration:` in the trace catches it
  }
  if (is("setattr") && args.size() == 3 && kwargs.empty() && args[1]->kind == SymKind::kConst &&
      PyUnicode_CheckExact(args[1]->obj.get()) && args[0]->kind == SymKind::kObject) {
    // setattr(obj, "name", v) is `obj.name = v` (a str subclass name could hash its own way).
    DT_RETURN_IF_ERROR(StoreAttr(args[0], args[1]->obj.get(), args[2]));
    return ConstSym(PyRef::Borrow(Py_None));
  }
  if (is("sorted") && args.size() == 1 && kwargs.empty()) {
    DT_ASSIGN_OR_RETURN(Sym by_first, SortedByFirstItems(fn, args[0]));
    if (by_first != nullptr) return by_first;
  }
  // min(), max(), any(), all(), sorted() of an iterator the trace holds (a generator, zip ...),
  // of a dict's keys or of a set's elements: the items as a tuple (an iterator is consumed), then folded like any
  // constant arguments.
  if ((is("min") || is("max") || is("any") || is("all") || is("sorted")) && args.size() == 1 &&
      (args[0]->kind == SymKind::kIter || args[0]->kind == SymKind::kDict || args[0]->kind == SymKind::kSet)) {
    Sym items = MakeSym(SymKind::kTuple);
    DT_ASSIGN_OR_RETURN(items->items, Iterate(args[0]));
    if (args[0]->kind == SymKind::kIter && !args[0]->dict_view) {
      Mutating(args[0]);
      args[0]->items.clear();
    }
    std::vector<Sym> folded = {items};
    return FoldPureCall(fn, folded, kwargs);
  }
  if (is("sum") && args.size() == 1 && kwargs.empty() &&
      (args[0]->kind == SymKind::kTuple || args[0]->kind == SymKind::kList || args[0]->kind == SymKind::kIter ||
       args[0]->kind == SymKind::kSet)) {
    // Python's order: ((0 + a) + b) + ...
    Sym acc = ConstSym(PyRef::Steal(PyLong_FromLong(0)));
    DT_ASSIGN_OR_RETURN(std::vector<Sym> items, Iterate(args[0]));
    for (const Sym& item : items) {
      DT_ASSIGN_OR_RETURN(acc, BinaryOp("+", acc, item));
    }
    if (args[0]->kind == SymKind::kIter && !args[0]->dict_view) {  // sum() consumed the iterator
      Mutating(args[0]);
      args[0]->items.clear();
    }
    return acc;
  }
  return Sym();
}

PyTypeObject* KnownTypeOf(const Sym& x) {
  switch (x->kind) {
    case SymKind::kTensor: return &py::TensorType;
    case SymKind::kTuple:  // a named tuple (an op's named results, a namedtuple) has its own type
      return x->named_type ? reinterpret_cast<PyTypeObject*>(x->named_type.get()) : &PyTuple_Type;
    case SymKind::kList: return &PyList_Type;
    case SymKind::kDict: return &PyDict_Type;
    case SymKind::kSlice: return &PySlice_Type;
    case SymKind::kSet: return &PySet_Type;
    case SymKind::kObject:
    case SymKind::kRunSeq:
    case SymKind::kConst: return Py_TYPE(x->obj.get());
    case SymKind::kPartial: return reinterpret_cast<PyTypeObject*>(x->obj.get());
    // A computed run-time number's type may depend on its values (`n ** k`): specialised by the
    // constant folding instead.
    case SymKind::kNumber:
    case SymKind::kShape:
    case SymKind::kNull:
    case SymKind::kIter:
    case SymKind::kCell:
    case SymKind::kRunIter:
    case SymKind::kGenManager:
    case SymKind::kSuper:
    case SymKind::kFunction:
    case SymKind::kBoundMethod:
    case SymKind::kOpMethod: break;
  }
  return nullptr;
}

// type(x) and callable(x) of values whose type the trace knows (guarded, or made by the trace).
// Null: left to the constant folding (type() of a constant) or unsupported.
absl::StatusOr<Sym> Tracer::BuiltinTypeFacts(PyObject* fn, const std::vector<Sym>& args) {
  const Sym& x = args[0];
  PyTypeObject* type = KnownTypeOf(x);
  const bool is_callable = x->kind == SymKind::kFunction || x->kind == SymKind::kBoundMethod ||
                           x->kind == SymKind::kOpMethod || x->kind == SymKind::kPartial ||
                           ((x->kind == SymKind::kObject || x->kind == SymKind::kConst) && PyCallable_Check(x->obj.get()));
  const bool is_type = fn == reinterpret_cast<PyObject*>(&PyType_Type);
  if (is_type) {
    if (type == nullptr) return Sym();
    // Where the class is read from, so its attributes can be guarded (`type(self).scale`).
    if (x->kind == SymKind::kObject) return TypeOfObject(x);
    return ConstSym(PyRef::Borrow(reinterpret_cast<PyObject*>(type)));
  }
  if (type == nullptr && !is_callable) return Sym();
  return ConstSym(PyRef::Borrow(is_callable ? Py_True : Py_False));
}

// getattr(obj, name[, default]) and hasattr(obj, name) with a constant name: the attribute
// read of the trace; an attribute the object lacks (a read that would raise AttributeError)
// gives the default, or False.
// sorted() of tuples whose first items are distinct constants (`sorted(table.items())` of a dict
// of functions): comparing two such tuples compares only their first items (tuple comparison
// stops at the first unequal pair), so the order is theirs and the rest of each tuple is never
// compared. Null when the items are not such tuples, or all constant (FoldPureCall sorts those).
absl::StatusOr<Sym> Tracer::SortedByFirstItems(PyObject* sorted_fn, const Sym& iterable) {
  if (iterable->kind != SymKind::kIter && iterable->kind != SymKind::kList && iterable->kind != SymKind::kTuple) {
    return Sym();
  }
  std::vector<Sym> items;
  if (iterable->kind == SymKind::kIter) {
    if (iterable->over != nullptr || iterable->iterated_set != nullptr) return Sym();
    items = iterable->items;
  } else {
    items = iterable->items;
  }
  PyRef firsts = PyRef::Steal(PyList_New(0));
  bool all_constant = true;
  for (const Sym& item : items) {
    if (item->kind != SymKind::kTuple || item->items.empty() || item->items[0]->kind != SymKind::kConst ||
        !IsPureConstType(item->items[0]->obj.get())) {
      return Sym();
    }
    for (size_t i = 1; i < item->items.size(); ++i) all_constant &= ConstValue(item->items[i]).ok();
    if (!firsts || PyList_Append(firsts.get(), item->items[0]->obj.get()) < 0) {
      PyErr_Clear();
      return Sym();
    }
  }
  if (all_constant) return Sym();
  const Py_ssize_t n = PyList_GET_SIZE(firsts.get());
  for (Py_ssize_t i = 0; i < n; ++i) {
    for (Py_ssize_t j = i + 1; j < n; ++j) {
      const int eq = PyObject_RichCompareBool(PyList_GET_ITEM(firsts.get(), i), PyList_GET_ITEM(firsts.get(), j), Py_EQ);
      if (eq != 0) {  // equal first items (or an error): the next items would be compared
        PyErr_Clear();
        return Sym();
      }
    }
  }
  // The order: sorted(range(n), key=firsts.__getitem__), which is stable like sorted() itself.
  PyRef key = PyRef::Steal(PyObject_GetAttrString(firsts.get(), "__getitem__"));
  PyRef indices = PyRef::Steal(PyObject_CallOneArg(reinterpret_cast<PyObject*>(&PyRange_Type),
                                                   PyRef::Steal(PyLong_FromSsize_t(n)).get()));
  PyRef kw = PyRef::Steal(PyDict_New());
  if (!key || !indices || !kw || PyDict_SetItemString(kw.get(), "key", key.get()) < 0) {
    PyErr_Clear();
    return Sym();
  }
  PyRef call_args = PyRef::Steal(PyTuple_Pack(1, indices.get()));
  PyRef order = PyRef::Steal(call_args ? PyObject_Call(sorted_fn, call_args.get(), kw.get()) : nullptr);
  if (!order) {
    PyErr_Clear();
    return Raises("the traced code raises in sorted()");
  }
  Sym out = MakeSym(SymKind::kList);
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(order.get()); ++i) {
    out->items.push_back(items.at(PyLong_AsSsize_t(PyList_GET_ITEM(order.get(), i))));
  }
  if (iterable->kind == SymKind::kIter && !iterable->dict_view) {  // sorted() used the iterator up
    Mutating(iterable);
    iterable->items.clear();
  }
  return out;
}

// repr() or str() of a plain object whose class defines __repr__ (and for str(), __str__ or
// none) in Python: the method is inlined. CPython raises unless it returns an exact str, so
// anything else stops the trace. Null: the class's methods are not Python functions.
absl::StatusOr<Sym> Tracer::ObjectText(const Sym& obj, bool repr) {
  PyTypeObject* type = Py_TYPE(obj->obj.get());
  static PyObject* const repr_name = PyUnicode_InternFromString("__repr__");
  static PyObject* const str_name = PyUnicode_InternFromString("__str__");
  PyObject* method_name = repr_name;
  if (!repr && cpython::LookupOnType(type, str_name) != cpython::LookupOnType(&PyBaseObject_Type, str_name)) {
    method_name = str_name;
  }
  PyObject* method = cpython::LookupOnType(type, method_name);
  if (method == nullptr || !PyFunction_Check(method)) return Sym();
  DT_ASSIGN_OR_RETURN(const std::string name, Text(method_name));
  DT_ASSIGN_OR_RETURN(Sym bound, ClassMethodOf(obj, method, name));
  DT_ASSIGN_OR_RETURN(Sym text, CallSym(bound, {}, {}));
  if (text->kind == SymKind::kConst && PyUnicode_CheckExact(text->obj.get())) return text;
  return Unsupported(absl::StrCat(repr ? "repr()" : "str()", " of an object whose ", name, " returns a ",
                                  Describe(text)));
}

absl::StatusOr<Sym> Tracer::BuiltinGetattr(const std::vector<Sym>& args, bool has) {
  DT_ASSIGN_OR_RETURN(PyRef name_obj, ConstValue(args[1]));
  if (!PyUnicode_Check(name_obj.get())) return Raises("the traced code raises: attribute name must be a string");
  DT_ASSIGN_OR_RETURN(const std::string name, NameText(name_obj.get()));
  absl::StatusOr<Sym> attr = GetAttr(args[0], name);
  const std::optional<interpreter::BreakReason> reason = interpreter::AsBreak(attr.status());
  const bool missing = !attr.ok() && reason && reason->kind == interpreter::BreakKind::kRaises &&
                       reason->message.find("AttributeError") != std::string::npos;
  if (has) {
    if (attr.ok() || missing) return ConstSym(PyRef::Borrow(attr.ok() ? Py_True : Py_False));
    return attr.status();
  }
  if (missing && args.size() == 3) return args[2];
  return attr;
}

// A pure builtin on run-time numbers: replayed each run, not specialised. Null when its result
// is not a number (str(), repr() ...): the caller folds it with specialised arguments.
absl::StatusOr<Sym> Tracer::CallPureOnNumbers(PyObject* fn, const std::vector<Sym>& args) {
  ScalarInstr instr;
  instr.kind = ScalarInstr::Kind::kCall;
  instr.function = PyRef::Borrow(fn);
  std::vector<int> deps;
  PyRef sample_args = PyRef::Steal(PyTuple_New(args.size()));
  for (size_t i = 0; i < args.size(); ++i) {
    const bool number = args[i]->kind == SymKind::kNumber;
    instr.arg_slots.push_back(number ? args[i]->value : -1);
    instr.arg_consts.push_back(number ? PyRef() : args[i]->obj);
    if (number) {
      deps.insert(deps.end(), slot_inputs_[args[i]->value].begin(), slot_inputs_[args[i]->value].end());
    }
    PyTuple_SET_ITEM(sample_args.get(), i, Py_NewRef(args[i]->obj.get()));
  }
  PyRef sample = PyRef::Steal(PyObject_Call(fn, sample_args.get(), nullptr));
  if (!sample) {
    // Raised for the values seen now; run-time numbers may not raise: CPython runs it.
    PyErr_Clear();
    return Raises(absl::StrCat("the traced code raises in ", ShortRepr(fn)));
  }
  if (!PyLong_CheckExact(sample.get()) && !PyFloat_CheckExact(sample.get()) && !PyBool_Check(sample.get())) {
    return Sym();
  }
  return NumberSlot(std::move(instr), std::move(sample), std::move(deps));
}

// A pure builtin on constants: called now, its result a constant.
// A pure builtin on constants: called now, its result a constant. What the result holds of its
// arguments (sorted(L)'s items, max(a, b), min(L)) stays the argument's own Sym, so it is read
// from the frame on each run: `sorted(L)[0] is L[1]` holds as in CPython, where a constant would
// be the object seen when tracing (values are guarded by equality, not identity).
absl::StatusOr<Sym> Tracer::FoldPureCall(PyObject* fn, const std::vector<Sym>& args, const Kwargs& kwargs) {
  const bool type_of_one = fn == reinterpret_cast<PyObject*>(&PyType_Type) && args.size() == 1;
  PyRef tuple = PyRef::Steal(PyTuple_New(args.size()));
  absl::flat_hash_map<PyObject*, Sym> origin;  // argument objects (and their items) -> their Syms
  for (size_t i = 0; i < args.size(); ++i) {
    auto c_or = ConstValue(args[i]);
    if (!c_or.ok()) {
      return Unsupported(absl::StrCat("call to ", ShortRepr(fn), " with an argument only known at run time (",
                                      c_or.status().message(), ")"));
    }
    PyRef c = *c_or;
    if (!IsPureConstType(c.get()) && !type_of_one &&
        !(IsTraceException(args[i]) && ReadsExceptionOnly(fn, frame_.inputs.builtins))) {
      return Unsupported(absl::StrCat("call to ", ShortRepr(fn), " with a ", Py_TYPE(c.get())->tp_name));
    }
    NoteOrigins(args[i], c.get(), origin);
    PyTuple_SET_ITEM(tuple.get(), i, c.Release());
  }
  DT_ASSIGN_OR_RETURN(PyRef kw, ConstKeywords(kwargs));
  PyRef r = PyRef::Steal(PyObject_Call(fn, tuple.get(), kw.get()));
  if (!r) {
    return PythonError(absl::StrCat("the traced code raises in ", ShortRepr(fn)));
  }
  if (auto it = origin.find(r.get()); it != origin.end() && !type_of_one) return it->second;
  // A new list (sorted(), str.split()): one the traced code may change and iterate like any other.
  PyObject* self = PyCFunction_Check(fn) ? PyCFunction_GET_SELF(fn) : nullptr;
  const bool fresh = fn == PyDict_GetItemString(frame_.inputs.builtins, "sorted") ||
                     (self != nullptr && (PyUnicode_CheckExact(self) || PyBytes_CheckExact(self)));
  const bool holds_arguments = PyTuple_CheckExact(r.get()) && std::any_of(
      &PyTuple_GET_ITEM(r.get(), 0), &PyTuple_GET_ITEM(r.get(), 0) + PyTuple_GET_SIZE(r.get()),
      [&](PyObject* item) { return origin.contains(item); });
  if (!(fresh && PyList_CheckExact(r.get())) && !holds_arguments) return ConstSym(std::move(r));
  Sym out = MakeSym(PyList_CheckExact(r.get()) ? SymKind::kList : SymKind::kTuple);
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(r.get()); ++i) {
    PyObject* item = PySequence_Fast_GET_ITEM(r.get(), i);
    auto it = origin.find(item);
    out->items.push_back(it != origin.end() ? it->second : ConstSym(PyRef::Borrow(item)));
  }
  return out;
}

// `value` is ConstValue(arg): it stands for `arg`, and a list or tuple's items for its items.
// One object at two places (`[nan] * 3`) is given back as the first place's Sym, which is right
// only while those places still hold one object: a guard says so (distinct NaNs the next call
// must come back as themselves).
void Tracer::NoteOrigins(const Sym& arg, PyObject* value, absl::flat_hash_map<PyObject*, Sym>& origin) {
  auto note = [&](PyObject* object, const Sym& sym) {
    auto [it, inserted] = origin.emplace(object, sym);
    if (!inserted && it->second != sym && it->second->source != nullptr && sym->source != nullptr) {
      guards_.Add(LeafGuard::Same(sym->source, it->second->source, Here()));
    }
  };
  if (arg->source != nullptr || arg->kind == SymKind::kConst) note(value, arg);
  const bool sequence = arg->kind == SymKind::kList || arg->kind == SymKind::kTuple;
  if (!sequence || !(PyList_CheckExact(value) || PyTuple_CheckExact(value)) ||
      PySequence_Fast_GET_SIZE(value) != static_cast<Py_ssize_t>(arg->items.size())) {
    return;
  }
  for (size_t i = 0; i < arg->items.size(); ++i) {
    const Sym& item = arg->items[i];
    PyObject* object = PySequence_Fast_GET_ITEM(value, static_cast<Py_ssize_t>(i));
    if (item->source != nullptr || item->kind == SymKind::kTuple || item->kind == SymKind::kList) {
      note(object, item);
    } else if (item->kind == SymKind::kNumber && scalar_program_[item->value].kind == ScalarInstr::Kind::kInput &&
               scalar_program_[item->value].source != nullptr) {
      // A run-time number read straight from the frame, now specialised (ConstValue guarded its
      // value): handed back as the frame's own object, so floats keep their identity.
      Sym read_again = ConstSym(item->obj);
      read_again->source = scalar_program_[item->value].source;
      note(object, read_again);
    }
  }
}

namespace {

bool AllPureConstants(const std::vector<Sym>& args, const Kwargs& kwargs) {
  for (const Sym& a : args) {
    if (a->kind != SymKind::kConst || !IsPureConstType(a->obj.get())) return false;
  }
  for (const auto& [name, v] : kwargs) {
    if (v->kind != SymKind::kConst || !IsPureConstType(v->obj.get())) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<Sym> Tracer::CallBuiltin(PyObject* fn, const std::vector<Sym>& args, const Kwargs& kwargs) {
  if (IsDyntraceTensorFunction(fn)) return CallTensorConstructor(fn, args, kwargs);
  if (IsDyntraceFunction(fn, "is_compiling") && args.empty() && kwargs.empty()) return ConstSym(PyRef::Borrow(Py_True));
  if (IsDyntraceFunction(fn, "is_tensor") && args.size() == 1 && kwargs.empty()) {
    return ConstSym(PyRef::Borrow(args[0]->kind == SymKind::kTensor ? Py_True : Py_False));
  }
  if ((IsDyntraceFunction(fn, "is_floating_point") || IsDyntraceFunction(fn, "numel")) && args.size() == 1 &&
      kwargs.empty() && args[0]->kind == SymKind::kTensor) {
    // The tensor's own methods: numel() a run-time number where sizes are dynamic.
    return CallTensorMethod(args[0], IsDyntraceFunction(fn, "numel") ? "numel" : "is_floating_point", {}, {});
  }
  DT_ASSIGN_OR_RETURN(Sym grad_mode, CallGradModeBuiltin(fn, args, kwargs));
  if (grad_mode != nullptr) return grad_mode;
  DT_ASSIGN_OR_RETURN(Sym autocast, CallAutocastBuiltin(fn, args, kwargs));
  if (autocast != nullptr) return autocast;
  // finfo()/iinfo() of a dtype: constants (what they return is immutable).
  if (IsDyntraceFunction(fn, "finfo") || IsDyntraceFunction(fn, "iinfo")) return FoldPureCall(fn, args, kwargs);
  DT_ASSIGN_OR_RETURN(Sym followed, CallFollowedBuiltin(fn, args, kwargs));
  if (followed != nullptr) return followed;
  PyObject* self = PyCFunction_Check(fn) ? PyCFunction_GET_SELF(fn) : nullptr;
  if (self != nullptr && PyUnicode_CheckExact(self) &&
      std::string_view(reinterpret_cast<PyCFunctionObject*>(fn)->m_ml->ml_name) == "format" &&
      !AllPureConstants(args, kwargs)) {
    return StrFormat(self, args, kwargs);  // constants alone: str.format itself, called now
  }
  if (!IsPureBuiltin(fn, frame_.inputs.builtins)) {
    return Unsupported(absl::StrCat("call to ", ShortRepr(fn), " is not supported by the tracer"));
  }
  bool any_number = false, numbers_only = kwargs.empty();
  for (const Sym& a : args) {
    any_number |= a->kind == SymKind::kNumber;
    numbers_only &= a->kind == SymKind::kNumber || (a->kind == SymKind::kConst && IsPureConstType(a->obj.get()));
  }
  if (any_number && numbers_only) {
    DT_ASSIGN_OR_RETURN(Sym replayed, CallPureOnNumbers(fn, args));
    if (replayed != nullptr) return replayed;
  }
  // An iterator the trace holds (", ".join(f"{k}" for k in d)) is used up by the call: its items.
  // Builtins that look at the object itself (type(reversed(r)), len(), repr()) would see a tuple.
  static const char* kSeeTheObject[] = {"type", "isinstance", "issubclass", "id", "repr", "str", "ascii",
                                        "hash", "callable", "len", "bool", "format", "iter", "next", "vars"};
  const bool sees_the_object = std::any_of(std::begin(kSeeTheObject), std::end(kSeeTheObject), [&](const char* name) {
    return fn == PyDict_GetItemString(frame_.inputs.builtins, name);
  });
  std::vector<Sym> folded_args = args;
  for (Sym& a : folded_args) {
    if (a->kind != SymKind::kIter) continue;
    if (sees_the_object) return Unsupported(absl::StrCat(ShortRepr(fn), "() of an iterator the trace made"));
    Sym items = MakeSym(SymKind::kTuple);
    DT_ASSIGN_OR_RETURN(items->items, Consume(a));
    a = items;
  }
  return FoldPureCall(fn, folded_args, kwargs);
}

}  // namespace dt::interpreter::trace
