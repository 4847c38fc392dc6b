#include "interpreter/embedded_sources.h"

#include <string>

#include "interpreter/py_ref.h"

namespace dt::interpreter {
namespace {

using py::PyRef;

// linecache.cache[path] = (size, None, lines, path): tracebacks through embedded code show it.
bool ShareLines(const EmbeddedSource& source) {
  PyRef linecache = PyRef::Steal(PyImport_ImportModule("linecache"));
  if (!linecache) return false;
  PyRef cache = PyRef::Steal(PyObject_GetAttrString(linecache.get(), "cache"));
  PyRef text = PyRef::Steal(PyUnicode_FromString(source.source));
  if (!cache || !text) return false;
  PyRef lines = PyRef::Steal(PyObject_CallMethod(text.get(), "splitlines", "O", Py_True));
  if (!lines) return false;
  PyRef entry = PyRef::Steal(Py_BuildValue("(nOOs)", PyUnicode_GET_LENGTH(text.get()), Py_None, lines.get(),
                                           source.path));
  return entry && PyDict_SetItemString(cache.get(), source.path, entry.get()) == 0;
}

// dyntrace.<dotted> as a module object: the existing attribute of its parent when that is a
// module, else a new one registered in sys.modules and on the parent.
PyRef SubmoduleFor(PyObject* package, const std::string& dotted) {
  PyRef parent = PyRef::Borrow(package);
  std::string full = "dyntrace";
  size_t start = 0;
  while (true) {
    const size_t dot = dotted.find('.', start);
    const std::string part = dotted.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    full += "." + part;
    PyRef child = PyRef::Steal(PyObject_GetAttrString(parent.get(), part.c_str()));
    if (!child || !PyModule_Check(child.get())) {
      PyErr_Clear();
      child = PyRef::Steal(PyModule_New(full.c_str()));
      if (!child || PyObject_SetAttrString(parent.get(), part.c_str(), child.get()) < 0) return PyRef();
    }
    if (PyDict_SetItemString(PyImport_GetModuleDict(), full.c_str(), child.get()) < 0) return PyRef();
    if (dot == std::string::npos) return child;
    parent = child;
    start = dot + 1;
  }
}

bool Run(PyObject* package, const EmbeddedSource& source) {
  PyRef module = SubmoduleFor(package, source.module);
  if (!module || !ShareLines(source)) return false;
  PyObject* globals = PyModule_GetDict(module.get());  // borrowed
  if (PyDict_SetItemString(globals, "__builtins__", PyEval_GetBuiltins()) < 0) return false;
  PyRef path = PyRef::Steal(PyUnicode_FromString(source.path));
  if (!path || PyDict_SetItemString(globals, "__file__", path.get()) < 0) return false;
  PyRef code = PyRef::Steal(Py_CompileString(source.source, source.path, Py_file_input));
  if (!code) return false;
  return static_cast<bool>(PyRef::Steal(PyEval_EvalCode(code.get(), globals, globals)));
}

}  // namespace

bool LoadEmbeddedSources(PyObject* package) {
  // The sources `import dyntrace`; during the module's own initialisation that finds this one.
  if (PyDict_SetItemString(PyImport_GetModuleDict(), "dyntrace", package) < 0) return false;
  // In the order //python:embedded_sources lists them: a module's imports come before it.
  for (const EmbeddedSource& s : EmbeddedSources()) {
    if (!Run(package, s)) return false;
  }
  return true;
}

}  // namespace dt::interpreter
