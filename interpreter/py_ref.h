// interpreter/py_ref.h: an owning reference to a Python object.
//
// PyRef holds one strong reference and releases it on destruction. Functions taking a PyObject*
// borrow; functions returning PyRef hand over a new reference. Release() gives the reference to
// a CPython API that steals it (PyTuple_SET_ITEM, a return value).
//
//   PyRef list = PyRef::Steal(PyList_New(0));
//   if (!list) return nullptr;  // a Python error is set
#ifndef DYNTRACE_INTERPRETER_PY_REF_H_
#define DYNTRACE_INTERPRETER_PY_REF_H_

#include <Python.h>

#include <utility>

namespace dt::interpreter::py {

class PyRef {
 public:
  PyRef() = default;
  // Takes over a new reference (may be null after a failed API call).
  static PyRef Steal(PyObject* obj) { return PyRef(obj); }
  // Adds a reference to a borrowed object.
  static PyRef Borrow(PyObject* obj) {
    Py_XINCREF(obj);
    return PyRef(obj);
  }
  PyRef(const PyRef& other) : obj_(other.obj_) { Py_XINCREF(obj_); }
  PyRef(PyRef&& other) noexcept : obj_(std::exchange(other.obj_, nullptr)) {}
  PyRef& operator=(PyRef other) noexcept {
    std::swap(obj_, other.obj_);
    return *this;
  }
  ~PyRef() { Py_XDECREF(obj_); }

  PyObject* get() const { return obj_; }
  // Hands the reference to the caller.
  [[nodiscard]] PyObject* Release() { return std::exchange(obj_, nullptr); }
  explicit operator bool() const { return obj_ != nullptr; }

 private:
  explicit PyRef(PyObject* obj) : obj_(obj) {}
  PyObject* obj_ = nullptr;
};

}  // namespace dt::interpreter::py

#endif  // DYNTRACE_INTERPRETER_PY_REF_H_
