// Python dtype and device objects, exceptions, and conversions of Python values.
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "interpreter/py_str.h"
#include "interpreter/py_types.h"
#include "runtime/copy.h"
#include "runtime/cuda_driver.h"
#include "runtime/cuda_tensor.h"
#include "runtime/dlpack.h"
#include "runtime/errors.h"

namespace dt::interpreter::py {

PyObject* ShapeError = nullptr;

// ---------------------------------------------------------------------------------------------
// dtype objects: one immortal instance per DType.
struct PyDType {
  PyObject_HEAD
  DType dtype;
};

namespace {

PyDType dtype_singletons[kNumDTypes];

PyObject* DTypeRepr(PyObject* self) {
  return PyUnicode_FromFormat("dyntrace.%s",
                              std::string(DTypeName(reinterpret_cast<PyDType*>(self)->dtype)).c_str());
}

PyObject* DTypeIsFloating(PyObject* self, void*) {
  return PyBool_FromLong(IsFloating(reinterpret_cast<PyDType*>(self)->dtype));
}

PyObject* DTypeItemsize(PyObject* self, void*) {
  return PyLong_FromLongLong(ItemSize(reinterpret_cast<PyDType*>(self)->dtype));
}

PyGetSetDef dtype_getset[] = {
    {"is_floating_point", DTypeIsFloating, nullptr, nullptr, nullptr},
    {"itemsize", DTypeItemsize, nullptr, nullptr, nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

// ---------------------------------------------------------------------------------------------
struct PyDevice {
  PyObject_HEAD
  Device device;
};

PyObject* DeviceNew(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  PyObject* spec = nullptr;
  static const char* kwlist[] = {"type", nullptr};
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O:device", const_cast<char**>(kwlist), &spec)) {
    return nullptr;
  }
  auto device = ToDevice(spec, "device()");
  if (!device.ok()) return RaiseStatus(device.status());
  return WrapDevice(*device);
}

PyObject* DeviceRepr(PyObject* self) {
  const Device& d = reinterpret_cast<PyDevice*>(self)->device;
  if (d.type == DeviceType::kCuda) return PyUnicode_FromFormat("device(type='cuda', index=%d)", d.index);
  return PyUnicode_FromFormat("device(type='%s')", d.ToString().c_str());
}

PyObject* DeviceStr(PyObject* self) {
  return PyUnicode_FromString(reinterpret_cast<PyDevice*>(self)->device.ToString().c_str());
}

PyObject* DeviceTypeName(PyObject* self, void*) {
  const Device& d = reinterpret_cast<PyDevice*>(self)->device;
  return PyUnicode_FromString(d.type == DeviceType::kCuda ? "cuda" : d.ToString().c_str());
}

PyObject* DeviceIndex(PyObject* self, void*) {
  const Device& d = reinterpret_cast<PyDevice*>(self)->device;
  if (d.type != DeviceType::kCuda) Py_RETURN_NONE;
  return PyLong_FromLong(d.index);
}

PyObject* DeviceRichCompare(PyObject* a, PyObject* b, int op) {
  if (!PyObject_TypeCheck(b, &DeviceType) || (op != Py_EQ && op != Py_NE)) Py_RETURN_NOTIMPLEMENTED;
  const bool eq = reinterpret_cast<PyDevice*>(a)->device == reinterpret_cast<PyDevice*>(b)->device;
  return PyBool_FromLong(op == Py_EQ ? eq : !eq);
}

Py_hash_t DeviceHash(PyObject* self) {
  const Device& d = reinterpret_cast<PyDevice*>(self)->device;
  return static_cast<Py_hash_t>(static_cast<int>(d.type) * 1000 + d.index + 1);
}

PyGetSetDef device_getset[] = {
    {"type", DeviceTypeName, nullptr, nullptr, nullptr},
    {"index", DeviceIndex, nullptr, nullptr, nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

}  // namespace

PyTypeObject DTypeType = {PyVarObject_HEAD_INIT(nullptr, 0) "dyntrace.dtype"};
PyTypeObject DeviceType = {PyVarObject_HEAD_INIT(nullptr, 0) "dyntrace.device"};

bool InitValueTypes(PyObject* module) {
  DTypeType.tp_basicsize = sizeof(PyDType);
  DTypeType.tp_flags = Py_TPFLAGS_DEFAULT;
  DTypeType.tp_repr = DTypeRepr;
  DTypeType.tp_getset = dtype_getset;
  DTypeType.tp_doc = "An element type: dyntrace.float32, dyntrace.int64, ...";
  if (PyType_Ready(&DTypeType) < 0) return false;
  for (DType d : kAllDTypes) {
    PyDType* obj = &dtype_singletons[static_cast<int>(d)];
    PyObject_Init(reinterpret_cast<PyObject*>(obj), &DTypeType);
    obj->dtype = d;
    Py_INCREF(obj);  // static storage: never deallocated
  }
  DeviceType.tp_basicsize = sizeof(PyDevice);
  DeviceType.tp_flags = Py_TPFLAGS_DEFAULT;
  DeviceType.tp_new = DeviceNew;
  DeviceType.tp_repr = DeviceRepr;
  DeviceType.tp_str = DeviceStr;
  DeviceType.tp_getset = device_getset;
  DeviceType.tp_richcompare = DeviceRichCompare;
  DeviceType.tp_hash = DeviceHash;
  DeviceType.tp_doc = "device(type): where a tensor lives ('cpu', 'cuda', 'cuda:1')";
  if (PyType_Ready(&DeviceType) < 0) return false;
  if (PyModule_AddObjectRef(module, "dtype", reinterpret_cast<PyObject*>(&DTypeType)) < 0) return false;
  if (PyModule_AddObjectRef(module, "device", reinterpret_cast<PyObject*>(&DeviceType)) < 0) return false;
  const std::pair<const char*, DType> names[] = {
      {"bool", DType::kBool},       {"int32", DType::kInt32},     {"int", DType::kInt32},
      {"int64", DType::kInt64},     {"long", DType::kInt64},      {"float16", DType::kFloat16},
      {"half", DType::kFloat16},    {"float32", DType::kFloat32}, {"float", DType::kFloat32},
      {"float64", DType::kFloat64}, {"double", DType::kFloat64},   {"uint8", DType::kUInt8},
      {"int8", DType::kInt8},       {"int16", DType::kInt16},     {"short", DType::kInt16},
      {"bfloat16", DType::kBFloat16},
  };
  for (const auto& [name, dtype] : names) {
    if (PyModule_AddObjectRef(module, name, WrapDType(dtype)) < 0) return false;
    Py_DECREF(WrapDType(dtype));  // balance the extra reference WrapDType returned
  }
  // RuntimeError for PyTorch habits, ValueError for Python ones.
  PyRef bases = PyRef::Steal(PyTuple_Pack(2, PyExc_RuntimeError, PyExc_ValueError));
  ShapeError = PyErr_NewExceptionWithDoc("dyntrace.ShapeError",
                                         "Tensor shapes do not fit together (a RuntimeError and a "
                                         "ValueError).",
                                         bases.get(), nullptr);
  if (ShapeError == nullptr) return false;
  return PyModule_AddObjectRef(module, "ShapeError", ShapeError) >= 0;
}

PyObject* WrapDType(DType dtype) {
  PyObject* obj = reinterpret_cast<PyObject*>(&dtype_singletons[static_cast<int>(dtype)]);
  Py_INCREF(obj);
  return obj;
}

PyObject* WrapDevice(Device device) {
  PyDevice* obj = PyObject_New(PyDevice, &DeviceType);
  if (obj == nullptr) return nullptr;
  obj->device = device;
  return reinterpret_cast<PyObject*>(obj);
}

PyObject* RaiseStatus(const absl::Status& status) {
  PyObject* type = PyExc_RuntimeError;
  switch (KindOf(status)) {
    case ErrorKind::kValue: type = PyExc_ValueError; break;
    case ErrorKind::kType: type = PyExc_TypeError; break;
    case ErrorKind::kIndex: type = PyExc_IndexError; break;
    case ErrorKind::kShape: type = ShapeError; break;
    case ErrorKind::kZeroDivision: type = PyExc_ZeroDivisionError; break;
    case ErrorKind::kNotImplemented: type = PyExc_NotImplementedError; break;
    case ErrorKind::kRuntime: type = PyExc_RuntimeError; break;
  }
  PyErr_SetString(type, std::string(status.message()).c_str());
  return nullptr;
}

namespace {
std::string TypeName(PyObject* obj) { return Py_TYPE(obj)->tp_name; }
}  // namespace

absl::StatusOr<Scalar> ToScalar(PyObject* obj, absl::string_view what) {
  if (PyBool_Check(obj)) return Scalar::Bool(obj == Py_True);
  if (PyLong_Check(obj)) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (overflow != 0) {
      return Error(ErrorKind::kValue, absl::StrCat(what, ": integer is too large for int64"));
    }
    return Scalar::Int(v);
  }
  if (PyFloat_Check(obj)) return Scalar::Float(PyFloat_AS_DOUBLE(obj));
  if (IsTensor(obj)) {
    const Tensor& t = Unwrap(obj);
    if (t.numel() == 1 && !t.is_meta()) return ItemOf(t);
  }
  // np.bool_ has no __index__, so the number protocol below would make it a float.
  if (IsNumpyScalar(obj)) return NumpyScalarValue(obj);
  // numpy scalars and other number-likes.
  if (PyIndex_Check(obj)) {
    PyRef index = PyRef::Steal(PyNumber_Index(obj));
    if (index) return ToScalar(index.get(), what);
    PyErr_Clear();
  }
  if (Py_TYPE(obj)->tp_as_number != nullptr && Py_TYPE(obj)->tp_as_number->nb_float != nullptr) {
    double v = PyFloat_AsDouble(obj);
    if (!(v == -1.0 && PyErr_Occurred())) return Scalar::Float(v);
    PyErr_Clear();
  }
  return Error(ErrorKind::kType,
               absl::StrFormat("%s must be a number, not %s", what, TypeName(obj)));
}

absl::StatusOr<DType> ToDType(PyObject* obj, absl::string_view what) {
  if (PyObject_TypeCheck(obj, &DTypeType)) return reinterpret_cast<PyDType*>(obj)->dtype;
  if (obj == reinterpret_cast<PyObject*>(&PyFloat_Type)) return DefaultFloat();
  if (obj == reinterpret_cast<PyObject*>(&PyLong_Type)) return DType::kInt64;
  if (obj == reinterpret_cast<PyObject*>(&PyBool_Type)) return DType::kBool;
  if (PyUnicode_Check(obj)) return DTypeFromName(py::Utf8Or(obj, "?"));  // "?" names no dtype
  return Error(ErrorKind::kType,
               absl::StrFormat("%s must be a dyntrace dtype (e.g. dyntrace.float32), not %s", what,
                               TypeName(obj)));
}

namespace {

// PyTorch's legacy tensor classes by dtype ("Float" for torch.FloatTensor).
constexpr std::pair<DType, const char*> kLegacyClasses[] = {
    {DType::kFloat32, "Float"}, {DType::kFloat64, "Double"}, {DType::kFloat16, "Half"},
    {DType::kBFloat16, "BFloat16"}, {DType::kInt64, "Long"}, {DType::kInt32, "Int"},
    {DType::kInt16, "Short"}, {DType::kInt8, "Char"}, {DType::kUInt8, "Byte"}, {DType::kBool, "Bool"}};

}  // namespace

std::string LegacyTensorTypeName(DType dtype, const Device& device) {
  for (const auto& [d, name] : kLegacyClasses) {
    if (d == dtype) return absl::StrCat("dyntrace.", device.is_cpu() ? "" : "cuda.", name, "Tensor");
  }
  return absl::StrCat("dyntrace.", DTypeName(dtype));
}

std::optional<DType> DTypeOfLegacyTypeName(absl::string_view name) {
  for (absl::string_view prefix : {"torch.cuda.", "torch.", "dyntrace.cuda.", "dyntrace."}) {
    if (!absl::ConsumePrefix(&name, prefix)) continue;
    for (const auto& [d, cls] : kLegacyClasses) {
      if (name == absl::StrCat(cls, "Tensor")) return d;
    }
    return std::nullopt;
  }
  return std::nullopt;
}

absl::StatusOr<Device> ToDevice(PyObject* obj, absl::string_view what) {
  if (PyObject_TypeCheck(obj, &DeviceType)) return reinterpret_cast<PyDevice*>(obj)->device;
  if (PyUnicode_Check(obj)) {
    auto d = ParseDevice(py::Utf8Or(obj, "?"));  // "?" names no device
    if (!d.ok()) return Error(ErrorKind::kValue, absl::StrCat(what, ": ", d.status().message()));
    return d;
  }
  return Error(ErrorKind::kType, absl::StrFormat("%s must be a device or a string like 'cpu', not %s",
                                                 what, TypeName(obj)));
}

absl::StatusOr<Dims> ToDims(PyObject* obj, absl::string_view what) {
  auto one = [&](PyObject* item) -> absl::StatusOr<int64_t> {
    if (PyFloat_Check(item) || IsTensor(item) && IsFloating(Unwrap(item).dtype())) {
      return Error(ErrorKind::kType,
                   absl::StrFormat("%s must be a sequence of ints, but got an element of type %s",
                                   what, TypeName(item)));
    }
    PyRef index = PyRef::Steal(PyNumber_Index(item));
    if (!index) {
      PyErr_Clear();
      return Error(ErrorKind::kType,
                   absl::StrFormat("%s must be an int or a sequence of ints, not %s", what,
                                   TypeName(item)));
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(index.get(), &overflow);
    if (overflow) return Error(ErrorKind::kValue, absl::StrCat(what, ": integer out of range"));
    return static_cast<int64_t>(v);
  };
  if (PyTuple_Check(obj) || PyList_Check(obj)) {
    PyRef seq = PyRef::Steal(PySequence_Fast(obj, ""));
    Dims out;
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq.get());
    for (Py_ssize_t i = 0; i < n; ++i) {
      auto v = one(PySequence_Fast_GET_ITEM(seq.get(), i));
      if (!v.ok()) return v.status();
      out.push_back(*v);
    }
    return out;
  }
  auto v = one(obj);
  if (!v.ok()) return v.status();
  return Dims{*v};
}

PyObject* FromScalar(Scalar s) {
  switch (s.kind()) {
    case Scalar::Kind::kBool: return PyBool_FromLong(s.ToBool());
    case Scalar::Kind::kInt: return PyLong_FromLongLong(s.ToInt());
    case Scalar::Kind::kFloat: return PyFloat_FromDouble(s.ToDouble());
  }
  __builtin_unreachable();
}

// ---------------------------------------------------------------------------------------------
// dyntrace.tensor(data)

namespace {

// Walks nested sequences once to find the shape, then again to collect values.
absl::Status InferShape(PyObject* obj, Dims& shape, int depth) {
  if (PySequence_Check(obj) && !PyUnicode_Check(obj) && !IsTensor(obj) && !PyBytes_Check(obj)) {
    const Py_ssize_t n = PySequence_Size(obj);
    if (n < 0) {
      PyErr_Clear();
      return Error(ErrorKind::kType, "tensor(): could not read the length of a sequence");
    }
    shape.push_back(n);
    if (n == 0) return absl::OkStatus();
    PyRef first = PyRef::Steal(PySequence_GetItem(obj, 0));
    if (!first) {
      PyErr_Clear();
      return Error(ErrorKind::kType, "tensor(): could not index a sequence");
    }
    return InferShape(first.get(), shape, depth + 1);
  }
  if (IsTensor(obj)) {
    const Tensor& t = Unwrap(obj);
    for (int64_t s : t.sizes()) shape.push_back(s);
  }
  return absl::OkStatus();
}

struct Collected {
  std::vector<Scalar> values;
  bool any_float = false;
  bool any_int = false;
  bool any_bool = false;
};

absl::Status Collect(PyObject* obj, const Dims& shape, size_t depth, Collected& out) {
  if (depth < shape.size() && !IsTensor(obj)) {
    if (!PySequence_Check(obj) || PyUnicode_Check(obj)) {
      return Error(ErrorKind::kValue,
                   absl::StrFormat("tensor(): expected a sequence of length %d at dim %d (got %s)",
                                   shape[depth], depth, TypeName(obj)));
    }
    const Py_ssize_t n = PySequence_Size(obj);
    if (n != shape[depth]) {
      return Error(ErrorKind::kValue,
                   absl::StrFormat("tensor(): expected sequence of length %d at dim %d (got %d)",
                                   shape[depth], depth, n));
    }
    for (Py_ssize_t i = 0; i < n; ++i) {
      PyRef item = PyRef::Steal(PySequence_GetItem(obj, i));
      if (!item) {
        PyErr_Clear();
        return Error(ErrorKind::kType, "tensor(): could not index a sequence");
      }
      DT_RETURN_IF_ERROR(Collect(item.get(), shape, depth + 1, out));
    }
    return absl::OkStatus();
  }
  if (IsTensor(obj)) {
    const Tensor& t = Unwrap(obj);
    if (t.ndim() != static_cast<int64_t>(shape.size() - depth)) {
      return Error(ErrorKind::kValue, "tensor(): nested tensors must all have the same shape");
    }
    Tensor flat = Contiguous(t);
    for (int64_t i = 0; i < flat.numel(); ++i) {
      Tensor one = flat.AsStrided({}, {}, flat.offset() + i);
      auto s = ItemOf(one);
      if (!s.ok()) return s.status();
      out.values.push_back(*s);
    }
    out.any_float |= IsFloating(t.dtype());
    out.any_int |= IsIntegral(t.dtype());
    out.any_bool |= t.dtype() == DType::kBool;
    return absl::OkStatus();
  }
  auto s = ToScalar(obj, "tensor(): each element");
  if (!s.ok()) {
    // A number that does not fit (e.g. an int beyond int64) keeps its own error.
    if (KindOf(s.status()) != ErrorKind::kType) return s.status();
    return Error(ErrorKind::kType,
                 absl::StrFormat("tensor(): could not convert an element of type %s to a number",
                                 TypeName(obj)));
  }
  out.any_float |= s->is_float();
  out.any_int |= s->is_int();
  out.any_bool |= s->is_bool();
  out.values.push_back(*s);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Tensor> TensorFromDLPack(PyObject* obj) {
  PyRef capsule;
  if (PyCapsule_CheckExact(obj)) {
    capsule = PyRef::Borrow(obj);
  } else {
    PyRef method = PyRef::Steal(PyObject_GetAttrString(obj, "__dlpack__"));
    if (!method) {
      PyErr_Clear();
      return Error(ErrorKind::kType,
                   absl::StrFormat("from_dlpack(): expected an object with __dlpack__ or a DLPack "
                                   "capsule, got %s",
                                   TypeName(obj)));
    }
    capsule = PyRef::Steal(PyObject_CallNoArgs(method.get()));
    if (!capsule) {
      PyRef type, value, tb;
      PyObject *t, *v, *b;
      PyErr_Fetch(&t, &v, &b);
      PyRef vs = PyRef::Steal(v ? PyObject_Str(v) : nullptr);
      Py_XDECREF(t);
      Py_XDECREF(v);
      Py_XDECREF(b);
      return Error(ErrorKind::kType, absl::StrCat("from_dlpack(): __dlpack__ failed: ",
                                                  py::Utf8Or(vs.get())));
    }
  }
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.get(), "dltensor"));
  if (managed == nullptr) {
    PyErr_Clear();
    return Error(ErrorKind::kValue,
                 "from_dlpack(): the capsule was already consumed or is not a 'dltensor'");
  }
  // The capsule no longer owns the tensor: mark it used so its destructor leaves it alone.
  PyCapsule_SetName(capsule.get(), "used_dltensor");
  return FromDLPack(managed);
}

namespace {

// tensor(data, dtype): a tensor, a numpy array or a DLPack producer keeps its device; nested
// Python numbers are gathered on the CPU.
absl::StatusOr<Tensor> TensorFromDataWhereItIs(PyObject* data, std::optional<DType> dtype) {
  if (IsTensor(data)) {
    const Tensor& t = Unwrap(data);
    return Clone(CastTo(t, dtype.value_or(t.dtype())));
  }
  if (IsNdarray(data)) {
    // Through numpy's buffer, not DLPack, which cannot tell uint8 from bool.
    DT_ASSIGN_OR_RETURN(Tensor t, CopyFromNumpy(data));
    return dtype.has_value() ? CastTo(t, *dtype) : t;
  }
  if (!PySequence_Check(data) && PyObject_HasAttrString(data, "__dlpack__")) {
    DT_ASSIGN_OR_RETURN(Tensor t, TensorFromDLPack(data));
    return Clone(CastTo(t, dtype.value_or(t.dtype())));
  }
  Dims shape;
  DT_RETURN_IF_ERROR(InferShape(data, shape, 0));
  Collected collected;
  DT_RETURN_IF_ERROR(Collect(data, shape, 0, collected));
  DType inferred = collected.any_float ? DefaultFloat()
                   : collected.any_int ? DType::kInt64
                   : collected.any_bool ? DType::kBool
                                        : DefaultFloat();
  const DType target = dtype.value_or(inferred);
  Tensor out = Tensor::Empty(shape, target, Device::Cpu());
  DT_DISPATCH_ALL(target, [&] {
    scalar_t* p = out.data_as<scalar_t>();
    for (size_t i = 0; i < collected.values.size(); ++i) {
      const Scalar& s = collected.values[i];
      if constexpr (std::is_same_v<scalar_t, bool>) p[i] = s.ToBool();
      else p[i] = s.To<scalar_t>();
    }
  });
  return out;
}

}  // namespace

absl::StatusOr<Tensor> TensorFromData(PyObject* data, std::optional<DType> dtype,
                                      std::optional<Device> device) {
  if (device.has_value()) DT_RETURN_IF_ERROR(CheckDeviceUsable(*device));
  DT_ASSIGN_OR_RETURN(Tensor t, TensorFromDataWhereItIs(data, dtype));
  if (!device.has_value() || t.device() == *device) return t;
  return ToDevice(t, *device);
}

bool InitTensorType(PyObject* module);  // py_tensor.cc

bool InitTypes(PyObject* module) { return InitValueTypes(module) && InitTensorType(module); }

namespace {
std::vector<PyCFunction>* process_constant_functions = new std::vector<PyCFunction>();
}  // namespace

void MarkProcessConstantFunction(PyCFunction fn) { process_constant_functions->push_back(fn); }

bool IsProcessConstantFunction(PyObject* fn) {
  if (!PyCFunction_Check(fn)) return false;
  const PyCFunction method = PyCFunction_GET_FUNCTION(fn);
  for (PyCFunction known : *process_constant_functions) {
    if (method == known) return true;
  }
  return false;
}

}  // namespace dt::interpreter::py
