#include "interpreter/sym_dict.h"

#include "interpreter/break_reason.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "runtime/errors.h"

namespace dt::interpreter::trace {
namespace {

// Whether hashing and comparing `key` is pure and cannot raise, so deciding equality at trace
// time is exactly what CPython would decide at run time. NaN is left out: a NaN key is found
// only by identity, and trace-time constants need not keep the identity of run-time objects.
bool HasPureKeySemantics(PyObject* key) {
  if (key == Py_None || key == Py_Ellipsis || PyBool_Check(key) || PyLong_CheckExact(key) ||
      PyUnicode_CheckExact(key) || PyBytes_CheckExact(key)) {
    return true;
  }
  if (PyFloat_CheckExact(key)) return !std::isnan(PyFloat_AS_DOUBLE(key));
  if (PyComplex_CheckExact(key)) {
    return !std::isnan(PyComplex_RealAsDouble(key)) && !std::isnan(PyComplex_ImagAsDouble(key));
  }
  if (PyTuple_CheckExact(key)) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(key); ++i) {
      if (!HasPureKeySemantics(PyTuple_GET_ITEM(key, i))) return false;
    }
    return true;
  }
  // A type that keeps object's hash and == compares by identity (dyntrace dtypes, functions).
  const PyTypeObject* type = Py_TYPE(key);
  return type->tp_hash == PyBaseObject_Type.tp_hash &&
         type->tp_richcompare == PyBaseObject_Type.tp_richcompare;
}

absl::Status Undecidable(PyObject* key) {
  // A graph break: CPython runs the instruction instead.
  return interpreter::Unsupported(
      absl::StrCat("a dict key of type ", Py_TYPE(key)->tp_name,
                   " whose hash or == cannot be decided at trace time"));
}

// CPython's dict key equality for keys that passed HasPureKeySemantics.
absl::StatusOr<bool> SameKey(PyObject* a, PyObject* b) {
  if (a == b) return true;
  const Py_hash_t ha = PyObject_Hash(a);
  const Py_hash_t hb = PyObject_Hash(b);
  if (ha == -1 || hb == -1) {
    PyErr_Clear();
    return Undecidable(ha == -1 ? a : b);
  }
  if (ha != hb) return false;
  const int eq = PyObject_RichCompareBool(a, b, Py_EQ);
  if (eq < 0) {
    PyErr_Clear();
    return Undecidable(a);
  }
  return eq == 1;
}

}  // namespace

absl::StatusOr<std::optional<size_t>> DictFind(const SymValue& dict, PyObject* key) {
  if (!HasPureKeySemantics(key)) return Undecidable(key);
  for (size_t i = 0; i < dict.keys.size(); ++i) {
    PyObject* k = dict.keys[i].get();
    if (!HasPureKeySemantics(k)) return Undecidable(k);
    DT_ASSIGN_OR_RETURN(bool same, SameKey(k, key));
    if (same) return i;
  }
  return std::nullopt;
}

absl::Status DictInsert(SymValue& dict, py::PyRef key, Sym value) {
  DT_ASSIGN_OR_RETURN(std::optional<size_t> at, DictFind(dict, key.get()));
  if (at.has_value()) {
    dict.items[*at] = std::move(value);
    return absl::OkStatus();
  }
  dict.keys.push_back(std::move(key));
  dict.items.push_back(std::move(value));
  return absl::OkStatus();
}

}  // namespace dt::interpreter::trace
