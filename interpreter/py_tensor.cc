// dyntrace.Tensor: the Python face of dt::Tensor. Ops come from the registry (py_ops.cc); this
// file holds what is not an op: attributes, conversions, indexing, operators, DLPack.
#include <vector>

#include "absl/strings/str_format.h"
#include "graph/autocast.h"
#include "graph/pointwise.h"
#include "interpreter/py_autograd.h"
#include "interpreter/py_str.h"
#include "interpreter/py_types.h"
#include "runtime/autograd_meta.h"
#include "runtime/copy.h"
#include "runtime/cuda_driver.h"
#include "runtime/cuda_tensor.h"
#include "runtime/dlpack.h"
#include "runtime/errors.h"
#include "runtime/format.h"
#include "runtime/indexing.h"

namespace dt::interpreter::py {

PyTypeObject TensorType = {PyVarObject_HEAD_INIT(nullptr, 0) "dyntrace.Tensor"};

PyObject* Wrap(Tensor t) {
  PyTensor* obj = PyObject_GC_New(PyTensor, &TensorType);
  if (obj == nullptr) return nullptr;
  new (&obj->tensor) Tensor(std::move(t));
  obj->weakrefs = nullptr;
  obj->marked_dynamic = 0;
  obj->marked_static = 0;
  obj->is_parameter = false;
  obj->grad_object = nullptr;
  return reinterpret_cast<PyObject*>(obj);
}

namespace {

const Tensor& Self(PyObject* self) { return Unwrap(self); }

void TensorDealloc(PyObject* self) {
  auto* obj = reinterpret_cast<PyTensor*>(self);
  if (obj->weakrefs != nullptr) PyObject_ClearWeakRefs(self);
  // Storage release may call a DLPack producer's deleter, which takes the GIL itself if needed.
  obj->tensor.~Tensor();
  Py_CLEAR(obj->grad_object);
  PyObject_GC_Del(self);
}

int TensorTraverse(PyObject*, visitproc, void*) { return 0; }

PyObject* TensorRepr(PyObject* self) {
  std::string text = FormatTensor(Self(self));
  const std::string suffix = AutogradReprSuffix(Self(self));
  if (!suffix.empty() && !text.empty() && text.back() == ')') text.insert(text.size() - 1, suffix);
  return PyUnicode_FromString(text.c_str());
}

// ---- attributes ----
PyObject* GetShape(PyObject* self, void*) {
  const Tensor& t = Self(self);
  PyObject* tuple = PyTuple_New(t.ndim());
  for (int64_t i = 0; i < t.ndim(); ++i) PyTuple_SET_ITEM(tuple, i, PyLong_FromLongLong(t.size(i)));
  return tuple;
}
PyObject* GetDType(PyObject* self, void*) { return WrapDType(Self(self).dtype()); }
PyObject* GetDevice(PyObject* self, void*) { return WrapDevice(Self(self).device()); }
PyObject* GetNdim(PyObject* self, void*) { return PyLong_FromLongLong(Self(self).ndim()); }
PyObject* GetIsCuda(PyObject* self, void*) {
  return PyBool_FromLong(Self(self).device().type == dt::DeviceType::kCuda);
}

PyObject* Transposed(PyObject* self, bool matrix) {
  const Tensor& t = Self(self);
  if (matrix && t.ndim() < 2) {
    PyErr_Format(PyExc_ValueError, "tensor.mT is only supported on matrices or batches of matrices. "
                 "Got %lld-D tensor.", static_cast<long long>(t.ndim()));
    return nullptr;
  }
  if (TracksGrad(t)) {
    Dims order;
    for (int64_t d = t.ndim() - 1; d >= 0; --d) order.push_back(d);
    auto r = matrix ? Call("transpose", {t, Scalar::Int(-1), Scalar::Int(-2)}) : Call("permute", {t, order});
    return r.ok() ? Wrap(*std::move(r)) : RaiseStatus(r.status());
  }
  Dims sizes = t.sizes(), strides = t.strides();
  if (matrix) {
    std::swap(sizes[t.ndim() - 1], sizes[t.ndim() - 2]);
    std::swap(strides[t.ndim() - 1], strides[t.ndim() - 2]);
  } else {
    std::reverse(sizes.begin(), sizes.end());
    std::reverse(strides.begin(), strides.end());
  }
  return Wrap(t.AsStrided(sizes, strides, t.offset()));
}
PyObject* GetT(PyObject* self, void*) { return Transposed(self, false); }
PyObject* GetMT(PyObject* self, void*) { return Transposed(self, true); }

PyGetSetDef tensor_getset[] = {
    {"shape", GetShape, nullptr, "the sizes, as a tuple", nullptr},
    {"dtype", GetDType, nullptr, "the element type", nullptr},
    {"device", GetDevice, nullptr, "where the elements live", nullptr},
    {"ndim", GetNdim, nullptr, "the number of dims", nullptr},
    {"is_cuda", GetIsCuda, nullptr, nullptr, nullptr},
    {"T", GetT, nullptr, "all dims reversed", nullptr},
    {"mT", GetMT, nullptr, "the last two dims swapped", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

// ---- methods ----
PyObject* MethodSize(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs == 0) return GetShape(self, nullptr);
  const Tensor& t = Self(self);
  long long dim = PyLong_AsLongLong(args[0]);
  if (dim == -1 && PyErr_Occurred()) return nullptr;
  auto d = NormalizeDim(dim, t.ndim());
  if (!d.ok()) return RaiseStatus(d.status());
  if (t.ndim() == 0) return RaiseStatus(Error(ErrorKind::kIndex, "size(): a 0-d tensor has no dims"));
  return PyLong_FromLongLong(t.size(*d));
}

PyObject* MethodStride(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  const Tensor& t = Self(self);
  if (nargs == 0) {
    PyObject* tuple = PyTuple_New(t.ndim());
    for (int64_t i = 0; i < t.ndim(); ++i) PyTuple_SET_ITEM(tuple, i, PyLong_FromLongLong(t.stride(i)));
    return tuple;
  }
  long long dim = PyLong_AsLongLong(args[0]);
  if (dim == -1 && PyErr_Occurred()) return nullptr;
  auto d = NormalizeDim(dim, t.ndim());
  if (!d.ok()) return RaiseStatus(d.status());
  return PyLong_FromLongLong(t.stride(*d));
}

PyObject* MethodNumel(PyObject* self, PyObject*) { return PyLong_FromLongLong(Self(self).numel()); }
PyObject* MethodDim(PyObject* self, PyObject*) { return PyLong_FromLongLong(Self(self).ndim()); }
PyObject* MethodIsContiguous(PyObject* self, PyObject*) {
  return PyBool_FromLong(Self(self).is_contiguous());
}
PyObject* MethodIsFloatingPoint(PyObject* self, PyObject*) {
  return PyBool_FromLong(IsFloating(Self(self).dtype()));
}
PyObject* MethodElementSize(PyObject* self, PyObject*) {
  return PyLong_FromLongLong(Self(self).itemsize());
}

PyObject* MethodItem(PyObject* self, PyObject*) {
  auto s = ItemOf(Self(self));
  if (!s.ok()) return RaiseStatus(s.status());
  return FromScalar(*s);
}

PyObject* ToList(const Tensor& t, int64_t dim, int64_t offset) {
  if (dim == t.ndim()) {
    auto s = ItemOf(t.AsStrided({}, {}, offset));
    if (!s.ok()) return RaiseStatus(s.status());
    return FromScalar(*s);
  }
  PyObject* list = PyList_New(t.size(dim));
  if (list == nullptr) return nullptr;
  for (int64_t i = 0; i < t.size(dim); ++i) {
    PyObject* item = ToList(t, dim + 1, offset + i * t.stride(dim));
    if (item == nullptr) {
      Py_DECREF(list);
      return nullptr;
    }
    PyList_SET_ITEM(list, i, item);
  }
  return list;
}

PyObject* MethodToList(PyObject* self, PyObject*) {
  const Tensor& t = Self(self);
  if (t.is_meta()) return RaiseStatus(Error(ErrorKind::kValue, "tolist() on a meta tensor"));
  if (!t.device().is_cpu()) {
    // One copy of the whole tensor, not one per element.
    auto host = dt::ToDevice(t, Device::Cpu());
    if (!host.ok()) return RaiseStatus(host.status());
    return ToList(*host, 0, host->offset());
  }
  return ToList(t, 0, t.offset());
}

// Conversions take the registry's path while autograd follows the tensor, so they are recorded.
absl::StatusOr<Tensor> Cast(const Tensor& t, DType dtype) {
  if (TracksGrad(t)) return Call("_to", {t, dtype});
  return CastTo(t, dtype);
}

absl::StatusOr<Tensor> Move(const Tensor& t, Device device) {
  if (TracksGrad(t)) return Call("_to_device", {t, device});
  return dt::ToDevice(t, device);
}

// As in PyTorch, a cast to the tensor's own dtype is the tensor itself (as to() is), so
// `x.float() is x` answers the same in plain Python and in traced code, which drops such casts.
PyObject* CastMethod(PyObject* self, DType dtype) {
  if (Self(self).dtype() == dtype) return Py_NewRef(self);
  auto r = Cast(Self(self), dtype);
  return r.ok() ? Wrap(*std::move(r)) : RaiseStatus(r.status());
}
// x.type(): its legacy class name; x.type(dtype) or x.type("torch.LongTensor"): a cast, as PyTorch.
PyObject* MethodType(PyObject* self, PyObject* args, PyObject* kwargs) {
  static const char* keywords[] = {"dtype", "non_blocking", nullptr};
  PyObject* target = Py_None;
  int non_blocking = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|Op:type", const_cast<char**>(keywords), &target, &non_blocking)) {
    return nullptr;
  }
  const Tensor& t = Self(self);
  if (target == Py_None) return PyUnicode_FromString(LegacyTensorTypeName(t.dtype(), t.device()).c_str());
  if (PyUnicode_Check(target)) {
    Py_ssize_t size = 0;
    const char* utf8 = PyUnicode_AsUTF8AndSize(target, &size);
    if (utf8 == nullptr) return nullptr;
    std::optional<DType> dtype = DTypeOfLegacyTypeName(absl::string_view(utf8, size));
    if (!dtype.has_value()) return PyErr_Format(PyExc_ValueError, "invalid type: '%U'", target);
    return CastMethod(self, *dtype);
  }
  absl::StatusOr<DType> dtype = ToDType(target, "type()");
  if (!dtype.ok()) return RaiseStatus(dtype.status());
  return CastMethod(self, *dtype);
}

PyObject* MethodFloat(PyObject* self, PyObject*) { return CastMethod(self, DType::kFloat32); }
PyObject* MethodDouble(PyObject* self, PyObject*) { return CastMethod(self, DType::kFloat64); }
PyObject* MethodHalf(PyObject* self, PyObject*) { return CastMethod(self, DType::kFloat16); }
PyObject* MethodBFloat16(PyObject* self, PyObject*) { return CastMethod(self, DType::kBFloat16); }
PyObject* MethodInt(PyObject* self, PyObject*) { return CastMethod(self, DType::kInt32); }
PyObject* MethodLong(PyObject* self, PyObject*) { return CastMethod(self, DType::kInt64); }
PyObject* MethodBool(PyObject* self, PyObject*) { return CastMethod(self, DType::kBool); }
PyObject* MethodByte(PyObject* self, PyObject*) { return CastMethod(self, DType::kUInt8); }
PyObject* MethodChar(PyObject* self, PyObject*) { return CastMethod(self, DType::kInt8); }
PyObject* MethodShort(PyObject* self, PyObject*) { return CastMethod(self, DType::kInt16); }

PyObject* MoveTo(PyObject* self, Device device) {
  const Tensor& t = Self(self);
  if (t.device() == device) {
    Py_INCREF(self);
    return self;
  }
  auto moved = Move(t, device);
  if (!moved.ok()) return RaiseStatus(moved.status());
  return Wrap(*moved);
}

PyObject* MethodCpu(PyObject* self, PyObject*) { return MoveTo(self, Device::Cpu()); }

// cuda() / cuda(device): device is an index, "cuda:N" or a device object.
PyObject* MethodCuda(PyObject* self, PyObject* args, PyObject* kwargs) {
  static const char* keywords[] = {"device", "non_blocking", nullptr};
  PyObject* device_obj = Py_None;
  int non_blocking = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|Op:cuda", const_cast<char**>(keywords), &device_obj,
                                   &non_blocking)) {
    return nullptr;
  }
  Device device = Device::Cuda(0);
  if (PyLong_Check(device_obj)) {
    device = Device::Cuda(static_cast<int>(PyLong_AsLong(device_obj)));
  } else if (device_obj != Py_None) {
    auto parsed = ToDevice(device_obj, "cuda()");
    if (!parsed.ok()) return RaiseStatus(parsed.status());
    if (parsed->type != DeviceType::kCuda) {
      return RaiseStatus(Error(ErrorKind::kValue, absl::StrFormat("cuda(): expected a CUDA device, got %s",
                                                                  parsed->ToString())));
    }
    device = *parsed;
  }
  if (absl::Status usable = CheckDeviceUsable(device); !usable.ok()) return RaiseStatus(usable);
  return MoveTo(self, device);
}

// to(dtype) / to(device) / to(device, dtype) / to(tensor), plus dtype=, device=, copy=.
PyObject* MethodTo(PyObject* self, PyObject* args, PyObject* kwargs) {
  const Tensor& t = Self(self);
  std::optional<DType> dtype;
  std::optional<Device> device;
  bool copy = false;
  auto take = [&](PyObject* obj, absl::string_view what) -> bool {
    if (obj == Py_None) return true;
    if (IsTensor(obj)) {
      dtype = Unwrap(obj).dtype();
      device = Unwrap(obj).device();
      return true;
    }
    if (auto d = ToDType(obj, what); d.ok() && !PyUnicode_Check(obj)) {
      dtype = *d;
      return true;
    }
    auto dev = ToDevice(obj, what);
    if (!dev.ok()) {
      RaiseStatus(Error(ErrorKind::kType,
                        absl::StrFormat("to(): expected a dtype, a device or a tensor, got %s",
                                        Py_TYPE(obj)->tp_name)));
      return false;
    }
    device = *dev;
    return true;
  };
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args); ++i) {
    if (!take(PyTuple_GET_ITEM(args, i), "to()")) return nullptr;
  }
  if (kwargs != nullptr) {
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(kwargs, &pos, &key, &value)) {
      const std::string name = py::Utf8Or(key, "?");  // "?": reported as unexpected below
      if (name == "dtype" || name == "device") {
        if (!take(value, "to()")) return nullptr;
      } else if (name == "copy") {
        copy = PyObject_IsTrue(value);
      } else if (name != "non_blocking") {
        PyErr_Format(PyExc_TypeError, "to() got an unexpected keyword argument '%s'", name.c_str());
        return nullptr;
      }
    }
  }
  Tensor source = t;
  if (device.has_value() && *device != t.device()) {
    if (absl::Status usable = CheckDeviceUsable(*device); !usable.ok()) return RaiseStatus(usable);
    auto moved = Move(t, *device);
    if (!moved.ok()) return RaiseStatus(moved.status());
    source = *moved;
    copy = false;  // already a fresh tensor
  }
  auto cast = Cast(source, dtype.value_or(t.dtype()));
  if (!cast.ok()) return RaiseStatus(cast.status());
  Tensor out = *std::move(cast);
  if (copy && out.SharesStorageWith(t)) out = Clone(t);
  if (out.SharesStorageWith(t) && !copy) {
    Py_INCREF(self);
    return self;
  }
  return Wrap(out);
}

PyObject* MethodDLPack(PyObject* self, PyObject* args, PyObject* kwargs) {
  // stream / max_version / dl_device / copy are accepted for protocol compatibility; a CPU tensor
  // needs no stream synchronisation.
  const Tensor& t = Self(self);
  if (t.device().type == DeviceType::kCuda) {
    // The consumer reads on its own stream: dyntrace's queued work on the tensor finishes first.
    auto gpu = CudaDevice::Get(t.device().index);
    absl::Status synced = gpu.ok() ? (*gpu)->Synchronize() : gpu.status();
    if (!synced.ok()) return RaiseStatus(synced);
  }
  return DLPackCapsule(ToDLPack(t));
}

PyObject* MethodDLPackDevice(PyObject* self, PyObject*) {
  auto [type, id] = DLPackDevice(Self(self));
  return Py_BuildValue("(ii)", type, id);
}

PyObject* MethodDataPtr(PyObject* self, PyObject*) {
  return PyLong_FromVoidPtr(Self(self).data());
}

PyMethodDef tensor_methods[] = {
    {"size", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(MethodSize)), METH_FASTCALL, "size(dim=None)"},
    {"stride", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(MethodStride)), METH_FASTCALL, "stride(dim=None)"},
    {"numel", MethodNumel, METH_NOARGS, "number of elements"},
    {"dim", MethodDim, METH_NOARGS, "number of dims"},
    {"is_contiguous", MethodIsContiguous, METH_NOARGS, nullptr},
    {"is_floating_point", MethodIsFloatingPoint, METH_NOARGS, nullptr},
    {"element_size", MethodElementSize, METH_NOARGS, nullptr},
    {"item", MethodItem, METH_NOARGS, "the value of a one-element tensor"},
    {"tolist", MethodToList, METH_NOARGS, "nested lists of Python numbers"},
    {"type", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(MethodType)), METH_VARARGS | METH_KEYWORDS,
     "type(dtype=None): the legacy class name (\"dyntrace.FloatTensor\"), or a cast to dtype"},
    {"float", MethodFloat, METH_NOARGS, nullptr},
    {"double", MethodDouble, METH_NOARGS, nullptr},
    {"half", MethodHalf, METH_NOARGS, nullptr},
    {"bfloat16", MethodBFloat16, METH_NOARGS, nullptr},
    {"int", MethodInt, METH_NOARGS, nullptr},
    {"long", MethodLong, METH_NOARGS, nullptr},
    {"bool", MethodBool, METH_NOARGS, nullptr},
    {"byte", MethodByte, METH_NOARGS, nullptr},
    {"char", MethodChar, METH_NOARGS, nullptr},
    {"short", MethodShort, METH_NOARGS, nullptr},
    {"cpu", MethodCpu, METH_NOARGS, "a copy in host memory (the tensor itself when already there)"},
    {"cuda", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(MethodCuda)), METH_VARARGS | METH_KEYWORDS,
     "cuda(device=None): a copy on a CUDA device (the tensor itself when already there)"},
    {"to", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(MethodTo)), METH_VARARGS | METH_KEYWORDS, "to(dtype | device | tensor)"},
    {"__dlpack__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(MethodDLPack)), METH_VARARGS | METH_KEYWORDS, nullptr},
    {"__dlpack_device__", MethodDLPackDevice, METH_NOARGS, nullptr},
    {"data_ptr", MethodDataPtr, METH_NOARGS, nullptr},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace

// ---- indexing ----
namespace {

// A list index: a flat list of ints (`x[[0, 2]]`) is an int list item.
absl::StatusOr<IndexItem> ParseListIndex(PyObject* list) {
  IndexItem item{.kind = IndexItem::Kind::kIntList};
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); ++i) {
    PyObject* v = PyList_GET_ITEM(list, i);
    if (PyBool_Check(v) || IsTensor(v) || !PyIndex_Check(v)) {
      return Error(ErrorKind::kNotImplemented,
                   absl::StrFormat("indexing with a list holding %s is not supported (dyntrace takes flat lists "
                                   "of ints); index with dyntrace.tensor(list) instead",
                                   Py_TYPE(v)->tp_name));
    }
    PyRef number = PyRef::Steal(PyNumber_Index(v));
    if (!number) return Error(ErrorKind::kType, "list index items must be integers");
    const long long value = PyLong_AsLongLong(number.get());
    if (value == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      return Error(ErrorKind::kIndex, "list index item out of the int64 range");
    }
    item.values.push_back(value);
  }
  return item;
}

absl::StatusOr<std::optional<int64_t>> SliceBound(PyObject* v, absl::string_view what) {
  if (v == Py_None) return std::optional<int64_t>();
  auto d = ToDims(v, what);
  if (!d.ok() || d->size() != 1 || PyTuple_Check(v) || PyList_Check(v)) {
    return Error(ErrorKind::kType, "slice indices must be integers or None");
  }
  return std::optional<int64_t>((*d)[0]);
}

absl::StatusOr<IndexItem> ParseIndexItem(PyObject* k, ParsedIndex& parsed) {
  IndexItem item;
  if (k == Py_None) {
    item.kind = IndexItem::Kind::kNewAxis;
  } else if (k == Py_Ellipsis) {
    item.kind = IndexItem::Kind::kEllipsis;
  } else if (PySlice_Check(k)) {
    auto* s = reinterpret_cast<PySliceObject*>(k);
    item.kind = IndexItem::Kind::kSlice;
    DT_ASSIGN_OR_RETURN(item.start, SliceBound(s->start, "slice start"));
    DT_ASSIGN_OR_RETURN(item.stop, SliceBound(s->stop, "slice stop"));
    DT_ASSIGN_OR_RETURN(std::optional<int64_t> step, SliceBound(s->step, "slice step"));
    item.step = step.value_or(1);
  } else if (IsTensor(k)) {
    item.kind = IndexItem::Kind::kTensor;
    item.index = static_cast<int64_t>(parsed.tensors.size());
    parsed.tensors.push_back(k);
  } else if (PyList_Check(k)) {
    return ParseListIndex(k);
  } else if (PyBool_Check(k)) {
    return Error(ErrorKind::kNotImplemented,
                 "indexing with a Python bool is not supported (dyntrace supports ints, slices, None, "
                 "Ellipsis, int lists and tensors)");
  } else if (PyIndex_Check(k)) {
    item.kind = IndexItem::Kind::kInt;
    item.index = PyLong_AsLongLong(PyRef::Steal(PyNumber_Index(k)).get());
  } else {
    return Error(ErrorKind::kType,
                 absl::StrFormat("only integers, slices (`:`), ellipsis (`...`), None, lists of ints and "
                                 "integer or bool tensors are valid indices (got %s)",
                                 Py_TYPE(k)->tp_name));
  }
  return item;
}

}  // namespace

absl::StatusOr<ParsedIndex> ParseIndex(PyObject* key) {
  ParsedIndex parsed;
  PyRef tuple = PyTuple_Check(key) ? PyRef::Borrow(key) : PyRef::Steal(PyTuple_Pack(1, key));
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(tuple.get()); ++i) {
    DT_ASSIGN_OR_RETURN(IndexItem item, ParseIndexItem(PyTuple_GET_ITEM(tuple.get(), i), parsed));
    parsed.items.push_back(std::move(item));
  }
  return parsed;
}

namespace {

// x[index] with index tensors or lists: the registry's _index (a copy), on the tensor's device.
absl::StatusOr<Tensor> AdvancedGetItem(const Tensor& self, const ParsedIndex& parsed) {
  std::vector<Tensor> tensors;
  for (PyObject* t : parsed.tensors) tensors.push_back(Unwrap(t));
  const OpDef* op = OpRegistry::Get().Find("_index");
  DT_ASSIGN_OR_RETURN(OpResult r, CallOp(*op, OpArgs({self, EncodeIndex(parsed.items), std::move(tensors)})));
  return r.at(0);
}

PyObject* TensorGetItem(PyObject* self, PyObject* key) {
  auto parsed = ParseIndex(key);
  if (!parsed.ok()) return RaiseStatus(parsed.status());
  auto result = HasAdvancedItems(parsed->items) ? AdvancedGetItem(Self(self), *parsed)
                : TracksGrad(Self(self))        ? Call("_getitem", {Self(self), EncodeIndex(parsed->items)})
                                                : ApplyIndex(Self(self), parsed->items);
  if (!result.ok()) return RaiseStatus(result.status());
  return Wrap(*std::move(result));
}

absl::Status AdvancedSetItem(const Tensor& self, const ParsedIndex& parsed, ArgValue value) {
  std::vector<Tensor> tensors;
  for (PyObject* t : parsed.tensors) tensors.push_back(Unwrap(t));
  const OpDef* op = OpRegistry::Get().Find("_index_put");
  return CallOp(*op, OpArgs({self, EncodeIndex(parsed.items), std::move(tensors), std::move(value),
                             Scalar::Bool(false)}))
      .status();
}

// x[index] = value where autograd follows x or value: recorded as the registry's _setitem (basic
// index, written in place) or _index_put (advanced, computed then copied in), after which x's
// history is the recorded call's.
int SetItemWithGrad(PyObject* self, const ParsedIndex& parsed, ArgValue assigned) {
  if (!CheckInplaceTarget(self, "x[index] = value")) return -1;
  const Tensor& target = Self(self);
  absl::StatusOr<Tensor> result;
  if (HasAdvancedItems(parsed.items)) {
    std::vector<Tensor> tensors;
    for (PyObject* t : parsed.tensors) tensors.push_back(Unwrap(t));
    absl::StatusOr<Tensor> old = OldValues(target);
    if (!old.ok()) return RaiseStatus(old.status()), -1;
    result = Call("_index_put", {*std::move(old), EncodeIndex(parsed.items), std::move(tensors),
                                 std::move(assigned), Scalar::Bool(false)});
    if (result.ok()) {
      GradModeGuard off(false);
      if (absl::Status copied = CopyInto(target, *result); !copied.ok()) result = copied;
    }
  } else {
    result = Call("_setitem", {target, EncodeIndex(parsed.items), std::move(assigned)});
  }
  if (!result.ok()) return RaiseStatus(result.status()), -1;
  if (!AdoptHistory(self, *result)) return -1;
  return 0;
}

int TensorSetItem(PyObject* self, PyObject* key, PyObject* value) {
  if (value == nullptr) {
    PyErr_SetString(PyExc_TypeError, "Tensor does not support item deletion");
    return -1;
  }
  auto parsed = ParseIndex(key);
  if (!parsed.ok()) return RaiseStatus(parsed.status()), -1;
  ArgValue assigned;
  if (IsTensor(value)) {
    assigned = Unwrap(value);
  } else {
    auto s = ToScalar(value, "the value assigned to a tensor element");
    if (!s.ok()) return RaiseStatus(s.status()), -1;
    assigned = *s;
  }
  const Tensor* assigned_tensor = std::get_if<Tensor>(&assigned);
  if (TracksGrad(Self(self)) || (assigned_tensor != nullptr && TracksGrad(*assigned_tensor))) {
    return SetItemWithGrad(self, *parsed, std::move(assigned));
  }
  absl::Status status;
  Self(self).storage()->BumpVersion();
  if (HasAdvancedItems(parsed->items)) {
    status = AdvancedSetItem(Self(self), *parsed, std::move(assigned));
  } else if (auto view = ApplyIndex(Self(self), parsed->items); !view.ok()) {
    status = view.status();
  } else if (const Tensor* t = std::get_if<Tensor>(&assigned)) {
    status = CopyInto(*view, *t);
  } else {
    status = Fill(*view, std::get<Scalar>(assigned));
  }
  if (!status.ok()) return RaiseStatus(status), -1;
  return 0;
}

Py_ssize_t TensorLen(PyObject* self) {
  const Tensor& t = Self(self);
  if (t.ndim() == 0) {
    PyErr_SetString(PyExc_TypeError, "len() of a 0-d tensor");
    return -1;
  }
  return static_cast<Py_ssize_t>(t.size(0));
}

PyMappingMethods tensor_mapping = {TensorLen, TensorGetItem, TensorSetItem};

// ---- number protocol ----
// Binary operators accept a number on either side; the reflected forms keep the number's place so
// that non-commutative ops and promotion see the operands in source order.
// An operand that is not a Tensor: a number, or a numpy array, which operators convert to a
// tensor as PyTorch's do (a 0-d array becomes a 0-d tensor; numpy scalars are numbers).
absl::StatusOr<ArgValue> NonTensorOperand(PyObject* x, const char* name) {
  if (IsNdarray(x)) {
    DT_ASSIGN_OR_RETURN(Tensor t, NumpyOperand(x));
    return ArgValue(std::move(t));
  }
  DT_ASSIGN_OR_RETURN(Scalar s, ToScalar(x, name));
  return ArgValue(s);
}

PyObject* BinaryOp(const char* name, PyObject* a, PyObject* b) {
  if (!IsTensor(a) && !IsTensor(b)) Py_RETURN_NOTIMPLEMENTED;
  PyObject* other = IsTensor(a) ? b : a;
  if (!IsTensor(other) && !PyLong_Check(other) && !PyFloat_Check(other) && !PyBool_Check(other) &&
      !PyIndex_Check(other) &&
      !(Py_TYPE(other)->tp_as_number && Py_TYPE(other)->tp_as_number->nb_float &&
        !PySequence_Check(other))) {
    Py_RETURN_NOTIMPLEMENTED;
  }
  const OpDef* op = OpRegistry::Get().Find(name);
  std::vector<ArgValue> values;
  for (PyObject* x : {a, b}) {
    if (IsTensor(x)) {
      values.push_back(Unwrap(x));
    } else {
      auto v = NonTensorOperand(x, name);
      if (!v.ok()) return RaiseStatus(v.status());
      values.push_back(*std::move(v));
    }
  }
  absl::StatusOr<OpArgs> args = OpArgs(std::move(values));
  if (ThreadAutocast().any()) args = AutocastArgs(*op, *std::move(args));  // `x ** 2` as torch.pow
  if (!args.ok()) return RaiseStatus(args.status());
  auto result = CallOp(*op, *args);
  if (!result.ok()) return RaiseStatus(result.status());
  return Wrap(result->at(0));
}

PyObject* InplaceOp(const char* name, PyObject* a, PyObject* b) {
  if (!IsTensor(a)) Py_RETURN_NOTIMPLEMENTED;
  const OpDef* op = OpRegistry::Get().Find(name);
  ArgValue other;
  if (IsTensor(b)) {
    other = Unwrap(b);
  } else {
    auto v = NonTensorOperand(b, name);
    if (!v.ok() && IsNdarray(b)) return RaiseStatus(v.status());
    if (!v.ok()) Py_RETURN_NOTIMPLEMENTED;
    other = *std::move(v);
  }
  // As x.add_(y): recorded by autograd when it follows an operand, and x's version bumped.
  return RunInplace(*op, OpArgs({Unwrap(a), other}), a);
}

PyObject* UnaryOp(const char* name, PyObject* a) {
  auto result = Call(name, {Unwrap(a)});
  if (!result.ok()) return RaiseStatus(result.status());
  return Wrap(*result);
}

#define DT_BINARY_SLOT(slot, op) \
  PyObject* slot(PyObject* a, PyObject* b) { return BinaryOp(op, a, b); }
#define DT_INPLACE_SLOT(slot, op) \
  PyObject* slot(PyObject* a, PyObject* b) { return InplaceOp(op, a, b); }
DT_BINARY_SLOT(NbAdd, "add")
DT_BINARY_SLOT(NbSub, "sub")
DT_BINARY_SLOT(NbMul, "mul")
DT_BINARY_SLOT(NbTrueDiv, "div")
DT_BINARY_SLOT(NbFloorDiv, "floor_divide")
DT_BINARY_SLOT(NbRemainder, "remainder")
DT_BINARY_SLOT(NbAnd, "logical_and")
DT_BINARY_SLOT(NbOr, "logical_or")
DT_BINARY_SLOT(NbXor, "logical_xor")
DT_INPLACE_SLOT(NbInplaceAdd, "add")
DT_INPLACE_SLOT(NbInplaceSub, "sub")
DT_INPLACE_SLOT(NbInplaceMul, "mul")
DT_INPLACE_SLOT(NbInplaceTrueDiv, "div")
DT_INPLACE_SLOT(NbInplaceFloorDiv, "floor_divide")
DT_INPLACE_SLOT(NbInplaceRemainder, "remainder")
DT_INPLACE_SLOT(NbInplacePow, "pow")
#undef DT_BINARY_SLOT
#undef DT_INPLACE_SLOT

PyObject* NbPow(PyObject* a, PyObject* b, PyObject* mod) {
  if (mod != Py_None) Py_RETURN_NOTIMPLEMENTED;
  return BinaryOp("pow", a, b);
}
PyObject* NbInplacePow3(PyObject* a, PyObject* b, PyObject*) { return NbInplacePow(a, b); }

PyObject* NbMatMul(PyObject* a, PyObject* b) {
  if (!IsTensor(a) || !IsTensor(b)) Py_RETURN_NOTIMPLEMENTED;
  return BinaryOp("matmul", a, b);  // autocast applies to `a @ b` as to torch.matmul
}

PyObject* NbNeg(PyObject* a) { return UnaryOp("neg", a); }
PyObject* NbPos(PyObject* a) {
  Py_INCREF(a);
  return a;
}
PyObject* NbAbs(PyObject* a) { return UnaryOp("abs", a); }
PyObject* NbInvert(PyObject* a) {
  if (Unwrap(a).dtype() != DType::kBool) {
    return RaiseStatus(Error(ErrorKind::kType,
                             absl::StrFormat("~ (bitwise not) is only supported for bool tensors "
                                             "here, got %s",
                                             DTypeName(Unwrap(a).dtype()))));
  }
  return UnaryOp("logical_not", a);
}

absl::StatusOr<Scalar> OnlyElement(PyObject* self, absl::string_view what) {
  const Tensor& t = Self(self);
  if (t.numel() != 1) {
    return Error(ErrorKind::kValue,
                 absl::StrFormat("%s of a Tensor with %d elements is ambiguous (shape %s); use "
                                 ".any() or .all()",
                                 what, t.numel(), t.ShapeString()));
  }
  return ItemOf(t);
}

int NbBool(PyObject* self) {
  auto s = OnlyElement(self, "Boolean value");
  if (!s.ok()) return RaiseStatus(s.status()), -1;
  return s->ToBool() ? 1 : 0;
}
PyObject* NbFloat(PyObject* self) {
  auto s = OnlyElement(self, "float()");
  if (!s.ok()) return RaiseStatus(s.status());
  return PyFloat_FromDouble(s->ToDouble());
}
PyObject* NbInt(PyObject* self) {
  auto s = OnlyElement(self, "int()");
  if (!s.ok()) return RaiseStatus(s.status());
  if (s->is_float()) {
    PyRef f = PyRef::Steal(PyFloat_FromDouble(s->ToDouble()));
    return PyNumber_Long(f.get());  // raises for nan/inf like Python
  }
  return PyLong_FromLongLong(s->ToInt());
}
PyObject* NbIndex(PyObject* self) {
  const Tensor& t = Self(self);
  if (IsFloating(t.dtype()) || t.numel() != 1) {
    PyErr_SetString(PyExc_TypeError,
                    "only integer tensors of a single element can be converted to an index");
    return nullptr;
  }
  return NbInt(self);
}

PyNumberMethods tensor_number = [] {
  PyNumberMethods m{};
  m.nb_add = NbAdd;
  m.nb_subtract = NbSub;
  m.nb_multiply = NbMul;
  m.nb_remainder = NbRemainder;
  m.nb_power = NbPow;
  m.nb_negative = NbNeg;
  m.nb_positive = NbPos;
  m.nb_absolute = NbAbs;
  m.nb_bool = NbBool;
  m.nb_invert = NbInvert;
  m.nb_and = NbAnd;
  m.nb_xor = NbXor;
  m.nb_or = NbOr;
  m.nb_int = NbInt;
  m.nb_float = NbFloat;
  m.nb_inplace_add = NbInplaceAdd;
  m.nb_inplace_subtract = NbInplaceSub;
  m.nb_inplace_multiply = NbInplaceMul;
  m.nb_inplace_remainder = NbInplaceRemainder;
  m.nb_inplace_power = NbInplacePow3;
  m.nb_floor_divide = NbFloorDiv;
  m.nb_true_divide = NbTrueDiv;
  m.nb_inplace_floor_divide = NbInplaceFloorDiv;
  m.nb_inplace_true_divide = NbInplaceTrueDiv;
  m.nb_index = NbIndex;
  m.nb_matrix_multiply = NbMatMul;
  return m;
}();

PyObject* TensorRichCompare(PyObject* a, PyObject* b, int op) {
  static const char* names[] = {"lt", "le", "eq", "ne", "gt", "ge"};
  // Comparing with None or another foreign object keeps Python's identity semantics.
  PyObject* other = IsTensor(a) ? b : a;
  if (other == Py_None) {
    if (op == Py_EQ) Py_RETURN_FALSE;
    if (op == Py_NE) Py_RETURN_TRUE;
  }
  return BinaryOp(names[op], a, b);
}

PyObject* TensorIter(PyObject* self) {
  const Tensor& t = Self(self);
  if (t.ndim() == 0) {
    PyErr_SetString(PyExc_TypeError, "iteration over a 0-d tensor");
    return nullptr;
  }
  PyRef list = PyRef::Steal(PyList_New(t.size(0)));
  const bool tracks = TracksGrad(t);
  for (int64_t i = 0; i < t.size(0); ++i) {
    IndexItem item;
    item.index = i;
    auto row = tracks ? Call("select", {t, Scalar::Int(0), Scalar::Int(i)}) : ApplyIndex(t, {item});
    if (!row.ok()) return RaiseStatus(row.status());
    PyList_SET_ITEM(list.get(), i, Wrap(*std::move(row)));
  }
  return PyObject_GetIter(list.get());
}

}  // namespace

PyObject* DLPackCapsule(DLManagedTensor* managed) {
  PyObject* capsule = PyCapsule_New(managed, "dltensor", [](PyObject* cap) {
    // Only an unconsumed capsule still owns its tensor.
    if (PyCapsule_IsValid(cap, "dltensor")) {
      auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap, "dltensor"));
      if (m != nullptr && m->deleter != nullptr) m->deleter(m);
    }
  });
  if (capsule == nullptr) managed->deleter(managed);
  return capsule;
}

namespace {

// Two null-terminated method or attribute tables as one (kept for the type's life).
const char* NameOf(const PyMethodDef& e) { return e.ml_name; }
const char* NameOf(const PyGetSetDef& e) { return e.name; }

template <typename Entry>
Entry* Joined(const Entry* first, const Entry* second) {
  auto* joined = new std::vector<Entry>();
  for (const Entry* e = first; NameOf(*e) != nullptr; ++e) joined->push_back(*e);
  for (const Entry* e = second; NameOf(*e) != nullptr; ++e) joined->push_back(*e);
  joined->push_back(Entry{});
  return joined->data();
}

}  // namespace

bool InitTensorType(PyObject* module) {
  TensorType.tp_basicsize = sizeof(PyTensor);
  TensorType.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC;
  TensorType.tp_dealloc = TensorDealloc;
  TensorType.tp_traverse = TensorTraverse;
  TensorType.tp_repr = TensorRepr;
  TensorType.tp_as_number = &tensor_number;
  TensorType.tp_as_mapping = &tensor_mapping;
  TensorType.tp_richcompare = TensorRichCompare;
  TensorType.tp_hash = PyBaseObject_Type.tp_hash;  // identity, as PyTorch
  TensorType.tp_iter = TensorIter;
  TensorType.tp_methods = Joined(tensor_methods, autograd_methods);
  TensorType.tp_getset = Joined(tensor_getset, autograd_getset);
  TensorType.tp_weaklistoffset = offsetof(PyTensor, weakrefs);
  TensorType.tp_doc = "A strided n-dimensional array (see dyntrace.tensor).";
  if (PyType_Ready(&TensorType) < 0) return false;
  return PyModule_AddObjectRef(module, "Tensor", reinterpret_cast<PyObject*>(&TensorType)) >= 0;
}

}  // namespace dt::interpreter::py
