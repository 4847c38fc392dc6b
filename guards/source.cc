#include "guards/source.h"

#include "absl/strings/str_cat.h"

namespace dt::guards {

std::string Source::ToString() const {
  switch (kind) {
    case Kind::kLocal: return absl::StrCat("L['", name, "']");
    case Kind::kGlobal: return absl::StrCat("G['", name, "']");
    case Kind::kBuiltin: return absl::StrCat("B['", name, "']");
    case Kind::kClosure: return absl::StrCat("C['", name, "']");
    case Kind::kAttr: return absl::StrCat(parent->ToString(), ".", name);
    case Kind::kItem: return absl::StrCat(parent->ToString(), "[", index, "]");
    case Kind::kDictItem: return absl::StrCat(parent->ToString(), "['", name, "']");
    case Kind::kFuncGlobals: return absl::StrCat(parent->ToString(), ".__globals__");
    case Kind::kFuncDefaults: return absl::StrCat(parent->ToString(), ".__defaults__");
    case Kind::kFuncKwDefaults: return absl::StrCat(parent->ToString(), ".__kwdefaults__");
    case Kind::kFuncCell: return absl::StrCat(parent->ToString(), ".__closure__[", index, "] (",
                                              name, ")");
    case Kind::kStack: return name.empty() ? absl::StrCat("S[", index, "]") : name;
    case Kind::kCellContents: return absl::StrCat(parent->ToString(), ".cell_contents");
    case Kind::kFreeCell: return absl::StrCat("cell(C['", name, "'])");
    case Kind::kIterItem: return absl::StrCat(parent->ToString(), ".remaining[", index, "]");
    case Kind::kMethodFunc: return absl::StrCat(parent->ToString(), ".__func__");
    case Kind::kMethodSelf: return absl::StrCat(parent->ToString(), ".__self__");
    case Kind::kTypeOf: return absl::StrCat("type(", parent->ToString(), ")");
    case Kind::kGlobalsDict: return "globals()";
    case Kind::kSysModule: return absl::StrCat("sys.modules['", name, "']");
    case Kind::kPartialPart: return absl::StrCat(parent->ToString(), ".", name);
    case Kind::kModuleDict: return absl::StrCat(parent->ToString(), ".__dict__");
    case Kind::kDictItemByKey: return absl::StrCat(parent->ToString(), "[", key->ToString(), "]");
  }
  __builtin_unreachable();
}

namespace {

// A str made from the whole of `text`: a key may hold NULs ("a\0b"), which a C string would cut
// short, and the source would then read another key's value.
PyObject* StrOf(const std::string& text) {
  return PyUnicode_FromStringAndSize(text.data(), static_cast<Py_ssize_t>(text.size()));
}

// source.name as an interned str (Source::name_str), borrowed; null if it can't be made.
PyObject* NameStr(const Source& source) {
  if (source.name_str == nullptr) {
    PyObject* s = StrOf(source.name);
    if (s == nullptr) {
      PyErr_Clear();
      return nullptr;
    }
    PyUnicode_InternInPlace(&s);
    source.name_str = s;
  }
  return source.name_str;
}

PyObject* DictLookup(PyObject* dict, PyObject* key) {
  if (dict == nullptr || key == nullptr || !PyDict_Check(dict)) return nullptr;
  PyObject* value = PyDict_GetItemWithError(dict, key);  // borrowed
  if (value == nullptr) PyErr_Clear();
  return value;
}

ObjectAccess object_access{nullptr, nullptr, nullptr};  // SetObjectAccess

// An object's own attribute without running descriptors: the instance (or module, or class)
// __dict__.
PyObject* OwnAttr(PyObject* obj, const Source& attr) {
  PyObject* name = NameStr(attr);
  if (PyModule_Check(obj)) return DictLookup(PyModule_GetDict(obj), name);
  if (object_access.lookup_on_type == nullptr || name == nullptr) return nullptr;  // not installed: nothing resolves
  if (PyType_Check(obj)) {
    // The MRO lookup, not tp_dict: 3.12 keeps builtin types' dicts elsewhere (tp_dict is NULL).
    return object_access.lookup_on_type(reinterpret_cast<PyTypeObject*>(obj), name);
  }
  if (attr.name == "grad" && object_access.tensor_grad != nullptr) {
    if (PyObject* grad = object_access.tensor_grad(obj)) return grad;
    PyErr_Clear();
  }
  PyObject* dict = object_access.instance_dict(obj);
  return dict != nullptr ? DictLookup(dict, name) : nullptr;
}

PyObject* CellContents(PyObject* closure, int index) {
  if (closure == nullptr || !PyTuple_Check(closure) || index >= PyTuple_GET_SIZE(closure)) {
    return nullptr;
  }
  PyObject* cell = PyTuple_GET_ITEM(closure, index);
  return PyCell_Check(cell) ? PyCell_GET(cell) : nullptr;
}

// A part of a functools.partial (C's partial type exactly, named "functools.partial" by its type
// spec, a Python class would be named "partial": its members are read-only slots that run no
// code). Borrowed: the partial holds it.
PyObject* PartialPart(PyObject* p, const std::string& part) {
  if (p == nullptr || std::string(Py_TYPE(p)->tp_name) != "functools.partial") {
    return nullptr;
  }
  PyObject* value = PyObject_GetAttrString(p, part.c_str());
  if (value == nullptr) {
    PyErr_Clear();
    return nullptr;
  }
  Py_DECREF(value);  // the partial keeps it alive
  return value;
}

}  // namespace

void SetObjectAccess(ObjectAccess access) { object_access = access; }

uint64_t NewResolveEpoch() {
  static uint64_t last = 0;
  return ++last;
}

PyObject* Source::Resolve(const FrameInputs& frame) const {
  if (frame.resolve_epoch == 0) return ResolveUncached(frame);
  if (memo_epoch != frame.resolve_epoch) {
    memo_value = ResolveUncached(frame);
    memo_epoch = frame.resolve_epoch;
  }
  return memo_value;
}

PyObject* Source::ResolveUncached(const FrameInputs& frame) const {
  switch (kind) {
    case Kind::kLocal: return index < frame.num_locals ? frame.locals[index] : nullptr;
    case Kind::kGlobal: return DictLookup(frame.globals, NameStr(*this));
    case Kind::kBuiltin: return DictLookup(frame.builtins, NameStr(*this));
    case Kind::kClosure: return CellContents(frame.closure, index);
    case Kind::kAttr: {
      PyObject* p = parent->Resolve(frame);
      return p == nullptr ? nullptr : OwnAttr(p, *this);
    }
    case Kind::kItem: {
      PyObject* p = parent->Resolve(frame);
      if (p == nullptr) return nullptr;
      if (PyTuple_Check(p) && index < PyTuple_GET_SIZE(p)) return PyTuple_GET_ITEM(p, index);
      if (PyList_Check(p) && index < PyList_GET_SIZE(p)) return PyList_GET_ITEM(p, index);
      return nullptr;
    }
    case Kind::kDictItem: return DictLookup(parent->Resolve(frame), NameStr(*this));
    case Kind::kFuncGlobals: {
      PyObject* p = parent->Resolve(frame);
      return p != nullptr && PyFunction_Check(p) ? PyFunction_GET_GLOBALS(p) : nullptr;
    }
    case Kind::kFuncDefaults:
    case Kind::kFuncKwDefaults: {
      PyObject* p = parent->Resolve(frame);
      if (p == nullptr || !PyFunction_Check(p)) return nullptr;
      PyObject* d = kind == Kind::kFuncDefaults ? PyFunction_GET_DEFAULTS(p) : PyFunction_GET_KW_DEFAULTS(p);
      return d != nullptr ? d : Py_None;  // none set: Python shows None
    }
    case Kind::kFuncCell: {
      PyObject* p = parent->Resolve(frame);
      return p != nullptr && PyFunction_Check(p) ? CellContents(PyFunction_GET_CLOSURE(p), index)
                                                 : nullptr;
    }
    case Kind::kStack: return index < frame.stack_size ? frame.stack[index] : nullptr;
    case Kind::kCellContents: {
      PyObject* p = parent->Resolve(frame);
      return p != nullptr && PyCell_Check(p) ? PyCell_GET(p) : nullptr;
    }
    case Kind::kFreeCell:
      return frame.closure != nullptr && PyTuple_Check(frame.closure) &&
                     index < PyTuple_GET_SIZE(frame.closure)
                 ? PyTuple_GET_ITEM(frame.closure, index)
                 : nullptr;
    case Kind::kIterItem: {
      PyObject* p = parent->Resolve(frame);
      RemainingItems remaining;
      if (p == nullptr || !ReadRemainingItems(p, &remaining)) return nullptr;
      const Py_ssize_t i = remaining.start + index;
      return i < PySequence_Fast_GET_SIZE(remaining.items) ? PySequence_Fast_GET_ITEM(remaining.items, i) : nullptr;
    }
    case Kind::kMethodFunc:
    case Kind::kMethodSelf: {
      PyObject* p = parent->Resolve(frame);
      if (p == nullptr || !PyMethod_Check(p)) return nullptr;
      return kind == Kind::kMethodFunc ? PyMethod_GET_FUNCTION(p) : PyMethod_GET_SELF(p);
    }
    case Kind::kTypeOf: {
      PyObject* p = parent->Resolve(frame);
      return p != nullptr ? reinterpret_cast<PyObject*>(Py_TYPE(p)) : nullptr;
    }
    case Kind::kGlobalsDict: return frame.globals;
    case Kind::kSysModule: return DictLookup(PyImport_GetModuleDict(), NameStr(*this));
    case Kind::kPartialPart: return PartialPart(parent->Resolve(frame), name);
    case Kind::kModuleDict: {
      PyObject* p = parent->Resolve(frame);
      return p != nullptr && PyModule_Check(p) ? PyModule_GetDict(p) : nullptr;  // borrowed
    }
    case Kind::kDictItemByKey: {
      PyObject* d = parent->Resolve(frame);
      PyObject* k = key->Resolve(frame);
      // Only keys that hash without running Python code (tensors hash by identity): a guard
      // must not call user code.
      if (d == nullptr || k == nullptr || !PyDict_Check(d) || Py_TYPE(k)->tp_hash != PyBaseObject_Type.tp_hash) {
        return nullptr;
      }
      PyObject* value = PyDict_GetItemWithError(d, k);  // borrowed
      if (value == nullptr) PyErr_Clear();
      return value;
    }
  }
  __builtin_unreachable();
}

namespace {
SourceRef Make(Source::Kind kind, int index, std::string name, SourceRef parent) {
  return std::make_shared<const Source>(Source{kind, index, std::move(name), std::move(parent), nullptr});
}
}  // namespace

SourceRef LocalSource(int index, std::string name) {
  return Make(Source::Kind::kLocal, index, std::move(name), nullptr);
}
SourceRef GlobalSource(std::string name) { return Make(Source::Kind::kGlobal, -1, std::move(name), nullptr); }
SourceRef BuiltinSource(std::string name) { return Make(Source::Kind::kBuiltin, -1, std::move(name), nullptr); }
SourceRef ClosureSource(int index, std::string name) {
  return Make(Source::Kind::kClosure, index, std::move(name), nullptr);
}
SourceRef AttrSource(SourceRef parent, std::string name) {
  return Make(Source::Kind::kAttr, -1, std::move(name), std::move(parent));
}
SourceRef ItemSource(SourceRef parent, int index) {
  return Make(Source::Kind::kItem, index, "", std::move(parent));
}
SourceRef DictItemSource(SourceRef parent, std::string key) {
  return Make(Source::Kind::kDictItem, -1, std::move(key), std::move(parent));
}
SourceRef DictItemByKeySource(SourceRef dict, SourceRef key) {
  return std::make_shared<const Source>(Source{Source::Kind::kDictItemByKey, -1, "", std::move(dict), std::move(key)});
}
SourceRef FuncGlobalsSource(SourceRef function) {
  return Make(Source::Kind::kFuncGlobals, -1, "", std::move(function));
}
SourceRef FuncDefaultsSource(SourceRef function) {
  return Make(Source::Kind::kFuncDefaults, -1, "", std::move(function));
}
SourceRef FuncKwDefaultsSource(SourceRef function) {
  return Make(Source::Kind::kFuncKwDefaults, -1, "", std::move(function));
}
SourceRef FuncCellSource(SourceRef function, int index, std::string name) {
  return Make(Source::Kind::kFuncCell, index, std::move(name), std::move(function));
}

namespace {
IteratorReader iterator_reader = nullptr;
}  // namespace

void SetIteratorReader(IteratorReader reader) { iterator_reader = reader; }

bool ReadRemainingItems(PyObject* obj, RemainingItems* out) {
  return iterator_reader != nullptr && iterator_reader(obj, out);
}

SourceRef IterItemSource(SourceRef iterator, int index) {
  return Make(Source::Kind::kIterItem, index, "", std::move(iterator));
}
SourceRef MethodFuncSource(SourceRef method) { return Make(Source::Kind::kMethodFunc, -1, "", std::move(method)); }
SourceRef PartialPartSource(SourceRef partial, std::string part) {
  return Make(Source::Kind::kPartialPart, -1, std::move(part), std::move(partial));
}
SourceRef GlobalsDictSource() { return Make(Source::Kind::kGlobalsDict, -1, "", nullptr); }
SourceRef SysModuleSource(std::string name) { return Make(Source::Kind::kSysModule, -1, std::move(name), nullptr); }
SourceRef ModuleDictSource(SourceRef module) { return Make(Source::Kind::kModuleDict, -1, "", std::move(module)); }
SourceRef TypeOfSource(SourceRef object) { return Make(Source::Kind::kTypeOf, -1, "", std::move(object)); }
SourceRef MethodSelfSource(SourceRef method) { return Make(Source::Kind::kMethodSelf, -1, "", std::move(method)); }

SourceRef StackSource(int index, std::string name) {
  return Make(Source::Kind::kStack, index, std::move(name), nullptr);
}
SourceRef CellContentsSource(SourceRef cell) {
  return Make(Source::Kind::kCellContents, -1, "", std::move(cell));
}
SourceRef FreeCellSource(int index, std::string name) {
  return Make(Source::Kind::kFreeCell, index, std::move(name), nullptr);
}

}  // namespace dt::guards
