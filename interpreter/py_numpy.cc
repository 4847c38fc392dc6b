// numpy interop: dyntrace.from_numpy, dyntrace.as_tensor, and numpy operands of Tensor operators.
//
// numpy is never imported here: an object can only be an ndarray once the program imported numpy,
// so its types are looked up in sys.modules. Arrays come in through the buffer protocol, not
// DLPack: numpy 1.24 exports uint8 and bool under one DLPack code, and refuses read-only arrays.
#include <Python.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "interpreter/py_ref.h"
#include "interpreter/py_str.h"
#include "interpreter/py_types.h"
#include "runtime/copy.h"
#include "runtime/errors.h"

namespace dt::interpreter::py {
namespace {

// numpy.<name> as a new reference, or null (numpy not imported, or no such name) with no error set.
PyRef NumpyAttr(const char* name) {
  PyRef numpy = PyRef::Steal(PyImport_GetModule(PyRef::Steal(PyUnicode_FromString("numpy")).get()));
  if (!numpy) {
    PyErr_Clear();
    return PyRef();
  }
  PyRef attr = PyRef::Steal(PyObject_GetAttrString(numpy.get(), name));
  if (!attr) PyErr_Clear();
  return attr;
}

// The numpy type `name` once numpy is imported; kept for the life of the process (numpy's types
// are never unloaded). Null before numpy is imported.
PyObject* NumpyType(PyObject** slot, const char* name) {
  if (*slot == nullptr) {
    PyRef type = NumpyAttr(name);
    if (type && PyType_Check(type.get())) *slot = type.Release();
  }
  return *slot;
}

bool IsInstanceOf(PyObject* obj, PyObject* type) {
  return type != nullptr && PyObject_TypeCheck(obj, reinterpret_cast<PyTypeObject*>(type));
}

// The dtype of `array.dtype` (kind and item size), or PyTorch's TypeError naming the numpy type.
absl::StatusOr<DType> DTypeOfArray(PyObject* array) {
  PyRef descr = PyRef::Steal(PyObject_GetAttrString(array, "dtype"));
  PyRef kind = descr ? PyRef::Steal(PyObject_GetAttrString(descr.get(), "kind")) : PyRef();
  PyRef size = descr ? PyRef::Steal(PyObject_GetAttrString(descr.get(), "itemsize")) : PyRef();
  PyRef type = descr ? PyRef::Steal(PyObject_GetAttrString(descr.get(), "type")) : PyRef();
  if (!kind || !size || !type || !PyUnicode_Check(kind.get()) || !PyType_Check(type.get())) {
    PyErr_Clear();
    return Error(ErrorKind::kType, "from_numpy(): the array has no readable dtype");
  }
  const long bytes = PyLong_AsLong(size.get());
  struct Known {
    const char* kind;
    long bytes;
    DType dtype;
  };
  for (const Known& k : {Known{"b", 1, DType::kBool}, Known{"u", 1, DType::kUInt8}, Known{"i", 1, DType::kInt8},
                         Known{"i", 2, DType::kInt16}, Known{"i", 4, DType::kInt32}, Known{"i", 8, DType::kInt64},
                         Known{"f", 2, DType::kFloat16}, Known{"f", 4, DType::kFloat32},
                         Known{"f", 8, DType::kFloat64}}) {
    if (PyUnicode_CompareWithASCIIString(kind.get(), k.kind) == 0 && bytes == k.bytes) return k.dtype;
  }
  return Error(ErrorKind::kType,
               absl::StrFormat("can't convert np.ndarray of type %s. The only supported types are: float64, "
                               "float32, float16, int64, int32, int16, int8, uint8, and bool.",
                               reinterpret_cast<PyTypeObject*>(type.get())->tp_name));
}

absl::Status CheckNativeOrder(PyObject* array) {
  PyRef descr = PyRef::Steal(PyObject_GetAttrString(array, "dtype"));
  PyRef native = descr ? PyRef::Steal(PyObject_GetAttrString(descr.get(), "isnative")) : PyRef();
  if (!native) {
    PyErr_Clear();
    return Error(ErrorKind::kType, "from_numpy(): the array has no readable dtype");
  }
  if (native.get() == Py_True) return absl::OkStatus();
  return Error(ErrorKind::kValue,
               "given numpy array has byte order different from the native byte order. Conversion between "
               "byte orders is currently not supported.");
}

// Strides in elements; PyTorch's ValueErrors for negative and misaligned strides.
absl::StatusOr<Dims> ElementStrides(const Py_buffer& view, int64_t itemsize) {
  Dims strides(view.ndim);
  for (int i = 0; i < view.ndim; ++i) {
    if (view.strides[i] < 0) {
      return Error(ErrorKind::kValue,
                   "At least one stride in the given numpy array is negative, and tensors with negative "
                   "strides are not currently supported. (You can probably work around this by making a "
                   "copy of your array  with array.copy().) ");
    }
    if (view.strides[i] % itemsize != 0) {
      return Error(ErrorKind::kValue,
                   "given numpy array strides not a multiple of the element byte size. Copy the numpy "
                   "array to reallocate the memory.");
    }
    strides[i] = view.strides[i] / itemsize;
  }
  return strides;
}

// A tensor over the array's memory; the buffer (and through it the array) is held until the
// last view of the storage is gone. `readonly` is set to whether numpy forbids writing.
absl::StatusOr<Tensor> ShareArray(PyObject* array, bool* readonly) {
  DT_ASSIGN_OR_RETURN(DType dtype, DTypeOfArray(array));
  DT_RETURN_IF_ERROR(CheckNativeOrder(array));
  auto* view = new Py_buffer();
  if (PyObject_GetBuffer(array, view, PyBUF_RECORDS_RO) < 0) {
    delete view;
    PyErr_Clear();
    return Error(ErrorKind::kType, "from_numpy(): the array does not expose its memory");
  }
  // Released under the GIL: the last view may die on a thread that does not hold it.
  auto release = [view] {
    PyGILState_STATE gil = PyGILState_Ensure();
    PyBuffer_Release(view);
    PyGILState_Release(gil);
    delete view;
  };
  auto strides = ElementStrides(*view, ItemSize(dtype));
  if (!strides.ok()) {
    release();
    return strides.status();
  }
  Dims sizes(view->shape, view->shape + view->ndim);
  int64_t span = 1;
  for (int i = 0; i < view->ndim; ++i) span = sizes[i] == 0 ? 0 : span;
  for (int i = 0; span != 0 && i < view->ndim; ++i) span += (sizes[i] - 1) * (*strides)[i];
  *readonly = view->readonly != 0;
  auto storage = Storage::Wrap(view->buf, static_cast<size_t>(span * ItemSize(dtype)), Device::Cpu(), release);
  return Tensor(std::move(storage), sizes, *strides, 0, dtype);
}

}  // namespace

bool IsNdarray(PyObject* obj) {
  static PyObject* ndarray = nullptr;
  return IsInstanceOf(obj, NumpyType(&ndarray, "ndarray"));
}

bool IsNumpyScalar(PyObject* obj) {
  static PyObject* generic = nullptr;
  return IsInstanceOf(obj, NumpyType(&generic, "generic"));
}

absl::StatusOr<Scalar> NumpyScalarValue(PyObject* obj) {
  static PyObject* bool_type = nullptr;
  static PyObject* integer = nullptr;
  static PyObject* floating = nullptr;
  if (IsInstanceOf(obj, NumpyType(&bool_type, "bool_"))) {
    const int truth = PyObject_IsTrue(obj);
    if (truth >= 0) return Scalar::Bool(truth == 1);
  } else if (IsInstanceOf(obj, NumpyType(&integer, "integer"))) {
    const long long v = PyLong_AsLongLong(obj);  // through np.integer.__index__
    if (!(v == -1 && PyErr_Occurred())) return Scalar::Int(v);
  } else if (IsInstanceOf(obj, NumpyType(&floating, "floating"))) {
    const double v = PyFloat_AsDouble(obj);
    if (!(v == -1.0 && PyErr_Occurred())) return Scalar::Float(v);
  } else {
    return Error(ErrorKind::kType, absl::StrCat("numpy scalars of type ", Py_TYPE(obj)->tp_name,
                                                " are not supported: dyntrace has no dtype for them"));
  }
  PyErr_Clear();  // uint64 beyond int64, say
  return Error(ErrorKind::kValue,
               absl::StrCat("a numpy scalar of type ", Py_TYPE(obj)->tp_name, " does not fit a dyntrace number"));
}

absl::StatusOr<Tensor> TensorFromNumpy(PyObject* obj) {
  if (!IsNdarray(obj)) {
    return Error(ErrorKind::kType, absl::StrFormat("expected np.ndarray (got %s)", Py_TYPE(obj)->tp_name));
  }
  bool readonly = false;
  DT_ASSIGN_OR_RETURN(Tensor t, ShareArray(obj, &readonly));
  // dyntrace tensors are always writable: sharing read-only memory would let a write crash the
  // process or change bytes numpy promised were constant (PyTorch only warns here).
  if (readonly) {
    return Error(ErrorKind::kValue,
                 "from_numpy(): the given NumPy array is not writable, and dyntrace does not support "
                 "non-writable tensors; copy it (dyntrace.tensor(a) or a.copy()) or make it writable first");
  }
  return t;
}

absl::StatusOr<Tensor> NumpyOperand(PyObject* array) {
  bool readonly = false;
  // An operand is only read by the operator, so read-only memory may be shared.
  return ShareArray(array, &readonly);
}

absl::StatusOr<Tensor> CopyFromNumpy(PyObject* array) {
  bool readonly = false;
  DT_ASSIGN_OR_RETURN(Tensor t, ShareArray(array, &readonly));
  return Clone(t);
}

namespace {

PyObject* FnFromNumpy(PyObject*, PyObject* obj) {
  auto t = TensorFromNumpy(obj);
  return t.ok() ? Wrap(*std::move(t)) : RaiseStatus(t.status());
}

// `t.to(dtype=..., device=...)` for the arguments given; `t` itself when none is (a new reference).
PyObject* ConvertTo(PyObject* t, PyObject* dtype, PyObject* device) {
  PyRef kwargs = PyRef::Steal(PyDict_New());
  if (!kwargs) return nullptr;
  if (dtype != Py_None && PyDict_SetItemString(kwargs.get(), "dtype", dtype) < 0) return nullptr;
  if (device != Py_None && PyDict_SetItemString(kwargs.get(), "device", device) < 0) return nullptr;
  if (PyDict_GET_SIZE(kwargs.get()) == 0) return Py_NewRef(t);
  PyRef to = PyRef::Steal(PyObject_GetAttrString(t, "to"));
  PyRef empty = PyRef::Steal(PyTuple_New(0));
  if (!to || !empty) return nullptr;
  return PyObject_Call(to.get(), empty.get(), kwargs.get());
}

// The data as a tensor without copying where it can be shared: a tensor itself, an ndarray's or
// another DLPack producer's memory; converted by `to()` where dtype or device differ. Anything
// else is copied as dyntrace.tensor() copies it.
PyObject* FnAsTensor(PyObject*, PyObject* args, PyObject* kwargs) {
  PyObject* data = nullptr;
  PyObject* dtype = Py_None;
  PyObject* device = Py_None;
  static const char* kwlist[] = {"data", "dtype", "device", nullptr};
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|OO:as_tensor", const_cast<char**>(kwlist), &data, &dtype,
                                   &device)) {
    return nullptr;
  }
  absl::StatusOr<Tensor> shared = Error(ErrorKind::kType, "");
  if (IsTensor(data)) return ConvertTo(data, dtype, device);
  if (IsNdarray(data)) {
    bool readonly = false;
    shared = ShareArray(data, &readonly);
    // Read-only memory cannot back a writable tensor: as_tensor copies it instead.
    if (shared.ok() && readonly) shared = Clone(*shared);
  } else if (!PySequence_Check(data) && PyObject_HasAttrString(data, "__dlpack__")) {
    shared = TensorFromDLPack(data);
  } else {
    // Typed while converting, as dyntrace.tensor(data, dtype=...) does; moved by to() below.
    absl::StatusOr<DType> d = dtype == Py_None ? absl::StatusOr<DType>(DType::kBool)
                                               : ToDType(dtype, "as_tensor(): argument 'dtype'");
    if (!d.ok()) return RaiseStatus(d.status());
    shared = TensorFromData(data, dtype == Py_None ? std::nullopt : std::optional<DType>(*d), std::nullopt);
  }
  if (!shared.ok()) return RaiseStatus(shared.status());
  PyRef t = PyRef::Steal(Wrap(*std::move(shared)));
  return t ? ConvertTo(t.get(), dtype, device) : nullptr;
}

PyMethodDef numpy_functions[] = {
    {"from_numpy", FnFromNumpy, METH_O,
     "from_numpy(a): a CPU tensor sharing memory with the writable numpy array `a` (which it keeps alive)"},
    {"as_tensor", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(FnAsTensor)),
     METH_VARARGS | METH_KEYWORDS,
     "as_tensor(data, dtype=None, device=None): `data` as a tensor, sharing its memory where dtype and device "
     "allow"},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace

bool AddNumpyBindings(PyObject* module) { return PyModule_AddFunctions(module, numpy_functions) == 0; }

}  // namespace dt::interpreter::py
