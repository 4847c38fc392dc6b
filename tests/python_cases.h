// tests/python_cases.h: test_* functions of Python case files as GoogleTest cases.
//
// Case discovery and the assertion helpers live in tests/python/runner.py and testlib.py, so the
// same files also run under a plain `python3 tests/python/runner.py`. Test binaries start the
// embedded interpreter (tests/embedded_python.h), then register the files they run:
//
//   dt::testing::PythonCases cases;
//   if (!cases.Register("tests/python", {"tests/python/test_x.py"})) return 1;
//   return RUN_ALL_TESTS();
#ifndef DYNTRACE_TESTS_PYTHON_CASES_H_
#define DYNTRACE_TESTS_PYTHON_CASES_H_

#include <string>
#include <vector>

#include "interpreter/py_ref.h"

namespace dt::testing {

// Starts the embedded interpreter for a suite: compiled kernels go to the test's own directory
// unless DYNTRACE_CACHE_DIR says otherwise (Bazel gives tests no usable HOME). Returns an error
// message or "".
std::string StartSuiteInterpreter();

// Every tests/python-style case file (test_*.py) in `dir`, sorted.
std::vector<std::string> CaseFiles(const std::string& dir);

// Keeps the collected case functions alive while the tests run.
class PythonCases {
 public:
  // Imports runner.py from `dir` and registers each file's test_* functions as cases of a suite
  // named after the file. Prints why and returns false when a file can't be collected.
  bool Register(const std::string& dir, const std::vector<std::string>& files);

 private:
  std::vector<dt::interpreter::py::PyRef> keep_alive_;
};

}  // namespace dt::testing

#endif  // DYNTRACE_TESTS_PYTHON_CASES_H_
