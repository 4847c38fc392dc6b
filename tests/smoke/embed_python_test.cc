// Embeds the interpreter chosen by @local_python and checks that it finds its
// own standard library and site-packages.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdio>
#include <string>

#include "gtest/gtest.h"
#include "local_python/python_config.h"

// CPython keeps interpreter-lifetime allocations that LeakSanitizer reports
// as leaks. Only consulted under --config=asan; other tests keep leak checks.
extern "C" const char* __lsan_default_options() { return "detect_leaks=0"; }

namespace {

// Returns str(eval(expr)) in __main__, or "<error>" after printing it.
std::string Eval(const char* expr) {
  PyObject* main = PyImport_AddModule("__main__");  // Borrowed.
  PyObject* globals = PyModule_GetDict(main);       // Borrowed.
  PyObject* value = PyRun_String(expr, Py_eval_input, globals, globals);
  PyObject* text = value ? PyObject_Str(value) : nullptr;
  std::string result = text ? PyUnicode_AsUTF8(text) : "<error>";
  if (!text) PyErr_Print();
  Py_XDECREF(text);
  Py_XDECREF(value);
  return result;
}

TEST(EmbedPython, ConfiguredInterpreter) {
  PyConfig config;
  PyConfig_InitPythonConfig(&config);
  // program_name makes sys.executable the real interpreter, so code that
  // spawns Python (multiprocessing, subprocess) gets the right one.
  PyStatus status = PyConfig_SetBytesString(&config, &config.program_name,
                                            DYNTRACE_PYTHON_BIN);
  // An explicit home disables venv detection, so only pin it outside a venv.
  if (!PyStatus_Exception(status) &&
      std::string(DYNTRACE_PYTHON_PREFIX) == DYNTRACE_PYTHON_BASE_PREFIX) {
    status = PyConfig_SetBytesString(&config, &config.home,
                                     DYNTRACE_PYTHON_PREFIX);
  }
  if (!PyStatus_Exception(status)) status = Py_InitializeFromConfig(&config);
  PyConfig_Clear(&config);
  ASSERT_FALSE(PyStatus_Exception(status))
      << (status.err_msg ? status.err_msg : "");

  ASSERT_EQ(PyRun_SimpleString("import sys"), 0);
  EXPECT_EQ(Eval("'%d.%d' % sys.version_info[:2]"), DYNTRACE_PYTHON_VERSION);
  EXPECT_EQ(Eval("sys.prefix"), DYNTRACE_PYTHON_PREFIX);
  EXPECT_EQ(Eval("sys.executable"), DYNTRACE_PYTHON_BIN);

  // numpy is optional, but if the interpreter itself can import it the
  // embedded one must too (that catches a wrong sys.path).
  const std::string expected_numpy = DYNTRACE_PYTHON_NUMPY_VERSION;
  PyObject* numpy = PyImport_ImportModule("numpy");
  if (numpy) {
    const std::string version = Eval("__import__('numpy').__version__");
    std::printf("embedded numpy %s\n", version.c_str());
    EXPECT_EQ(version, expected_numpy);
    Py_DECREF(numpy);
  } else {
    PyErr_Clear();
    std::printf("numpy is not available to %s\n", DYNTRACE_PYTHON_BIN);
    EXPECT_EQ(expected_numpy, "") << "numpy imports in the interpreter but "
                                     "not when embedded";
  }
  std::printf("embedded %s\n", Eval("sys.version").c_str());

  EXPECT_EQ(Py_FinalizeEx(), 0);
}

}  // namespace
