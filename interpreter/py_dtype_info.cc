// interpreter/py_dtype_info.cc: dyntrace.finfo, dyntrace.iinfo, dyntrace.is_floating_point and
// dyntrace.numel, as torch has them.
//
// finfo(dtype) and iinfo(dtype) are struct sequences (named, read-only tuples) of Python numbers
// and the dtype: immutable, so compiled code folds them into constants (py_types.h IsDTypeInfo).
#include <Python.h>

#include <cstdint>
#include <limits>
#include <type_traits>

#include "interpreter/py_ref.h"
#include "interpreter/py_types.h"

namespace dt::interpreter::py {
namespace {

PyStructSequence_Field finfo_fields[] = {
    {"bits", "bits in the type"},
    {"eps", "the smallest x with 1 + x != 1"},
    {"max", "the largest finite value"},
    {"min", "the most negative finite value"},
    {"tiny", "the smallest positive normal value"},
    {"smallest_normal", "the smallest positive normal value"},
    {"resolution", "the approximate decimal resolution, 10 ** -precision"},
    {"dtype", "the dtype described"},
    {nullptr, nullptr},
};
PyStructSequence_Desc finfo_desc = {"dyntrace.finfo", "Machine limits of a floating dtype.", finfo_fields, 8};

PyStructSequence_Field iinfo_fields[] = {
    {"bits", "bits in the type"},
    {"max", "the largest value"},
    {"min", "the smallest value"},
    {"dtype", "the dtype described"},
    {nullptr, nullptr},
};
PyStructSequence_Desc iinfo_desc = {"dyntrace.iinfo", "Machine limits of an integer dtype.", iinfo_fields, 4};

PyTypeObject* finfo_type = nullptr;
PyTypeObject* iinfo_type = nullptr;

struct FloatLimits {
  int bits;
  double eps, max, tiny, resolution;
};

FloatLimits LimitsOf(DType dtype) {
  switch (dtype) {
    case DType::kFloat16: return {16, 0.0009765625, 65504.0, 6.103515625e-05, 0.001};
    // float32's exponent range with an 8-bit significand.
    case DType::kBFloat16: return {16, 0.0078125, 3.3895313892515355e+38, 1.1754943508222875e-38, 0.01};
    case DType::kFloat32:
      return {32, std::numeric_limits<float>::epsilon(), std::numeric_limits<float>::max(),
              std::numeric_limits<float>::min(), 1e-06};
    case DType::kFloat64:
      return {64, std::numeric_limits<double>::epsilon(), std::numeric_limits<double>::max(),
              std::numeric_limits<double>::min(), 1e-15};
    case DType::kBool:
    case DType::kUInt8:
    case DType::kInt8:
    case DType::kInt16:
    case DType::kInt32:
    case DType::kInt64: break;
  }
  return {0, 0, 0, 0, 0};
}

// The dtype argument (float32 when left out, as torch.finfo()), or null with TypeError set.
PyObject* DTypeArgument(PyObject* args, const char* name) {
  PyObject* dtype = nullptr;
  if (!PyArg_ParseTuple(args, name, &dtype)) return nullptr;
  if (dtype == nullptr) return WrapDType(DefaultFloat());
  if (!PyObject_TypeCheck(dtype, &DTypeType)) {
    PyErr_SetString(PyExc_TypeError, "expected a dyntrace dtype");
    return nullptr;
  }
  return Py_NewRef(dtype);
}

// Sets the struct sequence's fields from `values` (new references; null ends with an error).
PyObject* Filled(PyTypeObject* type, std::initializer_list<PyObject*> values) {
  PyRef info = PyRef::Steal(PyStructSequence_New(type));
  Py_ssize_t i = 0;
  bool ok = static_cast<bool>(info);
  for (PyObject* v : values) {
    ok = ok && v != nullptr;
    if (ok) {
      PyStructSequence_SetItem(info.get(), i++, v);
    } else {
      Py_XDECREF(v);
    }
  }
  return ok ? info.Release() : nullptr;
}

PyObject* FnFinfo(PyObject*, PyObject* args) {
  PyRef dtype = PyRef::Steal(DTypeArgument(args, "|O:finfo"));
  if (!dtype) return nullptr;
  const DType d = *ToDType(dtype.get(), "finfo");
  if (!IsFloating(d)) {
    PyErr_SetString(PyExc_TypeError, "finfo(): the dtype is not a floating point type");
    return nullptr;
  }
  const FloatLimits l = LimitsOf(d);
  return Filled(finfo_type, {PyLong_FromLong(l.bits), PyFloat_FromDouble(l.eps), PyFloat_FromDouble(l.max),
                             PyFloat_FromDouble(-l.max), PyFloat_FromDouble(l.tiny), PyFloat_FromDouble(l.tiny),
                             PyFloat_FromDouble(l.resolution), dtype.Release()});
}

PyObject* FnIinfo(PyObject*, PyObject* args) {
  PyObject* dtype = nullptr;
  if (!PyArg_ParseTuple(args, "O!:iinfo", &DTypeType, &dtype)) return nullptr;
  const DType d = *ToDType(dtype, "iinfo");
  if (!IsIntegral(d)) {
    PyErr_SetString(PyExc_TypeError, "iinfo(): the dtype is not an integer type");
    return nullptr;
  }
  return DT_DISPATCH_ALL(d, [&]() -> PyObject* {
    if constexpr (!std::is_integral_v<scalar_t> || std::is_same_v<scalar_t, bool>) {
      return nullptr;  // unreachable: refused above
    } else {
      using L = std::numeric_limits<scalar_t>;
      return Filled(iinfo_type, {PyLong_FromLong(static_cast<long>(ItemSize(d) * 8)),
                                 PyLong_FromLongLong(static_cast<long long>(L::max())),
                                 PyLong_FromLongLong(static_cast<long long>(L::lowest())), Py_NewRef(dtype)});
    }
  });
}

PyObject* FnIsFloatingPoint(PyObject*, PyObject* obj) {
  if (!IsTensor(obj)) {
    PyErr_Format(PyExc_TypeError, "is_floating_point(): argument 'input' must be Tensor, not %s", Py_TYPE(obj)->tp_name);
    return nullptr;
  }
  return PyObject_CallMethod(obj, "is_floating_point", nullptr);
}

PyObject* FnNumel(PyObject*, PyObject* obj) {
  if (!IsTensor(obj)) {
    PyErr_Format(PyExc_TypeError, "numel(): argument 'input' must be Tensor, not %s", Py_TYPE(obj)->tp_name);
    return nullptr;
  }
  return PyObject_CallMethod(obj, "numel", nullptr);
}

PyObject* FnGetDefaultDType(PyObject*, PyObject*) { return WrapDType(DefaultFloat()); }

// Any floating dtype, as torch.set_default_dtype: float16 included.
PyObject* FnSetDefaultDType(PyObject*, PyObject* dtype) {
  if (!PyObject_TypeCheck(dtype, &DTypeType)) {
    PyErr_Format(PyExc_TypeError, "set_default_dtype(): argument 'd' must be a dyntrace dtype, not %s",
                 Py_TYPE(dtype)->tp_name);
    return nullptr;
  }
  const DType d = *ToDType(dtype, "set_default_dtype");
  if (!IsFloating(d)) {
    PyErr_SetString(PyExc_TypeError, "only floating-point types are supported as the default type");
    return nullptr;
  }
  SetDefaultFloat(d);
  Py_RETURN_NONE;
}

PyMethodDef functions[] = {
    {"get_default_dtype", FnGetDefaultDType, METH_NOARGS,
     "get_default_dtype(): the dtype of Python floats and of float factories without a dtype (float32)"},
    {"set_default_dtype", FnSetDefaultDType, METH_O,
     "set_default_dtype(d): makes floating dtype d the default; compiled code made under another default is "
     "not reused"},
    {"finfo", FnFinfo, METH_VARARGS, "finfo(dtype=float32): machine limits of a floating dtype"},
    {"iinfo", FnIinfo, METH_VARARGS, "iinfo(dtype): machine limits of an integer dtype"},
    {"is_floating_point", FnIsFloatingPoint, METH_O, "is_floating_point(t): whether t's dtype is a floating type"},
    {"numel", FnNumel, METH_O, "numel(t): the number of elements of t"},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace

bool IsDTypeInfo(PyObject* obj) {
  return (finfo_type != nullptr && Py_IS_TYPE(obj, finfo_type)) || (iinfo_type != nullptr && Py_IS_TYPE(obj, iinfo_type));
}

bool AddDTypeInfo(PyObject* module) {
  finfo_type = PyStructSequence_NewType(&finfo_desc);
  iinfo_type = PyStructSequence_NewType(&iinfo_desc);
  if (finfo_type == nullptr || iinfo_type == nullptr) return false;
  return PyModule_AddFunctions(module, functions) == 0;
}

}  // namespace dt::interpreter::py
