// interpreter/traced_int.h: an int that stands for a run-time number while an op call is bound.
//
// The tracer binds a dyntrace op call by running the op's own argument parser on Python objects
// (so errors and defaults are exactly eager's). A symbolic size or dynamic number has a value at
// trace time but must reach the graph as a run-time argument; passed as a TracedInt (an int
// subclass holding that value, a fresh object each time, unlike cached small ints), it is found
// again by identity in the bound arguments and becomes a ScalarRef or DimsRef there.
#ifndef DYNTRACE_INTERPRETER_TRACED_INT_H_
#define DYNTRACE_INTERPRETER_TRACED_INT_H_

#include <Python.h>

namespace dt::interpreter::py {

// A new TracedInt equal to `value` (an exact int). Null with a Python error on failure.
PyObject* NewTracedInt(PyObject* value);
bool IsTracedInt(PyObject* obj);

}  // namespace dt::interpreter::py

#endif  // DYNTRACE_INTERPRETER_TRACED_INT_H_
