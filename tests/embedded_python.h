// tests/embedded_python.h: starting the configured CPython inside a test binary, with the
// dyntrace module registered as a built-in (the same way the dyntrace command embeds it).
#ifndef DYNTRACE_TESTS_EMBEDDED_PYTHON_H_
#define DYNTRACE_TESTS_EMBEDDED_PYTHON_H_

#include <Python.h>

#include <string>

namespace dt::testing {

// Initialises the interpreter chosen at configure time; returns an error message or "".
std::string StartEmbeddedPython();
// The current Python exception's formatted traceback (clears it), or "" when none is set.
std::string TakePythonError();

}  // namespace dt::testing

#endif  // DYNTRACE_TESTS_EMBEDDED_PYTHON_H_
