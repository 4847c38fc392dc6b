// tests/embedded_python.h: starting the configured CPython inside a test binary, with the
// dyntrace module registered as a built-in (the same way the dyntrace command embeds it).
#ifndef DYNTRACE_TESTS_EMBEDDED_PYTHON_H_
#define DYNTRACE_TESTS_EMBEDDED_PYTHON_H_

#include <Python.h>

#include <string>

#include "tests/python_start.h"

namespace dt::testing {

// Registers dyntrace as a built-in module, then StartPython().
std::string StartEmbeddedPython();

}  // namespace dt::testing

#endif  // DYNTRACE_TESTS_EMBEDDED_PYTHON_H_
