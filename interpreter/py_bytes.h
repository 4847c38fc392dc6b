// interpreter/py_bytes.h: a tensor's raw bytes, out and in, for dyntrace.serialization
// (safetensors checkpoints are a JSON header plus each tensor's bytes, little-endian, row-major).
#ifndef DYNTRACE_INTERPRETER_PY_BYTES_H_
#define DYNTRACE_INTERPRETER_PY_BYTES_H_

#include <Python.h>

namespace dt::interpreter::py {

// dyntrace._tensor_bytes(t) -> bytes and dyntrace._tensor_from_bytes(buffer, begin, end, dtype,
// shape) -> Tensor.
[[nodiscard]] bool AddBytesBindings(PyObject* module);

}  // namespace dt::interpreter::py

#endif  // DYNTRACE_INTERPRETER_PY_BYTES_H_
