// interpreter/py_compiled.h: dyntrace.CompiledFunction, what dt.jit(fn, **options) returns.
//
// Calling it evaluates fn's frame, and the frames fn calls, under its options, with entries of its
// own (a CacheKey); fn itself stays a plain function. The hook is installed only while a compiled
// function (or tracing(), or enable()) is running.
#ifndef DYNTRACE_INTERPRETER_PY_COMPILED_H_
#define DYNTRACE_INTERPRETER_PY_COMPILED_H_

#include <Python.h>

#include "interpreter/code_cache.h"

namespace dt::interpreter::py {

// fn: a Python function, a bound method, or an object with a Python `__call__` or `forward`
// (a model). Null with TypeError otherwise.
PyObject* NewCompiledFunction(PyObject* fn, const JitOptions& options);
bool IsCompiledFunction(PyObject* obj);
CacheKey KeyOf(PyObject* compiled);         // REQUIRES: IsCompiledFunction
PyCodeObject* RootOf(PyObject* compiled);   // the code its call is rooted at
PyObject* TargetOf(PyObject* compiled);     // what its call calls (borrowed)
const JitOptions& OptionsOf(PyObject* compiled);
[[nodiscard]] bool InitCompiledFunctionType(PyObject* module);

}  // namespace dt::interpreter::py

#endif  // DYNTRACE_INTERPRETER_PY_COMPILED_H_
