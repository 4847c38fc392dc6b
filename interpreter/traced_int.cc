#include "interpreter/traced_int.h"

namespace dt::interpreter::py {
namespace {

PyType_Slot slots[] = {
    {Py_tp_doc, const_cast<char*>("A run-time number of a dyntrace trace, as an int.")},
    {0, nullptr},
};
PyType_Spec spec = {"dyntrace._TracedInt", 0, 0, Py_TPFLAGS_DEFAULT, slots};

// Made on first use and kept for the process (the tracer runs with the GIL held).
PyObject* TracedIntType() {
  static PyObject* type = [] {
    PyObject* bases = PyTuple_Pack(1, reinterpret_cast<PyObject*>(&PyLong_Type));
    PyObject* t = bases != nullptr ? PyType_FromSpecWithBases(&spec, bases) : nullptr;
    Py_XDECREF(bases);
    return t;
  }();
  return type;
}

}  // namespace

PyObject* NewTracedInt(PyObject* value) {
  PyObject* type = TracedIntType();
  if (type == nullptr) return nullptr;
  return PyObject_CallOneArg(type, value);
}

bool IsTracedInt(PyObject* obj) {
  PyObject* type = TracedIntType();
  if (type == nullptr) {
    PyErr_Clear();
    return false;
  }
  return Py_TYPE(obj) == reinterpret_cast<PyTypeObject*>(type);
}

}  // namespace dt::interpreter::py
