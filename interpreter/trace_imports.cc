// interpreter/trace_imports.cc: module-level names inside functions: `import` of a module that
// is already imported, and `global` stores.
//
// An absolute `import a.b` (IMPORT_NAME) of modules already in sys.modules, fully initialised,
// runs no code in CPython: it is the sys.modules entry, which a guard pins (another module put
// there, or a reload, traces again). Anything else (a relative import, a first import, a
// replaced builtins.__import__) is left to CPython.
//
// A `global` store is a side effect like an attribute store: recorded on the trace's pending
// globals (a dict Sym, journaled, so a break rolls it back), seen by later reads in the trace,
// and replayed into the frame's globals after the graph.
#include <Python.h>

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "interpreter/py_str.h"
#include "interpreter/tracer_internal.h"

namespace dt::interpreter::trace {
namespace {

// A module in sys.modules that finished importing (CPython would otherwise wait for its lock or
// run the import).
PyObject* ImportedModule(const std::string& name) {
  PyObject* module = PyDict_GetItemString(PyImport_GetModuleDict(), name.c_str());  // borrowed
  if (module == nullptr || !PyModule_Check(module)) return nullptr;
  PyRef spec = PyRef::Steal(PyObject_GetAttrString(module, "__spec__"));
  PyRef initializing = spec && spec.get() != Py_None
                           ? PyRef::Steal(PyObject_GetAttrString(spec.get(), "_initializing"))
                           : PyRef();
  PyErr_Clear();
  if (initializing && PyObject_IsTrue(initializing.get()) != 0) {
    PyErr_Clear();
    return nullptr;
  }
  return module;
}

// `from package import name`: CPython imports a submodule `name` the package does not have
// yet as an attribute (importlib's _handle_fromlist); only one already there is read here.
absl::Status FromListPresent(PyObject* module, const Sym& fromlist) {
  if (fromlist->kind != SymKind::kConst || !PyTuple_Check(fromlist->obj.get())) {
    return Unsupported("an import with a computed list of names");
  }
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(fromlist->obj.get()); ++i) {
    PyObject* name = PyTuple_GET_ITEM(fromlist->obj.get(), i);
    if (!PyUnicode_Check(name) || PyDict_GetItemWithError(PyModule_GetDict(module), name) == nullptr) {
      PyErr_Clear();
      return Unsupported("`from m import name` where name is not yet an attribute of m (CPython imports it)");
    }
  }
  return absl::OkStatus();
}

}  // namespace

// [level, fromlist] -> the module: the package `a` for `import a.b`, `a.b` itself when names are
// imported from it.
absl::Status Tracer::DoImportName(TFrame& f, const Instr& in) {
  DT_RETURN_IF_ERROR(f.Need(2, in));
  const Sym& level = f.stack[f.stack.size() - 2];
  const Sym& fromlist = f.stack.back();
  if (level->kind != SymKind::kConst || !PyLong_CheckExact(level->obj.get()) || PyLong_AsLong(level->obj.get()) != 0) {
    return Unsupported("a relative import");
  }
  PyObject* import = PyDict_GetItemString(frame_.inputs.builtins, "__import__");
  if (import == nullptr || !PyCFunction_Check(import) ||
      std::string(reinterpret_cast<PyCFunctionObject*>(import)->m_ml->ml_name) != "__import__") {
    return Unsupported("builtins.__import__ is replaced");
  }
  guards_.Add(LeafGuard::Identity(guards::BuiltinSource("__import__"), import, Here()));
  DT_ASSIGN_OR_RETURN(const std::string name, NameText(in.argval.get()));
  const bool names_from = fromlist->kind != SymKind::kConst || fromlist->obj.get() != Py_None;
  const std::string returned = names_from ? name : name.substr(0, name.find('.'));
  for (const std::string& needed : {name, returned}) {
    if (ImportedModule(needed) == nullptr) {
      return Unsupported(absl::StrCat("importing ", needed, ", which is not imported yet (CPython runs the import)"));
    }
  }
  if (names_from) DT_RETURN_IF_ERROR(FromListPresent(ImportedModule(returned), fromlist));
  // The imported module itself is pinned too: `import a.b` must not run a.b's import either.
  guards_.Add(LeafGuard::Identity(guards::SysModuleSource(name), ImportedModule(name), Here()));
  DT_ASSIGN_OR_RETURN(Sym module, Wrap(ImportedModule(returned), guards::SysModuleSource(returned)));
  f.Pop();
  f.Pop();
  f.stack.push_back(std::move(module));
  return absl::OkStatus();
}

// [module] -> [module, module.name]
absl::Status Tracer::DoImportFrom(TFrame& f, const Instr& in) {
  DT_RETURN_IF_ERROR(f.Need(1, in));
  DT_ASSIGN_OR_RETURN(const std::string name, NameText(in.argval.get()));
  DT_ASSIGN_OR_RETURN(Sym attr, GetAttr(f.stack.back(), name));
  f.stack.push_back(std::move(attr));
  return absl::OkStatus();
}

absl::Status Tracer::DoStoreGlobal(TFrame& f, const Instr& in) {
  DT_RETURN_IF_ERROR(f.Need(1, in));
  if (f.globals != frame_.inputs.globals) return Unsupported("a global store in a function of another module");
  if (f.stack.back()->kind == SymKind::kNull) return Unsupported("storing NULL");
  Mutating(global_stores_);
  Sym value = f.Pop();
  for (size_t i = 0; i < global_stores_->keys.size(); ++i) {
    if (PyUnicode_Compare(global_stores_->keys[i].get(), in.argval.get()) == 0) {
      global_stores_->items[i] = std::move(value);
      return absl::OkStatus();
    }
  }
  global_stores_->keys.push_back(in.argval);
  global_stores_->items.push_back(std::move(value));
  return absl::OkStatus();
}

// What the trace stored into a global of the root frame's module earlier; null when nothing.
Sym Tracer::StoredGlobal(const TFrame& f, const std::string& name) const {
  if (f.globals != frame_.inputs.globals || global_stores_->keys.empty()) return nullptr;
  PyRef key = PyRef::Steal(py::FromUtf8(name));
  if (!key) {
    PyErr_Clear();
    return nullptr;
  }
  for (size_t i = 0; i < global_stores_->keys.size(); ++i) {
    if (PyUnicode_Compare(global_stores_->keys[i].get(), key.get()) == 0) {
      return global_stores_->items[i];
    }
  }
  return nullptr;
}

absl::Status Tracer::AppendGlobalStores(std::vector<AttrStore>& stores, std::vector<ValueId>& outputs) {
  for (size_t i = 0; i < global_stores_->keys.size(); ++i) {
    DT_ASSIGN_OR_RETURN(OutputSpec value, ToOutput(global_stores_->items[i], outputs));
    stores.push_back(AttrStore{guards::GlobalsDictSource(), global_stores_->keys[i], std::move(value), true, nullptr});
  }
  return absl::OkStatus();
}

}  // namespace dt::interpreter::trace
