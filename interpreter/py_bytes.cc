#include "interpreter/py_bytes.h"

#include <cstring>

#include "absl/strings/str_format.h"
#include "interpreter/py_types.h"
#include "runtime/copy.h"

namespace dt::interpreter::py {
namespace {

// _tensor_bytes(t): a CPU tensor's elements in row-major order, as the machine stores them (the
// caller checks the machine is little-endian). Views and transposes are copied in order first.
PyObject* FnTensorBytes(PyObject*, PyObject* arg) {
  if (!IsTensor(arg)) return PyErr_Format(PyExc_TypeError, "_tensor_bytes(): expected a Tensor");
  const Tensor& t = Unwrap(arg);
  if (!t.device().is_cpu()) {
    return PyErr_Format(PyExc_ValueError, "_tensor_bytes(): the tensor is on %s; move it to the CPU first",
                        t.device().ToString().c_str());
  }
  const Tensor dense = t.is_contiguous() ? t : Contiguous(t);
  const Py_ssize_t size = static_cast<Py_ssize_t>(dense.numel() * dense.itemsize());
  return PyBytes_FromStringAndSize(size == 0 ? "" : static_cast<const char*>(dense.data()), size);
}

// _tensor_from_bytes(buffer, begin, end, dtype, shape): a new CPU tensor holding a copy of
// buffer[begin:end], which must be exactly the tensor's size in bytes.
PyObject* FnTensorFromBytes(PyObject*, PyObject* args) {
  PyObject *buffer, *dtype_obj, *shape_obj;
  Py_ssize_t begin, end;
  if (!PyArg_ParseTuple(args, "OnnOO", &buffer, &begin, &end, &dtype_obj, &shape_obj)) return nullptr;
  absl::StatusOr<DType> dtype = ToDType(dtype_obj, "_tensor_from_bytes(): dtype");
  if (!dtype.ok()) return RaiseStatus(dtype.status());
  absl::StatusOr<Dims> shape = ToDims(shape_obj, "_tensor_from_bytes(): shape");
  if (!shape.ok()) return RaiseStatus(shape.status());
  for (int64_t s : *shape) {
    if (s < 0) return PyErr_Format(PyExc_ValueError, "_tensor_from_bytes(): negative size in the shape");
  }
  Py_buffer view;
  if (PyObject_GetBuffer(buffer, &view, PyBUF_SIMPLE) < 0) return nullptr;
  const int64_t want = NumelOf(*shape) * ItemSize(*dtype);
  if (begin < 0 || end < begin || end > view.len || end - begin != want) {
    PyBuffer_Release(&view);
    return PyErr_Format(PyExc_ValueError,
                        "_tensor_from_bytes(): bytes [%zd, %zd) of a buffer of %zd do not hold %lld bytes", begin, end,
                        view.len, static_cast<long long>(want));
  }
  Tensor t = Tensor::Empty(*shape, *dtype, Device::Cpu());
  if (want > 0) std::memcpy(t.data(), static_cast<const char*>(view.buf) + begin, static_cast<size_t>(want));
  PyBuffer_Release(&view);
  return Wrap(std::move(t));
}

PyMethodDef bytes_functions[] = {
    {"_tensor_bytes", FnTensorBytes, METH_O, "_tensor_bytes(t) -> bytes: a CPU tensor's elements, row-major"},
    {"_tensor_from_bytes", FnTensorFromBytes, METH_VARARGS,
     "_tensor_from_bytes(buffer, begin, end, dtype, shape) -> Tensor: a copy of buffer[begin:end]"},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace

bool AddBytesBindings(PyObject* module) { return PyModule_AddFunctions(module, bytes_functions) == 0; }

}  // namespace dt::interpreter::py
