// interpreter/py_sets.cc: sets made by traced code, rebuilt from their history (py_types.h).
#include <Python.h>

#include "interpreter/py_ref.h"
#include "interpreter/py_types.h"

namespace dt::interpreter::py {
namespace {

// The set `a op b`, by CPython's own operator on the rebuilt operands.
PyObject* FromOperator(PyObject* op, PyObject* a_history, PyObject* b_history) {
  PyRef a = PyRef::Steal(ReplaySet(a_history));
  PyRef b = a ? PyRef::Steal(ReplaySet(b_history)) : PyRef();
  if (!b) return nullptr;
  switch (PyLong_AsLong(op)) {
    case kSetOr: return PyNumber_Or(a.get(), b.get());
    case kSetAnd: return PyNumber_And(a.get(), b.get());
    case kSetSub: return PyNumber_Subtract(a.get(), b.get());
    case kSetXor: return PyNumber_Xor(a.get(), b.get());
    default: break;
  }
  PyErr_SetString(PyExc_SystemError, "dyntrace: a set history with an unknown operator");
  return nullptr;
}

// One step on `set`; false with an error set when it fails.
bool Apply(PyObject* set, PyObject* step) {
  const long kind = PyLong_AsLong(PyTuple_GET_ITEM(step, 0));
  switch (kind) {
    case kSetAdd: return PySet_Add(set, PyTuple_GET_ITEM(step, 1)) == 0;
    case kSetDiscard: return PySet_Discard(set, PyTuple_GET_ITEM(step, 1)) >= 0;
    case kSetPop: {
      PyRef popped = PyRef::Steal(PySet_Pop(set));
      return static_cast<bool>(popped);
    }
    case kSetUpdate: {
      // set.update(other) merges other's table, as set(other) and `a | b` do.
      PyRef other = PyRef::Steal(ReplaySet(PyTuple_GET_ITEM(step, 1)));
      PyRef r = other ? PyRef::Steal(PyObject_CallMethod(set, "update", "O", other.get())) : PyRef();
      return static_cast<bool>(r);
    }
    case kSetUpdateWith:
    case kSetDifferenceUpdateWith: {
      // One argument, never unpacked: PyObject_CallMethod's "O" would spread a tuple.
      PyRef method = PyRef::Steal(PyUnicode_FromString(kind == kSetUpdateWith ? "update" : "difference_update"));
      PyRef r = method ? PyRef::Steal(PyObject_CallMethodOneArg(set, method.get(), PyTuple_GET_ITEM(step, 1))) : PyRef();
      return static_cast<bool>(r);
    }
    default: break;
  }
  PyErr_SetString(PyExc_SystemError, "dyntrace: a malformed set history");
  return false;
}

}  // namespace

PyObject* ReplaySet(PyObject* history) {
  if (PyFrozenSet_CheckExact(history)) return Py_NewRef(history);  // a constant operand as it is
  const Py_ssize_t n = PyTuple_GET_SIZE(history);
  Py_ssize_t i = 0;
  PyRef set;
  if (n > 0 && PyLong_AsLong(PyTuple_GET_ITEM(PyTuple_GET_ITEM(history, 0), 0)) == kSetFrom) {
    PyObject* first = PyTuple_GET_ITEM(history, 0);
    set = PyRef::Steal(FromOperator(PyTuple_GET_ITEM(first, 1), PyTuple_GET_ITEM(first, 2), PyTuple_GET_ITEM(first, 3)));
    i = 1;
  } else {
    set = PyRef::Steal(PySet_New(nullptr));
  }
  if (!set) return nullptr;
  for (; i < n; ++i) {
    if (!Apply(set.get(), PyTuple_GET_ITEM(history, i))) return nullptr;
  }
  return set.Release();
}

}  // namespace dt::interpreter::py
