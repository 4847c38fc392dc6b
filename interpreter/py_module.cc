// The `dyntrace` extension module: wires the Python types and the registry bindings together.
#include "absl/synchronization/mutex.h"
#include "jit/cuda_eager_ops.h"
#include "interpreter/py_module.h"

#include <cstdlib>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "interpreter/code_cache.h"
#include "interpreter/embedded_sources.h"
#include "interpreter/py_autograd.h"
#include "interpreter/py_bytes.h"
#include "interpreter/py_types.h"
#include "interpreter/report.h"
#include "interpreter/resume_iterator.h"
#include "runtime/allocator.h"
#include "runtime/blas.h"
#include "runtime/cuda_allocator.h"
#include "runtime/cuda_driver.h"
#include "runtime/errors.h"
#include "runtime/log.h"
#include "runtime/parallel.h"
#include "runtime/random.h"

namespace dt::interpreter::py {

namespace {

PyObject* FnTensor(PyObject*, PyObject* args, PyObject* kwargs) {
  PyObject* data = nullptr;
  PyObject* dtype_obj = Py_None;
  PyObject* device_obj = Py_None;
  PyObject* requires_grad = Py_False;
  static const char* kwlist[] = {"data", "dtype", "device", "requires_grad", nullptr};
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$OOO:tensor", const_cast<char**>(kwlist), &data,
                                   &dtype_obj, &device_obj, &requires_grad)) {
    return nullptr;
  }
  std::optional<DType> dtype;
  std::optional<Device> device;
  if (dtype_obj != Py_None) {
    auto d = ToDType(dtype_obj, "tensor(): argument 'dtype'");
    if (!d.ok()) return RaiseStatus(d.status());
    dtype = *d;
  }
  if (device_obj != Py_None) {
    auto d = ToDevice(device_obj, "tensor(): argument 'device'");
    if (!d.ok()) return RaiseStatus(d.status());
    device = *d;
  }
  auto t = TensorFromData(data, dtype, device);
  if (!t.ok()) return RaiseStatus(t.status());
  PyRef result = PyRef::Steal(Wrap(*std::move(t)));
  if (!result) return nullptr;
  const int wants_grad = PyObject_IsTrue(requires_grad);
  if (wants_grad < 0 || (wants_grad == 1 && !SetRequiresGradFlag(result.get(), true))) return nullptr;
  return result.Release();
}

PyObject* FnFromDLPack(PyObject*, PyObject* obj) {
  auto t = TensorFromDLPack(obj);
  if (!t.ok()) return RaiseStatus(t.status());
  return Wrap(*std::move(t));
}

PyObject* FnManualSeed(PyObject*, PyObject* seed) {
  PyRef index = PyRef::Steal(PyNumber_Index(seed));
  if (!index) return nullptr;
  const unsigned long long v = PyLong_AsUnsignedLongLongMask(index.get());
  if (v == static_cast<unsigned long long>(-1) && PyErr_Occurred()) return nullptr;
  ManualSeed(v);
  Py_RETURN_NONE;
}

PyObject* FnSetNumThreads(PyObject*, PyObject* value) {
  const long threads = PyLong_AsLong(value);
  if (threads == -1 && PyErr_Occurred()) return nullptr;
  if (threads < 1 || threads > 4096) {
    PyErr_Format(PyExc_RuntimeError, "set_num_threads expects a positive integer, got %ld", threads);
    return nullptr;
  }
  SetMaxThreads(static_cast<int>(threads));
  Py_RETURN_NONE;
}

PyObject* FnGetNumThreads(PyObject*, PyObject*) { return PyLong_FromLong(MaxThreads()); }

PyObject* FnCpuGemm(PyObject*, PyObject*) { return PyUnicode_FromString(CpuFloat32GemmName()); }

// False when it runs; the tracer answers True (trace_builtins.cc), so code can choose a path
// written for compilation (torch.compiler.is_compiling()).
PyObject* FnIsCompiling(PyObject*, PyObject*) { Py_RETURN_FALSE; }

// mark_dynamic(t, dims) / mark_static(t, dims): dims an int or a sequence of ints.
PyObject* MarkDims(PyObject* args, bool dynamic) {
  const char* who = dynamic ? "mark_dynamic" : "mark_static";
  PyObject* t;
  PyObject* dims;
  if (!PyArg_ParseTuple(args, dynamic ? "OO:mark_dynamic" : "OO:mark_static", &t, &dims)) return nullptr;
  if (!IsTensor(t)) {
    return PyErr_Format(PyExc_TypeError, "%s() expects a dyntrace Tensor, not %s", who, Py_TYPE(t)->tp_name);
  }
  PyRef seq = PyRef::Steal(PyLong_Check(dims) ? PyTuple_Pack(1, dims) : PySequence_Tuple(dims));
  if (!seq) return nullptr;
  auto* tensor = reinterpret_cast<PyTensor*>(t);
  const int64_t ndim = tensor->tensor.ndim();
  uint64_t mask = 0;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(seq.get()); ++i) {
    PyObject* item = PyTuple_GET_ITEM(seq.get(), i);
    if (!PyLong_Check(item)) return PyErr_Format(PyExc_TypeError, "%s(): dims must be ints, not %s", who, Py_TYPE(item)->tp_name);
    const long long d = PyLong_AsLongLong(item);
    if (d < -ndim || d >= ndim || (d == -1 && PyErr_Occurred())) {
      PyErr_Clear();
      return PyErr_Format(PyExc_IndexError, "Dimension out of range (expected to be in range of [%lld, %lld], but got %R)",
                          static_cast<long long>(-ndim), static_cast<long long>(ndim - 1), item);
    }
    const int64_t dim = d < 0 ? d + ndim : d;
    if (dim >= 64) return PyErr_Format(PyExc_ValueError, "%s(): dims beyond 63 cannot be marked", who);
    mask |= uint64_t{1} << dim;
  }
  (dynamic ? tensor->marked_dynamic : tensor->marked_static) |= mask;
  (dynamic ? tensor->marked_static : tensor->marked_dynamic) &= ~mask;
  Py_RETURN_NONE;
}

PyObject* FnMarkDynamic(PyObject*, PyObject* args) { return MarkDims(args, true); }
PyObject* FnMarkStatic(PyObject*, PyObject* args) { return MarkDims(args, false); }

PyObject* FnIsTensor(PyObject*, PyObject* obj) { return PyBool_FromLong(IsTensor(obj)); }

PyObject* FnCudaIsAvailable(PyObject*, PyObject*) { return PyBool_FromLong(ProbeCuda().available); }

PyObject* FnCudaDeviceCount(PyObject*, PyObject*) {
  return PyLong_FromLong(ProbeCuda().available ? ProbeCuda().device_count : 0);
}

PyObject* FnCudaSynchronize(PyObject*, PyObject* index) {
  const long device = index == Py_None ? 0 : PyLong_AsLong(index);
  if (device == -1 && PyErr_Occurred()) return nullptr;
  auto gpu = CudaDevice::Get(static_cast<int>(device));
  absl::Status synced = gpu.ok() ? (*gpu)->Synchronize() : gpu.status();
  if (!synced.ok()) return RaiseStatus(synced);
  Py_RETURN_NONE;
}

PyObject* FnCudaMemoryStats(PyObject*, PyObject*) {
  const CudaAllocatorStats s = CudaAllocator::Get().Stats();
  return Py_BuildValue("{s:L,s:L,s:L,s:L}", "driver_allocations", static_cast<long long>(s.driver_allocations),
                       "cache_hits", static_cast<long long>(s.cache_hits), "bytes_in_use",
                       static_cast<long long>(s.bytes_in_use), "bytes_cached", static_cast<long long>(s.bytes_cached));
}

// The host or the CUDA allocator's byte counts, by device type ("cpu" or "cuda").
PyObject* FnMemoryCounts(PyObject*, PyObject* kind) {
  if (!PyUnicode_Check(kind)) return PyErr_Format(PyExc_TypeError, "expected 'cpu' or 'cuda'");
  if (PyUnicode_CompareWithASCIIString(kind, "cuda") == 0) {
    const CudaAllocatorStats s = CudaAllocator::Get().Stats();
    return Py_BuildValue("(LL)", static_cast<long long>(s.bytes_in_use), static_cast<long long>(s.peak_bytes_in_use));
  }
  const AllocatorStats s = HostAllocator::Get().Stats();
  return Py_BuildValue("(LL)", static_cast<long long>(s.bytes_in_use), static_cast<long long>(s.peak_bytes_in_use));
}

PyObject* FnResetPeakMemory(PyObject*, PyObject* kind) {
  if (!PyUnicode_Check(kind)) return PyErr_Format(PyExc_TypeError, "expected 'cpu' or 'cuda'");
  if (PyUnicode_CompareWithASCIIString(kind, "cuda") == 0) {
    CudaAllocator::Get().ResetPeak();
  } else {
    HostAllocator::Get().ResetPeak();
  }
  Py_RETURN_NONE;
}

PyObject* FnCudaEmptyCache(PyObject*, PyObject*) {
  CudaAllocator::Get().EmptyCache();
  Py_RETURN_NONE;
}

PyMethodDef module_functions[] = {
    {"tensor", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(FnTensor)),
     METH_VARARGS | METH_KEYWORDS,
     "tensor(data, *, dtype=None, device=None): a new tensor holding a copy of `data`"},
    {"from_dlpack", FnFromDLPack, METH_O,
     "from_dlpack(obj): a tensor sharing memory with a DLPack producer (numpy, PyTorch, CuPy)"},
    {"manual_seed", FnManualSeed, METH_O, "manual_seed(seed): reseed rand/randn"},
    {"is_tensor", FnIsTensor, METH_O, nullptr},
    {"set_num_threads", FnSetNumThreads, METH_O,
     "set_num_threads(n): the threads eager CPU ops and compiled CPU kernels may use (torch.set_num_threads)"},
    {"get_num_threads", FnGetNumThreads, METH_NOARGS, "get_num_threads(): the threads CPU ops may use"},
    {"_cpu_gemm", FnCpuGemm, METH_NOARGS,
     "_cpu_gemm(): 'avx512' or 'openblas', what float32 matmuls on the CPU use (runtime/sgemm_avx512.h)"},
    {"is_compiling", FnIsCompiling, METH_NOARGS,
     "is_compiling(): True inside code dyntrace is tracing, False when CPython runs it (torch.compiler.is_compiling)"},
    {"mark_dynamic", FnMarkDynamic, METH_VARARGS,
     "mark_dynamic(t, dims): compiled code treats these sizes of t as symbolic from the first trace "
     "(RuntimeError where the code needs one's value)"},
    {"mark_static", FnMarkStatic, METH_VARARGS,
     "mark_static(t, dims): these sizes of t are always specialised, never made dynamic"},
    {"_cuda_is_available", FnCudaIsAvailable, METH_NOARGS, nullptr},
    {"_cuda_device_count", FnCudaDeviceCount, METH_NOARGS, nullptr},
    {"_cuda_synchronize", FnCudaSynchronize, METH_O, nullptr},
    {"_cuda_memory_stats", FnCudaMemoryStats, METH_NOARGS, nullptr},
    {"_cuda_empty_cache", FnCudaEmptyCache, METH_NOARGS, nullptr},
    {"_memory_counts", FnMemoryCounts, METH_O, nullptr},
    {"_reset_peak_memory", FnResetPeakMemory, METH_O, nullptr},
    {nullptr, nullptr, 0, nullptr},
};

// Conveniences that only glue to optional third-party modules; not on any hot path.
constexpr const char kPrelude[] = R"PY(
def _numpy(self, *, force=False):
    """A writable numpy array sharing this tensor's memory (force=True: of a detached CPU copy
    where needed)."""
    if force:
        self = self.detach().cpu()
    if self.is_cuda:
        raise TypeError("can't convert %s device type tensor to numpy. Use Tensor.cpu() to copy the "
                        "tensor to host memory first." % self.device)
    if self.requires_grad and is_grad_enabled():
        raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() "
                           "instead.")
    import numpy
    # numpy < 2.1 marks arrays imported through DLPack read-only; PyTorch's numpy() is writable,
    # so describe the memory through the array interface (the tensor stays alive as the base).
    return numpy.asarray(_ArrayInterface(self))

_TYPESTR = {'bool': '|b1', 'uint8': '|u1', 'int8': '|i1', 'int16': 'i2', 'int32': 'i4', 'int64': 'i8',
            'float16': 'f2', 'float32': 'f4', 'float64': 'f8'}

class _ArrayInterface:
    def __init__(self, t):
        import sys
        self._t = t
        name = repr(t.dtype).split('.')[-1]
        if name not in _TYPESTR:  # numpy has no bfloat16; PyTorch's numpy() raises this TypeError.
            raise TypeError("Got unsupported ScalarType BFloat16")
        code = _TYPESTR[name]
        if code[0] != '|':
            code = ('<' if sys.byteorder == 'little' else '>') + code
        size = t.element_size()
        self.__array_interface__ = {
            'version': 3, 'shape': t.shape, 'typestr': code, 'data': (t.data_ptr(), False),
            'strides': tuple(s * size for s in t.stride())}

class _Explanation:
    """What dyntrace.explain() found: graphs, graph breaks (with reasons) and guards."""
    def __init__(self, graphs, guards, breaks):
        self.graphs = graphs
        self.guards = guards
        self.breaks = breaks
        self.graph_count = len(graphs)
        self.break_count = len(breaks)

    def __str__(self):
        lines = [f"{self.graph_count} graph(s), {self.break_count} break(s)"]
        for i, b in enumerate(self.breaks):
            lines.append(f"break {i + 1}: {b['reason']}")
            lines.append(f"    at {b['file']}:{b['line']} ({b['instruction']}, offset {b['offset']})")
        for i, (g, gu) in enumerate(zip(self.graphs, self.guards)):
            lines.append(f"graph {i + 1}:")
            lines.append(g.rstrip())
            lines.append("guards:")
            lines.extend("    " + line for line in gu.splitlines())
        return "\n".join(lines)

    __repr__ = __str__

def _memory_kind(device):
    kind = str(device).split(":")[0] if device is not None else "cpu"
    if kind not in ("cpu", "cuda"):
        raise ValueError("expected a cpu or cuda device, got %r" % (device,))
    return kind

def memory_allocated(device="cpu"):
    """Bytes of tensor storage dyntrace's allocator holds now on `device`'s type ("cpu" or
    "cuda"; every CUDA device counts together), in its size classes."""
    return _memory_counts(_memory_kind(device))[0]

def max_memory_allocated(device="cpu"):
    """The most memory_allocated(device) was since the start or reset_peak_memory_stats(device)."""
    return _memory_counts(_memory_kind(device))[1]

def reset_peak_memory_stats(device="cpu"):
    """Starts max_memory_allocated(device) over from what is allocated now."""
    _reset_peak_memory(_memory_kind(device))

class cuda:
    """CUDA devices, as torch.cuda: is_available(), device_count(), synchronize(device=None),
    memory_stats() (the caching allocator's driver allocations, cache hits, bytes in use and
    cached), memory_allocated(), max_memory_allocated(), reset_peak_memory_stats() (every
    device counts together) and empty_cache()."""
    memory_allocated = staticmethod(lambda device=None: memory_allocated("cuda"))
    max_memory_allocated = staticmethod(lambda device=None: max_memory_allocated("cuda"))
    reset_peak_memory_stats = staticmethod(lambda device=None: reset_peak_memory_stats("cuda"))
    is_available = staticmethod(_cuda_is_available)
    device_count = staticmethod(_cuda_device_count)
    synchronize = staticmethod(lambda device=None: _cuda_synchronize(
        None if device is None else (device if isinstance(device, int) else device.index)))
    memory_stats = staticmethod(_cuda_memory_stats)
    empty_cache = staticmethod(_cuda_empty_cache)

def _array(self, dtype=None, copy=None):
    a = _numpy(self)
    return a if dtype is None else a.astype(dtype, copy=False)

)PY";

PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "dyntrace",
    "dyntrace: a bytecode-level JIT for Python tensor code, and the tensor runtime it compiles for.",
    -1, module_functions,
};

}  // namespace

}  // namespace dt::interpreter::py

extern "C" PyObject* PyInit_dyntrace() {
  using namespace dt::interpreter::py;
  PyRef module = PyRef::Steal(PyModule_Create(&module_def));
  if (!module) return nullptr;
  if (!InitTypes(module.get())) return nullptr;
  MarkProcessConstantFunction(FnCudaIsAvailable);
  MarkProcessConstantFunction(FnCudaDeviceCount);
  if (!AddAutogradBindings(module.get())) return nullptr;
  PyObject* functional = AddNNModules(module.get());  // borrowed
  PyObject* linalg = functional == nullptr ? nullptr : AddLinalgModule(module.get());  // borrowed
  if (linalg == nullptr || !AddOpBindings(module.get(), functional, linalg)) return nullptr;
  if (!AddBytesBindings(module.get())) return nullptr;
  if (!AddDTypeInfo(module.get())) return nullptr;
  if (!AddNumpyBindings(module.get())) return nullptr;
  if (!AddJitBindings(module.get())) return nullptr;
  if (!AddBytecodeBindings(module.get())) return nullptr;
  if (!dt::interpreter::AddReportBindings(module.get())) return nullptr;
  if (!InitResumeIterator()) return nullptr;
  // Eager ops on CUDA tensors run as kernels from the kernel IR, not through the host.
  dt::jit::InstallCudaEagerOps();
  // The build keeps assertions (no NDEBUG), which also turns on abseil's mutex deadlock
  // detection: a cycle-graph update on every lock, about a tenth of a cached call's time.
  // Lock order is kept by construction (the hook, the code cache, then an executable).
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  PyObject* globals = PyModule_GetDict(module.get());  // borrowed
  if (PyDict_SetItemString(globals, "__builtins__", PyEval_GetBuiltins()) < 0) return nullptr;
  // A distinctive file name keeps the prelude's own functions out of tracing.
  PyRef prelude = PyRef::Steal(Py_CompileString(kPrelude, "<dyntrace prelude>", Py_file_input));
  if (!prelude) return nullptr;
  PyRef result = PyRef::Steal(PyEval_EvalCode(prelude.get(), globals, globals));
  if (!result) return nullptr;
  // Tensor is a static type: install the prelude's methods through its dict.
  for (auto [method, global] : {std::pair{"numpy", "_numpy"}, std::pair{"__array__", "_array"}}) {
    PyObject* fn = PyDict_GetItemString(globals, global);  // borrowed
    if (fn == nullptr || PyDict_SetItemString(TensorType.tp_dict, method, fn) < 0) return nullptr;
  }
  PyRef priority = PyRef::Steal(PyFloat_FromDouble(1000.0));
  if (PyDict_SetItemString(TensorType.tp_dict, "__array_priority__", priority.get()) < 0) return nullptr;
  PyType_Modified(&TensorType);
  if (!dt::interpreter::LoadEmbeddedSources(module.get())) return nullptr;
  // DYNTRACE_LOGS=graph,guards,... turns logs on in any Python process.
  if (const char* spec = std::getenv("DYNTRACE_LOGS")) {
    if (absl::Status status = dt::log::Configure(spec); !status.ok()) {
      const std::string message = absl::StrCat("DYNTRACE_LOGS ignored: ", status.message());
      if (PyErr_WarnEx(PyExc_RuntimeWarning, message.c_str(), 1) < 0) return nullptr;
    }
  }
  // DYNTRACE_STRESS=1 (what `dyntrace --stress` sets): enable() in stress mode from import on.
  if (const char* stress = std::getenv("DYNTRACE_STRESS"); stress != nullptr && *stress != '\0' &&
                                                            std::string_view(stress) != "0") {
    dt::interpreter::SetStressByEnvironment(true);
    dt::interpreter::SetStressMode(true);
    const dt::interpreter::JitOptions options;
    dt::interpreter::SetGlobalMode(&options);
  }
  return module.Release();
}
