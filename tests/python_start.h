// tests/python_start.h: starting the configured CPython inside a test binary (no dyntrace
// module: tests of single targets, such as the tracer's, use it directly).
#ifndef DYNTRACE_TESTS_PYTHON_START_H_
#define DYNTRACE_TESTS_PYTHON_START_H_

#include <Python.h>

#include <string>

namespace dt::testing {

// Initialises the interpreter chosen at configure time; returns an error message or "".
std::string StartPython();
// The current Python exception's formatted traceback (clears it), or "" when none is set.
std::string TakePythonError();

}  // namespace dt::testing

#endif  // DYNTRACE_TESTS_PYTHON_START_H_
