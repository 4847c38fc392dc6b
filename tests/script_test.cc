// Runs a Python script under an embedded CPython that has dyntrace built in, as a test: the first
// argument is the script (relative to the runfiles root), the rest become its sys.argv[1:]. The
// test passes when the script exits with status 0. Used for the fuzzer's fixed-seed sample and
// the CPython regression-test subset.
#include <cstdio>
#include <string>

#include "interpreter/py_ref.h"
#include "tests/embedded_python.h"

int main(int argc, char** argv) {
  using dt::interpreter::py::PyRef;
  if (argc < 2) {
    std::fprintf(stderr, "usage: script_test SCRIPT [ARGS...]\n");
    return 2;
  }
  if (std::string error = dt::testing::StartEmbeddedPython(); !error.empty()) {
    std::fprintf(stderr, "cannot start Python: %s\n", error.c_str());
    return 2;
  }
  int status = 0;
  {
    PyRef args = PyRef::Steal(PyList_New(0));
    for (int i = 1; i < argc; ++i) {
      PyRef arg = PyRef::Steal(PyUnicode_DecodeFSDefault(argv[i]));
      PyList_Append(args.get(), arg.get());
    }
    PySys_SetObject("argv", args.get());
    PyRef runpy = PyRef::Steal(PyImport_ImportModule("runpy"));
    PyRef result = runpy ? PyRef::Steal(PyObject_CallMethod(runpy.get(), "run_path", "sOs", argv[1], Py_None, "__main__"))
                         : PyRef();
    if (!result) {
      if (PyErr_ExceptionMatches(PyExc_SystemExit)) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyErr_NormalizeException(&type, &value, &tb);
        PyRef code = PyRef::Steal(value != nullptr ? PyObject_GetAttrString(value, "code") : nullptr);
        status = code && PyLong_Check(code.get()) ? static_cast<int>(PyLong_AsLong(code.get()))
                 : code && code.get() != Py_None ? 1 : 0;
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
      } else {
        std::fprintf(stderr, "%s", dt::testing::TakePythonError().c_str());
        status = 1;
      }
    }
  }
  if (Py_FinalizeEx() < 0 && status == 0) status = 1;
  return status;
}
