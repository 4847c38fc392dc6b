// interpreter/py_module.h: the entry point of the `dyntrace` Python module.
//
// The shared library built as dyntrace.so exports it for `import dyntrace`; embedding programs
// (the dyntrace command, the end-to-end tests) register it as a built-in with
// PyImport_AppendInittab("dyntrace", PyInit_dyntrace) before Py_Initialize.
#ifndef DYNTRACE_INTERPRETER_PY_MODULE_H_
#define DYNTRACE_INTERPRETER_PY_MODULE_H_

#include <Python.h>

extern "C" PyObject* PyInit_dyntrace();

namespace dt::py {

// Whether `fn` is one of the module's builtins whose answer is fixed for the life of the process
// (dyntrace.cuda.is_available and device_count: the driver is probed once). The tracer calls
// those while tracing and makes the answer a constant of the graph, as torch.compile does with
// torch.cuda.is_available().
bool IsProcessConstantFunction(PyObject* fn);

}  // namespace dt::py

#endif  // DYNTRACE_INTERPRETER_PY_MODULE_H_
