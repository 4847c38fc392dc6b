// interpreter/py_types.h: the Python objects dyntrace exposes (Tensor, dtype, device), and the
// conversions between them and the C++ runtime's values.
//
// Everything here runs with the GIL held. Functions returning PyObject* return a new reference or
// null with a Python exception set; functions returning absl::Status leave raising to the caller
// (RaiseStatus), which keeps C++ helpers free of Python error state.
#ifndef DYNTRACE_INTERPRETER_PY_TYPES_H_
#define DYNTRACE_INTERPRETER_PY_TYPES_H_

#include <Python.h>

#include "absl/status/statusor.h"
#include "graph/graph.h"
#include "graph/op_registry.h"
#include "interpreter/py_ref.h"
#include "runtime/dlpack.h"
#include "runtime/indexing.h"
#include "runtime/tensor.h"

namespace dt::interpreter::py {

struct PyTensor {
  PyObject_HEAD
  Tensor tensor;
  PyObject* weakrefs;
  // dt.mark_dynamic / dt.mark_static: bit d set for dim d (dims beyond 63 cannot be marked).
  uint64_t marked_dynamic;
  uint64_t marked_static;
  // Made by dyntrace.nn.Parameter: modules register such tensors as parameters on assignment.
  bool is_parameter;
  // The wrapper .grad last handed out (strong, or null): while it still wraps the gradient,
  // reading .grad again gives it back, so `p.grad is p.grad` as in PyTorch, and guards can
  // read a gradient by a borrowed reference (GradObject).
  PyObject* grad_object;
};

extern PyTypeObject TensorType;
extern PyTypeObject DTypeType;
extern PyTypeObject DeviceType;
// dyntrace.ShapeError: a RuntimeError and a ValueError, raised when shapes disagree.
extern PyObject* ShapeError;

// Readies the types; REQUIRES: called once from module initialisation.
[[nodiscard]] bool InitTypes(PyObject* module);

inline bool IsTensor(PyObject* obj) { return PyObject_TypeCheck(obj, &TensorType); }
// REQUIRES: IsTensor(obj).
inline const Tensor& Unwrap(PyObject* obj) { return reinterpret_cast<PyTensor*>(obj)->tensor; }
PyObject* Wrap(Tensor t);
// `tensor.grad`, borrowed (None when unset); null with an error set when wrapping fails.
// REQUIRES: IsTensor(tensor).
PyObject* GradObject(PyObject* tensor);
PyObject* WrapDType(DType dtype);      // borrowed singletons, returned as new references
PyObject* WrapDevice(Device device);

// Raises the Python exception for `status` (see runtime/errors.h) and returns null.
PyObject* RaiseStatus(const absl::Status& status);

// Python value -> runtime value; errors are TypeErrors naming `what` (e.g. "sum(): argument 'dim'").
absl::StatusOr<Scalar> ToScalar(PyObject* obj, absl::string_view what);
absl::StatusOr<DType> ToDType(PyObject* obj, absl::string_view what);
absl::StatusOr<Device> ToDevice(PyObject* obj, absl::string_view what);
absl::StatusOr<Dims> ToDims(PyObject* obj, absl::string_view what);
PyObject* FromScalar(Scalar s);

// dyntrace.tensor(data, dtype=None, device=None): nested sequences, numbers, tensors and any
// object with __dlpack__ are copied into a new tensor.
absl::StatusOr<Tensor> TensorFromData(PyObject* data, std::optional<DType> dtype,
                                      std::optional<Device> device);
// Wraps an exported tensor in a "dltensor" capsule that frees it unless a consumer took it.
PyObject* DLPackCapsule(DLManagedTensor* managed);
// dyntrace.from_dlpack(obj): zero-copy.
absl::StatusOr<Tensor> TensorFromDLPack(PyObject* obj);

// numpy (interpreter/py_numpy.cc). The checks are false until the program imports numpy.
bool IsNdarray(PyObject* obj);
bool IsNumpyScalar(PyObject* obj);  // np.float32(1), np.bool_(True) ...: an instance of np.generic
// A numpy scalar as the Python number it stands for (np.bool_ a bool, not an int).
absl::StatusOr<Scalar> NumpyScalarValue(PyObject* obj);
// dyntrace.from_numpy(a): shares a's memory (a stays alive); PyTorch's errors for other types,
// unsupported dtypes, negative strides and foreign byte order; ValueError for read-only arrays.
absl::StatusOr<Tensor> TensorFromNumpy(PyObject* obj);
// An ndarray operand of a Tensor operator: shared, read-only arrays too (operators only read it).
// REQUIRES: IsNdarray(array).
absl::StatusOr<Tensor> NumpyOperand(PyObject* array);
// A copy of an ndarray's elements (dyntrace.tensor(a)). REQUIRES: IsNdarray(array).
absl::StatusOr<Tensor> CopyFromNumpy(PyObject* array);
[[nodiscard]] bool AddNumpyBindings(PyObject* module);

// A Python index (`1`, `(slice(None), None)`, `...`, `[0, 2]`, a tensor) as index items; each
// kTensor item names its entry of `tensors`, the index tensors, borrowed from the key.
struct ParsedIndex {
  std::vector<IndexItem> items;
  std::vector<PyObject*> tensors;
};
absl::StatusOr<ParsedIndex> ParseIndex(PyObject* key);

// The named-tuple type of an op's named results (`x.max(1)` gives a dyntrace.return_types.max
// with fields `values` and `indices`, a tuple subclass), made once per op name; borrowed; null
// with a Python error set when it cannot be made. REQUIRES: op.schema.result_names is not empty.
PyObject* NamedResultType(const OpDef& op);
// The position of field `name` in a type NamedResultType made, or nullopt (another type, or no
// such field).
std::optional<size_t> NamedResultField(PyObject* type, absl::string_view name);

// A call of a dyntrace op function bound to one of its overloads. `supplied[i]` is the Python
// object that gave parameter i (null when its default was used); the tracer maps those back to
// its symbolic values.
struct BoundCall {
  const OpDef* op;
  OpArgs args;
  std::vector<PyRef> supplied;  // owned: a varargs shape is a tuple made by the binding
  bool inplace;
};
// Tensor.type(): PyTorch's legacy class names, "dyntrace.FloatTensor" ("dyntrace.cuda.FloatTensor"
// on CUDA); and the dtype such a name (or "torch.LongTensor") stands for, nullopt for others.
std::string LegacyTensorTypeName(DType dtype, const Device& device);
std::optional<DType> DTypeOfLegacyTypeName(absl::string_view name);
bool IsOpFunction(PyObject* obj);
// Runs the in-place form of `op` on `self` (args[0] is its tensor): writes the result into it,
// bumps its version and, when autograd follows an operand, records the write as self's new
// history. Returns a new reference to `self`, or null with a Python error set.
PyObject* RunInplace(const OpDef& op, const OpArgs& args, PyObject* self);
absl::StatusOr<BoundCall> BindOpCall(PyObject* op_function, PyObject* const* args,
                                     Py_ssize_t nargs, PyObject* kwnames);

// dyntrace.Graph: a captured graph as Python sees it (printing, nodes, run).
PyObject* WrapGraph(std::shared_ptr<Graph> graph);
[[nodiscard]] bool InitGraphType(PyObject* module);

// Builtins whose answer is fixed for the life of the process (dyntrace.cuda.is_available and
// device_count: the driver is probed once, registered by the module's init). The tracer calls
// them while tracing and makes the answer a constant of the graph, as torch.compile does with
// torch.cuda.is_available().
void MarkProcessConstantFunction(PyCFunction fn);
bool IsProcessConstantFunction(PyObject* fn);

// Binds registry ops: dyntrace.<name> functions, dyntrace.nn.functional.<name> (`functional`,
// the same op-function objects), dyntrace.linalg.<name> (`linalg`, ops named linalg_<name>) and
// Tensor methods (with in-place forms).
[[nodiscard]] bool AddOpBindings(PyObject* module, PyObject* functional, PyObject* linalg);
// A set made by traced code, rebuilt from its history so that its table, and so its iteration
// order and that of whatever CPython later adds to it, is the one CPython's own operations give.
// `history` is a tuple of steps, each a tuple: (kSetAdd, x), (kSetDiscard, x), (kSetPop,),
// (kSetUpdate, history of another set), (kSetUpdateWith, c) and (kSetDifferenceUpdateWith, c):
// set.update(c) and set.difference_update(c) of a constant tuple or dict `c` (never changed),
// as a dict view's operators do (a dict presizes the table; difference_update may resize it),
// or, only first, (kSetFrom, operator, history, history): the set `a | b` (kSetOr), `a & b`,
// `a - b` or `a ^ b`. Where a history is expected, a
// frozenset constant stands for itself. Returns a new reference, or null with an
// error set (only when the history is malformed or memory runs out: elements are constants).
enum SetStep : int {
  kSetAdd = 0,
  kSetDiscard = 1,
  kSetPop = 2,
  kSetUpdate = 3,
  kSetFrom = 4,
  kSetUpdateWith = 5,
  kSetDifferenceUpdateWith = 6,
};
enum SetOperator : int { kSetOr = 0, kSetAnd = 1, kSetSub = 2, kSetXor = 3 };
PyObject* ReplaySet(PyObject* history);

// dyntrace.finfo, iinfo, is_floating_point and numel (py_dtype_info.cc). IsDTypeInfo: whether
// `obj` is what finfo() or iinfo() returned (immutable: the tracer folds it).
[[nodiscard]] bool AddDTypeInfo(PyObject* module);
bool IsDTypeInfo(PyObject* obj);

// Binds registry ops: dyntrace.<name> functions and Tensor methods (with in-place forms).
[[nodiscard]] bool AddOpBindings(PyObject* module);

}  // namespace dt::interpreter::py

#endif  // DYNTRACE_INTERPRETER_PY_TYPES_H_
