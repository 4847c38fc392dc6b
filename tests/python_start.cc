#include "tests/python_start.h"

#include "interpreter/py_ref.h"
#include "local_python/python_config.h"

namespace dt::testing {

using interpreter::py::PyRef;

std::string StartPython() {
  PyConfig config;
  PyConfig_InitPythonConfig(&config);
  // program_name gives sys.executable the real interpreter; home pins the standard library unless
  // a venv is in use (an explicit home disables venv detection).
  PyStatus status = PyConfig_SetBytesString(&config, &config.program_name, DYNTRACE_PYTHON_BIN);
  if (!PyStatus_Exception(status) &&
      std::string(DYNTRACE_PYTHON_PREFIX) == DYNTRACE_PYTHON_BASE_PREFIX) {
    status = PyConfig_SetBytesString(&config, &config.home, DYNTRACE_PYTHON_PREFIX);
  }
  if (!PyStatus_Exception(status)) status = Py_InitializeFromConfig(&config);
  PyConfig_Clear(&config);
  if (PyStatus_Exception(status)) return status.err_msg ? status.err_msg : "Py_Initialize failed";
  return "";
}

std::string TakePythonError() {
  if (!PyErr_Occurred()) return "";
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  PyRef traceback = PyRef::Steal(PyImport_ImportModule("traceback"));
  std::string text = "<unprintable exception>";
  if (traceback) {
    PyRef lines = PyRef::Steal(PyObject_CallMethod(traceback.get(), "format_exception", "OOO",
                                                   type, value ? value : Py_None,
                                                   tb ? tb : Py_None));
    PyRef empty = PyRef::Steal(PyUnicode_FromString(""));
    PyRef joined = lines ? PyRef::Steal(PyUnicode_Join(empty.get(), lines.get())) : PyRef();
    if (joined) text = PyUnicode_AsUTF8(joined.get());
  }
  PyErr_Clear();
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(tb);
  return text;
}

}  // namespace dt::testing
