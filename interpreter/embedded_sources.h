// interpreter/embedded_sources.h: the module's Python-written submodules (python/dyntrace/*.py),
// pasted in at build time by //python:embedded_sources and run when dyntrace is imported.
#ifndef DYNTRACE_INTERPRETER_EMBEDDED_SOURCES_H_
#define DYNTRACE_INTERPRETER_EMBEDDED_SOURCES_H_

#include <Python.h>

#include <vector>

namespace dt::interpreter {

struct EmbeddedSource {
  const char* module;  // below dyntrace: "autograd", "optim.lr_scheduler"
  const char* path;    // in the repository, for tracebacks: "python/dyntrace/autograd.py"
  const char* source;
};

const std::vector<EmbeddedSource>& EmbeddedSources();

// Runs every embedded source, in the listed order, as module dyntrace.<module>, registered in
// sys.modules and as an attribute of its parent, with its lines given to linecache so
// tracebacks show them. A submodule the C++ side already made (dyntrace.nn) is extended.
[[nodiscard]] bool LoadEmbeddedSources(PyObject* package);

}  // namespace dt::interpreter

#endif  // DYNTRACE_INTERPRETER_EMBEDDED_SOURCES_H_
