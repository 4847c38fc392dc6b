// dyntrace.nn, dyntrace.nn.functional and dyntrace.linalg: plain module objects, as torch.nn,
// torch.nn.functional and torch.linalg are to torch.
//
// Both are made here, at dyntrace's init, and entered in sys.modules under their dotted names, so
// `import dyntrace.nn.functional as F` and `from dyntrace.nn import functional` find them without a
// package directory. functional is filled from the op registry (ops flagged kNNFunctional, the
// same op-function objects dyntrace.X binds, so the tracer records F.relu exactly as dt.relu).
// dyntrace.nn is left a plain module whose dict Python source (Module, Linear ...) may extend.
// linalg is filled the same way from ops flagged kLinalg (registered as linalg_<name>).
#include <Python.h>

#include "interpreter/py_module.h"
#include "interpreter/py_ref.h"

namespace dt::interpreter::py {

namespace {

// A new module `name` (dotted), set as `attr` of `parent` and entered in sys.modules. Borrowed
// result (sys.modules and the parent hold it), null with an exception set on failure.
PyObject* AddSubmodule(PyObject* parent, const char* attr, const char* name, const char* doc) {
  PyRef module = PyRef::Steal(PyModule_New(name));
  if (!module) return nullptr;
  PyRef doc_text = PyRef::Steal(PyUnicode_FromString(doc));
  if (!doc_text || PyObject_SetAttrString(module.get(), "__doc__", doc_text.get()) < 0) return nullptr;
  // An empty __path__ makes it a package, so the import system accepts its submodules' names.
  PyRef path = PyRef::Steal(PyList_New(0));
  if (!path || PyObject_SetAttrString(module.get(), "__path__", path.get()) < 0) return nullptr;
  PyObject* modules = PyImport_GetModuleDict();  // borrowed
  if (PyDict_SetItemString(modules, name, module.get()) < 0) return nullptr;
  if (PyObject_SetAttrString(parent, attr, module.get()) < 0) return nullptr;
  return module.get();
}

}  // namespace

PyObject* AddNNModules(PyObject* dyntrace) {
  PyObject* nn = AddSubmodule(dyntrace, "nn", "dyntrace.nn",
                              "Neural-network building blocks, as torch.nn; functions in "
                              "dyntrace.nn.functional.");
  if (nn == nullptr) return nullptr;
  return AddSubmodule(nn, "functional", "dyntrace.nn.functional",
                      "Neural-network functions, as torch.nn.functional: the dyntrace ops of "
                      "the same names.");
}

PyObject* AddLinalgModule(PyObject* dyntrace) {
  return AddSubmodule(dyntrace, "linalg", "dyntrace.linalg",
                      "Linear algebra, as torch.linalg: the dyntrace ops named linalg_<name> in the registry.");
}

}  // namespace dt::interpreter::py
