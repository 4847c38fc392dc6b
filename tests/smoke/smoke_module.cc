// A minimal extension module, built against @local_python//:python_headers.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

namespace {

PyObject* Add(PyObject*, PyObject* args) {
  long a = 0, b = 0;
  if (!PyArg_ParseTuple(args, "ll", &a, &b)) return nullptr;
  return PyLong_FromLong(a + b);
}

PyMethodDef kMethods[] = {
    {"add", Add, METH_VARARGS, "Adds two integers."},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef kModule = {
    PyModuleDef_HEAD_INIT,
    "_smoke",
    "dyntrace build smoke test",
    -1,
    kMethods,
    nullptr,
    nullptr,
    nullptr,
    nullptr,
};

}  // namespace

PyMODINIT_FUNC PyInit__smoke() {
  PyObject* module = PyModule_Create(&kModule);
  // Lets the test check the module was built for the interpreter loading it.
  if (module && PyModule_AddStringConstant(module, "built_for", PY_VERSION) < 0) {
    Py_DECREF(module);
    return nullptr;
  }
  return module;
}
