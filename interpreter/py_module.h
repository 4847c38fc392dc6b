// interpreter/py_module.h: the entry point of the `dyntrace` Python module.
//
// The shared library built as dyntrace.so exports it for `import dyntrace`; embedding programs
// (the dyntrace command, the end-to-end tests) register it as a built-in with
// PyImport_AppendInittab("dyntrace", PyInit_dyntrace) before Py_Initialize.
#ifndef DYNTRACE_INTERPRETER_PY_MODULE_H_
#define DYNTRACE_INTERPRETER_PY_MODULE_H_

#include <Python.h>

extern "C" PyObject* PyInit_dyntrace();

namespace dt::interpreter::py {

// The parts of the module defined in other files:
// dyntrace.jit, tracing, enable, disable, guards, graphs, explain, stats, reset (py_jit.cc);
[[nodiscard]] bool AddJitBindings(PyObject* module);
// dyntrace._instruction_table() and _stack_effect(), for the instruction table's test.
[[nodiscard]] bool AddBytecodeBindings(PyObject* module);
// dyntrace.nn and dyntrace.nn.functional, entered in sys.modules (py_submodules.cc); returns
// functional (borrowed), or null with a Python exception set.
PyObject* AddNNModules(PyObject* dyntrace);
// dyntrace.linalg, likewise; returns it (borrowed) or null.
PyObject* AddLinalgModule(PyObject* dyntrace);

}  // namespace dt::interpreter::py

#endif  // DYNTRACE_INTERPRETER_PY_MODULE_H_
