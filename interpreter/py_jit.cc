// The Python surface of the frame evaluator: dyntrace.jit, tracing(), enable()/disable(),
// guards(), graphs(), explain(), stats(), reset(), and the Graph objects Python backends receive.
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "guards/guard_set.h"
#include "interpreter/code_cache.h"
#include "interpreter/cpython_frame.h"
#include "interpreter/graphviz.h"
#include "interpreter/py_compiled.h"
#include "interpreter/py_module.h"
#include "interpreter/py_str.h"
#include "interpreter/py_types.h"
#include "jit/cuda_codegen.h"
#include "jit/cuda_graph.h"
#include "jit/nvrtc_check.h"
#include "runtime/cuda_attention.h"
#include "runtime/cuda_index_kernels.h"
#include "runtime/cuda_tensor.h"
#include "runtime/log.h"
#include "runtime/nvrtc.h"

namespace dt::interpreter::py {
namespace {

using interpreter::JitOptions;

// ---- options ----
bool ParseOptions(PyObject* kwargs, JitOptions& options, const char* who) {
  if (kwargs == nullptr) return true;
  PyObject *key, *value;
  Py_ssize_t pos = 0;
  while (PyDict_Next(kwargs, &pos, &key, &value)) {
    // A key UTF-8 cannot encode is no option's name: it is reported below as unexpected.
    const std::string name = py::Utf8Or(key, "?");
    if (name == "backend") {
      if (PyUnicode_Check(value)) {
        const std::string b = py::Utf8Or(value, "?");
        if (b != "auto" && b != "eager" && b != "cpu" && b != "cuda") {
          PyErr_Format(PyExc_ValueError,
                       "%s(): backend '%s' is not available (use 'auto', 'eager', 'cpu', 'cuda' or a "
                       "callable backend(graph, example_inputs))",
                       who, b.c_str());
          return false;
        }
        options.backend = b;
      } else if (PyCallable_Check(value)) {
        options.backend = "python";
        options.backend_callable = PyRef::Borrow(value);
      } else {
        PyErr_Format(PyExc_TypeError, "%s(): backend must be a string or a callable, not %s", who,
                     Py_TYPE(value)->tp_name);
        return false;
      }
    } else if (name == "fullgraph") {
      options.fullgraph = PyObject_IsTrue(value);
    } else if (name == "dynamic") {
      if (value != Py_None && value != Py_True && value != Py_False) {
        PyErr_Format(PyExc_TypeError, "%s(): dynamic must be None, True or False, not %s", who,
                     Py_TYPE(value)->tp_name);
        return false;
      }
      options.dynamic = value == Py_None ? std::nullopt : std::optional<bool>(value == Py_True);
    } else if (name == "cache_limit") {
      if (!PyLong_Check(value) || PyBool_Check(value)) {
        PyErr_Format(PyExc_TypeError, "%s(): cache_limit must be an int", who);
        return false;
      }
      const long limit = PyLong_AsLong(value);
      if (limit < 1) {
        PyErr_Format(PyExc_ValueError, "%s(): cache_limit must be at least 1, got %ld", who, limit);
        return false;
      }
      options.cache_limit = static_cast<int>(limit);
    } else if (name == "cuda_graphs") {
      if (value == Py_True || value == Py_False) {
        options.cuda_graphs = value == Py_True ? "true" : "false";
      } else if (py::Utf8(value) == "auto") {
        options.cuda_graphs = "auto";
      } else {
        PyErr_Format(PyExc_ValueError, "%s(): cuda_graphs must be 'auto', True or False", who);
        return false;
      }
    } else {
      PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%s'", who, name.c_str());
      return false;
    }
  }
  return true;
}

PyCodeObject* CodeOf(PyObject* fn, const char* who) {
  if (IsCompiledFunction(fn)) return RootOf(fn);
  PyObject* target = fn;
  if (PyMethod_Check(target)) target = PyMethod_GET_FUNCTION(target);
  if (!PyFunction_Check(target)) {
    PyErr_Format(PyExc_TypeError, "%s() expects a Python function or what dyntrace.jit returned, got %s", who,
                 Py_TYPE(fn)->tp_name);
    return nullptr;
  }
  return reinterpret_cast<PyCodeObject*>(PyFunction_GET_CODE(target));
}

// The caches whose entries guards()/graphs()/kernels() show: a compiled function's own, or,
// for a plain function, every cache of its code (each compiled function of it, tracing()).
std::optional<std::vector<const interpreter::CodeCache*>> CachesOf(PyObject* fn, const char* who) {
  PyCodeObject* code = CodeOf(fn, who);
  if (code == nullptr) return std::nullopt;
  std::vector<const interpreter::CodeCache*> out;
  const interpreter::CodeCaches* caches = interpreter::FindCaches(code);
  if (caches == nullptr) return out;
  if (IsCompiledFunction(fn)) {
    if (const interpreter::CodeCache* own = caches->Find(KeyOf(fn))) out.push_back(own);
    return out;
  }
  for (const auto& cache : caches->by_key) out.push_back(cache.get());
  return out;
}

// The decorator jit(**options) returns: a callable holding the options.
struct PyJitDecorator {
  PyObject_HEAD
  JitOptions* options;
};
PyTypeObject JitDecoratorType = {PyVarObject_HEAD_INIT(nullptr, 0) "dyntrace._JitDecorator"};

void JitDecoratorDealloc(PyObject* self) {
  delete reinterpret_cast<PyJitDecorator*>(self)->options;
  Py_TYPE(self)->tp_free(self);
}

PyObject* JitDecoratorCall(PyObject* self, PyObject* args, PyObject* kwargs) {
  PyObject* fn;
  if (!PyArg_ParseTuple(args, "O:jit", &fn)) return nullptr;
  return NewCompiledFunction(fn, *reinterpret_cast<PyJitDecorator*>(self)->options);
}

PyObject* FnJit(PyObject*, PyObject* args, PyObject* kwargs) {
  JitOptions options;
  if (!ParseOptions(kwargs, options, "jit")) return nullptr;
  if (PyTuple_GET_SIZE(args) > 1) {
    PyErr_SetString(PyExc_TypeError, "jit() takes one positional argument (the function)");
    return nullptr;
  }
  if (PyTuple_GET_SIZE(args) == 1 && PyTuple_GET_ITEM(args, 0) != Py_None) {
    return NewCompiledFunction(PyTuple_GET_ITEM(args, 0), options);
  }
  auto* d = PyObject_New(PyJitDecorator, &JitDecoratorType);
  d->options = new JitOptions(std::move(options));
  return reinterpret_cast<PyObject*>(d);
}

// ---- tracing() context manager ----
struct PyTracing {
  PyObject_HEAD
  JitOptions* options;
};
PyTypeObject TracingType = {PyVarObject_HEAD_INIT(nullptr, 0) "dyntrace.tracing"};

void TracingDealloc(PyObject* self) {
  delete reinterpret_cast<PyTracing*>(self)->options;
  Py_TYPE(self)->tp_free(self);
}

PyObject* TracingEnter(PyObject* self, PyObject*) {
  const JitOptions* options = reinterpret_cast<PyTracing*>(self)->options;
  interpreter::EnterMode(interpreter::ActiveMode{options, interpreter::KeyForOptions(*options), nullptr});
  Py_INCREF(self);
  return self;
}

PyObject* TracingExit(PyObject*, PyObject*) {
  interpreter::ExitMode();
  Py_RETURN_FALSE;
}

PyMethodDef tracing_methods[] = {
    {"__enter__", TracingEnter, METH_NOARGS, nullptr},
    {"__exit__", TracingExit, METH_VARARGS, nullptr},
    {nullptr, nullptr, 0, nullptr},
};

PyObject* FnTracing(PyObject*, PyObject* args, PyObject* kwargs) {
  JitOptions options;
  if (PyTuple_GET_SIZE(args) != 0) {
    PyErr_SetString(PyExc_TypeError, "tracing() takes keyword arguments only");
    return nullptr;
  }
  if (!ParseOptions(kwargs, options, "tracing")) return nullptr;
  auto* t = PyObject_New(PyTracing, &TracingType);
  t->options = new JitOptions(std::move(options));
  return reinterpret_cast<PyObject*>(t);
}

PyObject* FnEnable(PyObject*, PyObject* args, PyObject* kwargs) {
  JitOptions options;
  if (PyTuple_GET_SIZE(args) != 0) {
    PyErr_SetString(PyExc_TypeError, "enable() takes keyword arguments only");
    return nullptr;
  }
  // `stress` belongs to enable() alone, so it is taken out before the options shared with jit().
  // Left out, it is what the process was started with: DYNTRACE_STRESS=1 (`dyntrace --stress`)
  // stays on through a plain enable(), the command's own included.
  PyRef options_kwargs = PyRef::Steal(kwargs != nullptr ? PyDict_Copy(kwargs) : PyDict_New());
  if (!options_kwargs) return nullptr;
  bool stress = interpreter::StressByEnvironment();
  if (PyObject* value = PyDict_GetItemString(options_kwargs.get(), "stress")) {  // borrowed
    const int truth = PyObject_IsTrue(value);
    if (truth < 0) return nullptr;
    stress = truth == 1;
    if (PyDict_DelItemString(options_kwargs.get(), "stress") < 0) return nullptr;
  }
  if (!ParseOptions(options_kwargs.get(), options, "enable")) return nullptr;
  interpreter::SetStressMode(stress);
  interpreter::SetGlobalMode(&options);
  Py_RETURN_NONE;
}

PyObject* FnDisable(PyObject*, PyObject*) {
  interpreter::SetStressMode(false);
  interpreter::SetGlobalMode(nullptr);
  Py_RETURN_NONE;
}

PyObject* FnIsStress(PyObject*, PyObject*) { return PyBool_FromLong(interpreter::StressMode()); }
PyObject* FnHookInstalled(PyObject*, PyObject*) { return PyBool_FromLong(interpreter::HookInstalled()); }

// _null_hook(on): installs (or removes) an evaluator that only calls CPython's, for the
// benchmark's floor. Refused while dyntrace's own hook is installed.
PyObject* FnNullHook(PyObject*, PyObject* on) {
  if (interpreter::HookInstalled()) {
    PyErr_SetString(PyExc_RuntimeError, "_null_hook(): dyntrace's frame evaluator is installed");
    return nullptr;
  }
  cpython::SetEvalFrame(PyObject_IsTrue(on) == 1 ? &cpython::NullEvalFrame : nullptr);
  Py_RETURN_NONE;
}

// {text: count} for each distinct reason a ReasonLog kept, in first-seen order.
PyObject* ReasonCounts(const interpreter::ReasonLog& log) {
  PyObject* d = PyDict_New();
  if (d == nullptr) return nullptr;
  for (const auto& [text, count] : log.counts()) {
    PyRef key = PyRef::Steal(py::FromUtf8(text));
    PyRef value = PyRef::Steal(PyLong_FromLongLong(count));
    if (!key || !value || PyDict_SetItem(d, key.get(), value.get()) < 0) PyErr_Clear();
  }
  return d;
}

PyObject* StringList(const std::vector<std::string>& items) {
  PyObject* list = PyList_New(0);
  for (const std::string& s : items) {
    // "replace": text made from user strings is UTF-8 by construction, but a list must never
    // get a null item.
    PyRef str = PyRef::Steal(PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace"));
    if (!str || PyList_Append(list, str.get()) < 0) PyErr_Clear();
  }
  return list;
}

PyObject* FnGuards(PyObject*, PyObject* fn) {
  auto caches = CachesOf(fn, "guards");
  if (!caches) return nullptr;
  std::vector<std::string> out;
  for (const interpreter::CodeCache* cache : *caches) {
    for (const auto& e : cache->AllEntries()) {
      std::string text = absl::StrJoin(e->guards.Lines(), "\n");
      if (e->start_offset > 0) text = absl::StrCat("# segment starting at offset ", e->start_offset, "\n", text);
      if (e->fallback()) text = absl::StrCat("# runs under CPython: ", *e->fallback_reason, "\n", text);
      out.push_back(text);
    }
  }
  return StringList(out);
}

PyObject* FnGraphs(PyObject*, PyObject* args, PyObject* kwargs) {
  PyObject* fn;
  const char* format = nullptr;
  int backward = 0;
  static const char* kwlist[] = {"fn", "format", "backward", nullptr};
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$zp:graphs", const_cast<char**>(kwlist), &fn, &format,
                                   &backward)) {
    return nullptr;
  }
  const std::string kind = format != nullptr ? format : "text";
  if (kind != "text" && kind != "dot" && kind != "svg") {
    PyErr_Format(PyExc_ValueError, "graphs(): format must be 'text', 'dot' or 'svg' (got '%s')", format);
    return nullptr;
  }
  auto caches = CachesOf(fn, "graphs");
  if (!caches) return nullptr;
  PyCodeObject* code = CodeOf(fn, "graphs");
  std::vector<std::string> out;
  for (const interpreter::CodeCache* cache : *caches) {
    for (const auto& e : cache->AllEntries()) {
      // Segments without tensor work have no graph to show (stats()["graphs"] does not count them).
      if (!e->graph() || e->graph()->nodes().empty()) continue;
      // backward=True: the backward graphs of entries whose inputs require grad instead.
      if (backward && e->backward == nullptr) continue;
      const Graph& graph = backward ? e->backward->joint->backward : *e->graph();
      std::string name = e->start_offset == 0 ? py::Utf8Or(code->co_name)
                                              : absl::StrCat(py::Utf8Or(code->co_name), "_at_", e->start_offset);
      if (backward) name += "_backward";
      if (kind == "text") {
        out.push_back(graph.ToString(name));
        continue;
      }
      const std::string dot = graph.ToDot(name);
      if (kind == "dot") {
        out.push_back(dot);
        continue;
      }
      absl::StatusOr<std::string> svg = graphviz::DotToSvg(dot);
      if (!svg.ok()) {
        PyErr_Format(PyExc_RuntimeError, "graphs(format='svg'): %s", std::string(svg.status().message()).c_str());
        return nullptr;
      }
      out.push_back(*std::move(svg));
    }
  }
  return StringList(out);
}

// kernels(fn, target="cpu"): the kernels generated for each of fn's entries the cpu backend
// compiled: its C++, or (target="cuda") the same kernel IR printed as CUDA C++, generated on
// demand, which needs no GPU.
PyObject* FnKernels(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* keywords[] = {"fn", "target", nullptr};
  PyObject* fn = nullptr;
  const char* target = "cpu";
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$s:kernels", const_cast<char**>(keywords), &fn, &target)) {
    return nullptr;
  }
  const std::string target_name = target;
  if (target_name != "cpu" && target_name != "cuda") {
    PyErr_Format(PyExc_ValueError, "kernels(): target must be 'cpu' or 'cuda', not '%s'", target);
    return nullptr;
  }
  auto caches = CachesOf(fn, "kernels");
  if (!caches) return nullptr;
  std::vector<std::string> out;
  for (const interpreter::CodeCache* cache : *caches) {
    for (const auto& e : cache->AllEntries()) {
      if (e->kernel_source.empty()) continue;
      if ((target_name == "cpu") == (e->cpu() != nullptr)) {  // this backend's own source
        out.push_back(e->kernel_source);
        continue;
      }
      if (e->cpu() == nullptr) continue;  // CUDA kernels have no C++ rendering kept
      absl::StatusOr<jit::CudaProgram> cuda = jit::EmitCudaFor(e->cpu()->program().graph);
      if (!cuda.ok()) {
        PyErr_Format(PyExc_RuntimeError, "kernels(target='cuda'): %s", std::string(cuda.status().message()).c_str());
        return nullptr;
      }
      out.push_back(cuda->readable);
    }
  }
  return StringList(out);
}

// _op_names(): every op in the registry (tests check each is covered).
PyObject* FnOpNames(PyObject*, PyObject*) {
  std::vector<std::string> names;
  for (const auto& op : OpRegistry::Get().ops()) names.push_back(op->name());
  return StringList(names);
}

// Why NVRTC can't be used here ("" when it can): tests that need device kernels skip loudly.
PyObject* FnNvrtcUnavailable(PyObject*, PyObject*) { return PyUnicode_FromString(ProbeNvrtc().reason.c_str()); }

PyObject* FnStats(PyObject*, PyObject*) {
  const interpreter::Stats& s = interpreter::GlobalStats();
  PyObject* d = PyDict_New();
  auto put = [&](const char* k, PyObject* v) {
    PyDict_SetItemString(d, k, v);
    Py_DECREF(v);
  };
  put("frames_seen", PyLong_FromLongLong(s.frames_seen));
  put("frames_traced", PyLong_FromLongLong(s.frames_traced));
  // Coverage: frames run as segments over the frames dyntrace could run. Skips count by reason;
  // generator and coroutine frames, and frames outside what dyntrace runs (module bodies, the
  // standard library, installed packages), are counted apart.
  put("frames_skipped", PyLong_FromLongLong(interpreter::FramesSkipped(s)));
  PyObject* by_reason = PyDict_New();
  for (int r = 0; r < interpreter::kNumSkipReasons; ++r) {
    const auto reason = static_cast<interpreter::SkipReason>(r);
    if (reason == interpreter::SkipReason::kNone || reason == interpreter::SkipReason::kGenerator ||
        reason == interpreter::SkipReason::kExcluded) {
      continue;
    }
    PyRef count = PyRef::Steal(PyLong_FromLongLong(s.frames_skipped_by[r]));
    PyDict_SetItemString(by_reason, interpreter::SkipReasonName(reason), count.get());
  }
  put("frames_skipped_by", by_reason);
  put("frames_generator",
      PyLong_FromLongLong(s.frames_skipped_by[static_cast<int>(interpreter::SkipReason::kGenerator)]));
  put("frames_excluded",
      PyLong_FromLongLong(s.frames_skipped_by[static_cast<int>(interpreter::SkipReason::kExcluded)]));
  put("frames_whole_in_cpython", PyLong_FromLongLong(s.frames_whole_in_cpython));
  const double coverage = interpreter::Coverage(s);
  put("coverage", coverage < 0 ? Py_NewRef(Py_None) : PyFloat_FromDouble(coverage));
  put("entries_evicted", PyLong_FromLongLong(s.entries_evicted));
  put("cache_hits", PyLong_FromLongLong(s.cache_hits));
  put("cache_misses", PyLong_FromLongLong(s.cache_misses));
  put("recompiles", PyLong_FromLongLong(s.recompiles));
  put("fallbacks", PyLong_FromLongLong(s.fallbacks));
  put("graphs", PyLong_FromLongLong(s.graphs));
  put("graph_breaks", PyLong_FromLongLong(s.graph_breaks));
  // Why graphs broke: the code depends on tensor data, uses Python the tracer does not follow,
  // raises (CPython raises it), or hits a size limit of the tracer.
  PyObject* kinds = PyDict_New();
  for (BreakKind kind : {BreakKind::kDataDependent, BreakKind::kUnsupported, BreakKind::kRaises, BreakKind::kLimit}) {
    PyRef count = PyRef::Steal(PyLong_FromLongLong(s.break_kinds[static_cast<int>(kind)]));
    PyDict_SetItemString(kinds, std::string(BreakKindName(kind)).c_str(), count.get());
  }
  put("break_kinds", kinds);
  put("escapes", PyLong_FromLongLong(s.escapes));
  put("handbacks", PyLong_FromLongLong(s.handbacks));
  put("backward_graphs", PyLong_FromLongLong(s.backward_graphs));
  put("compiled_backward_runs", PyLong_FromLongLong(s.compiled_backward_runs));
  put("saved_bytes", PyLong_FromLongLong(s.saved_bytes));
  put("save_everything_bytes", PyLong_FromLongLong(s.save_everything_bytes));
  put("recomputed_nodes", PyLong_FromLongLong(s.recomputed_nodes));
  // Each reason list holds the most recent ReasonLog::kRecent texts; "<name>_counts" counts each
  // distinct text (at most ReasonLog::kDistinct, then one "other" bucket); "reasons_dropped"
  // says how many older texts the lists no longer hold.
  const std::pair<const char*, const interpreter::ReasonLog*> logs[] = {
      {"recompile_reasons", &s.recompile_reasons},
      {"fallback_reasons", &s.fallback_reasons},
      {"break_reasons", &s.break_reasons},
      {"compile_failures", &s.compile_failures}};
  int64_t dropped = 0;
  for (const auto& [key, log] : logs) {
    put(key, StringList(std::vector<std::string>(log->recent().begin(), log->recent().end())));
    put(absl::StrCat(key, "_counts").c_str(), ReasonCounts(*log));
    dropped += log->dropped();
  }
  put("reasons_dropped", PyLong_FromLongLong(dropped));
  // Kernel libraries since the last reset(): built by the host compiler, or found cached.
  const jit::CacheCounters now = jit::KernelCache::Global().counters();
  const jit::CacheCounters& base = s.kernel_baseline;
  put("kernels_compiled", PyLong_FromLongLong(now.compiled - base.compiled));
  put("kernels_cached", PyLong_FromLongLong(now.from_disk - base.from_disk + now.from_memory - base.from_memory));
  put("kernels_from_disk", PyLong_FromLongLong(now.from_disk - base.from_disk));
  put("kernels_rejected", PyLong_FromLongLong(now.rejected - base.rejected));
  put("compile_seconds", PyFloat_FromDouble(now.compile_seconds - base.compile_seconds));
  // CUBINs for the cuda backend since the last reset(): built by NVRTC, or found cached.
  put("cubins_compiled", PyLong_FromLongLong(now.cubins_compiled - base.cubins_compiled));
  put("cubins_cached", PyLong_FromLongLong(now.cubins_from_disk - base.cubins_from_disk + now.cubins_from_memory -
                                           base.cubins_from_memory));
  put("nvrtc_seconds", PyFloat_FromDouble(now.nvrtc_seconds - base.nvrtc_seconds));
  // DYNTRACE_NVRTC_CHECK: graphs also compiled for CUDA by NVRTC since the last reset().
  const jit::NvrtcCheckTotals nvrtc = jit::NvrtcCheckCounters();
  put("nvrtc_checked", PyLong_FromLongLong(nvrtc.checked - s.nvrtc_baseline.checked));
  put("nvrtc_failures", PyLong_FromLongLong(nvrtc.failures - s.nvrtc_baseline.failures));
  put("nvrtc_skipped", PyLong_FromLongLong(nvrtc.skipped - s.nvrtc_baseline.skipped));
  put("nvrtc_unavailable", PyUnicode_FromString(nvrtc.unavailable.c_str()));
  // CUDA graphs since the last reset(): captured, launched, kernel nodes re-pointed, and shape
  // sets whose capture failed (they run without a graph; the kernels log says why).
  const jit::CudaGraphCounters& graphs = jit::GlobalCudaGraphCounters();
  put("cuda_graph_captures", PyLong_FromLongLong(graphs.captures - s.cuda_graph_baseline[0]));
  put("cuda_graph_replays", PyLong_FromLongLong(graphs.replays - s.cuda_graph_baseline[1]));
  put("cuda_graph_patches", PyLong_FromLongLong(graphs.patches - s.cuda_graph_baseline[2]));
  put("cuda_graph_refusals", PyLong_FromLongLong(graphs.refusals - s.cuda_graph_baseline[3]));
  // Kernels launched one at a time (those a capture records, or a replay runs, are not).
  put("cuda_kernel_launches",
      PyLong_FromLongLong(graphs.kernel_launches + CudaIndexKernelLaunches() + FusedAttentionLaunches() -
                          s.cuda_graph_baseline[4]));
  // Calls that ran without a graph because their executable held graphs for 8 shape sets
  // already (CUDA graphs are per concrete shape set, dynamic sizes included).
  put("cuda_graph_shape_limit", PyLong_FromLongLong(graphs.shape_limit - s.cuda_graph_baseline[5]));
  // Operations on CUDA tensors that went through host mirrors (graph/cuda_eager.h): 0 for a
  // program that stays on the device. Per op name since the process started.
  put("cuda_host_ops", PyLong_FromLongLong(CudaHostOps() - s.cuda_host_ops_baseline));
  // Attention computed by a fused kernel (runtime/cuda_attention.h, runtime/cpu_attention.h)
  // rather than as two GEMMs and a softmax: scaled_dot_product_attention, and the written-out
  // pattern in compiled graphs.
  put("fused_attention_runs", PyLong_FromLongLong(FusedAttentionRuns() - s.fused_attention_baseline));
  PyObject* by_name = PyDict_New();
  for (const auto& [name, count] : CudaHostOpsByName()) {
    PyRef n = PyRef::Steal(PyLong_FromLongLong(count));
    PyDict_SetItemString(by_name, name.c_str(), n.get());
  }
  put("cuda_host_ops_by_op", by_name);
  return d;
}

// reset(): forget everything; reset(compiled): what one compiled function compiled.
PyObject* FnReset(PyObject*, PyObject* args) {
  PyObject* compiled = nullptr;
  if (!PyArg_ParseTuple(args, "|O:reset", &compiled)) return nullptr;
  if (compiled == nullptr || compiled == Py_None) {
    interpreter::ResetAll();
    Py_RETURN_NONE;
  }
  if (!IsCompiledFunction(compiled)) {
    PyErr_Format(PyExc_TypeError, "reset() expects what dyntrace.jit returned, got %s", Py_TYPE(compiled)->tp_name);
    return nullptr;
  }
  interpreter::ResetKey(KeyOf(compiled));
  Py_RETURN_NONE;
}

// Forgets loaded kernel libraries and re-reads DYNTRACE_CACHE_DIR and CXX (tests change them).
PyObject* FnResetKernelCache(PyObject*, PyObject*) {
  jit::KernelCache::Global().Reset();
  Py_RETURN_NONE;
}

PyObject* FnSetLogs(PyObject*, PyObject* spec) {
  const std::optional<std::string> text = py::Utf8(spec);
  if (!text) {
    PyErr_SetString(PyExc_TypeError, "_set_logs() expects a str of valid UTF-8 text");
    return nullptr;
  }
  if (absl::Status status = log::Configure(*text); !status.ok()) {
    PyErr_SetString(PyExc_ValueError, std::string(status.message()).c_str());
    return nullptr;
  }
  Py_RETURN_NONE;
}

// explain(fn, *args, **kwargs): runs fn under tracing and reports every graph and break.
PyObject* FnExplain(PyObject* module, PyObject* args, PyObject* kwargs) {
  if (PyTuple_GET_SIZE(args) < 1) {
    PyErr_SetString(PyExc_TypeError, "explain() needs the function to run");
    return nullptr;
  }
  PyObject* fn = PyTuple_GET_ITEM(args, 0);
  if (!PyCallable_Check(fn)) {
    PyErr_Format(PyExc_TypeError, "explain() expects a callable, got %s", Py_TYPE(fn)->tp_name);
    return nullptr;
  }
  PyRef call_args = PyRef::Steal(PyTuple_GetSlice(args, 1, PyTuple_GET_SIZE(args)));
  // A fresh look, in a cache of explain's own: a compiled function's entries are neither used
  // (they would hide what a trace finds) nor touched.
  JitOptions options;
  PyObject* target = fn;
  PyCodeObject* root = nullptr;
  interpreter::CacheKey learned_from = 0;
  if (IsCompiledFunction(fn)) {
    learned_from = KeyOf(fn);
    options = OptionsOf(fn);
    target = TargetOf(fn);
    root = RootOf(fn);
  } else if (PyFunction_Check(fn) || (PyMethod_Check(fn) && PyFunction_Check(PyMethod_GET_FUNCTION(fn)))) {
    root = CodeOf(fn, "explain");
  }
  const interpreter::CacheKey key = interpreter::NewCacheKey();
  interpreter::TraceLog log;
  interpreter::SetTraceLog(&log);
  interpreter::EnterMode(interpreter::ActiveMode{&options, key, root, learned_from});
  PyRef result = PyRef::Steal(PyObject_Call(target, call_args.get(), kwargs));
  interpreter::ExitMode();
  interpreter::SetTraceLog(nullptr);
  interpreter::ResetKey(key);
  if (!result) return nullptr;
  PyRef breaks = PyRef::Steal(PyList_New(0));
  for (const interpreter::BreakRecord& b : log.breaks) {
    PyRef d = PyRef::Steal(Py_BuildValue("{s:s,s:s,s:i,s:s,s:i}", "reason", b.reason.c_str(), "file",
                                         b.file.c_str(), "line", b.line, "instruction",
                                         b.instruction.c_str(), "offset", b.offset));
    PyList_Append(breaks.get(), d.get());
  }
  PyRef graphs = PyRef::Steal(StringList(log.graphs));
  PyRef guard_list = PyRef::Steal(StringList(log.guards));
  PyRef cls = PyRef::Steal(PyObject_GetAttrString(module, "_Explanation"));
  if (!cls) return nullptr;
  return PyObject_CallFunctionObjArgs(cls.get(), graphs.get(), guard_list.get(), breaks.get(), nullptr);
}

PyMethodDef jit_functions[] = {
    {"jit", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(FnJit)), METH_VARARGS | METH_KEYWORDS,
     "jit(fn=None, *, backend='auto', fullgraph=False, dynamic=None, cuda_graphs='auto', cache_limit=8)"},
    {"tracing", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(FnTracing)), METH_VARARGS | METH_KEYWORDS,
     "with tracing(backend='auto'): trace every Python frame called inside the block"},
    {"enable", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(FnEnable)), METH_VARARGS | METH_KEYWORDS,
     "enable(*, stress=None, **options): trace every frame outside the standard library from now "
     "on; stress=True traces every frame, the standard library included (None: as DYNTRACE_STRESS)"},
    {"_stress_mode", FnIsStress, METH_NOARGS, "whether stress mode is on"},
    {"_hook_installed", FnHookInstalled, METH_NOARGS, "whether the frame evaluator is installed now"},
    {"_null_hook", FnNullHook, METH_O, nullptr},
    {"disable", FnDisable, METH_NOARGS, "disable(): stop enable()'s tracing"},
    {"guards", FnGuards, METH_O, "guards(fn) -> list of each cache entry's guard code"},
    {"graphs", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(FnGraphs)), METH_VARARGS | METH_KEYWORDS,
     "graphs(fn, *, format='text', backward=False) -> each cache entry's graph: 'text' (Python-like code), "
     "'dot' (Graphviz source) or 'svg' (a picture; needs Graphviz's dot command). A graph whose inputs require "
     "grad is its forward graph (the traced outputs, then the values saved for backward); backward=True gives "
     "those entries' backward graphs instead"},
    {"explain", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(FnExplain)), METH_VARARGS | METH_KEYWORDS,
     "explain(fn, *args, **kwargs): run fn under tracing and report graphs, breaks and guards"},
    {"stats", FnStats, METH_NOARGS, "stats() -> dict of counters"},
    {"reset", FnReset, METH_VARARGS,
     "reset(compiled=None): forget every compiled entry and counter, or only what one compiled function compiled"},
    {"_set_logs", FnSetLogs, METH_O, nullptr},
    {"_reset_kernel_cache", FnResetKernelCache, METH_NOARGS, nullptr},
    {"_op_names", FnOpNames, METH_NOARGS, nullptr},
    {"_nvrtc_unavailable", FnNvrtcUnavailable, METH_NOARGS, nullptr},
    {"kernels", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(FnKernels)), METH_VARARGS | METH_KEYWORDS,
     "kernels(fn, *, target='cpu') -> list of the kernels generated for fn's cache entries, as C++ "
     "(target='cpu') or as CUDA C++ (target='cuda')"},
    {nullptr, nullptr, 0, nullptr},
};

const Tensor* RecogniseTensor(PyObject* obj) { return IsTensor(obj) ? &Unwrap(obj) : nullptr; }

}  // namespace

bool AddJitBindings(PyObject* module) {
  guards::SetTensorRecogniser(&RecogniseTensor);
  guards::SetObjectAccess({&cpython::LookupOnType, &cpython::InstanceDict, [](PyObject* obj) -> PyObject* {
                             return py::IsTensor(obj) ? py::GradObject(obj) : nullptr;
                           }});
  JitDecoratorType.tp_basicsize = sizeof(PyJitDecorator);
  JitDecoratorType.tp_flags = Py_TPFLAGS_DEFAULT;
  JitDecoratorType.tp_dealloc = JitDecoratorDealloc;
  JitDecoratorType.tp_call = JitDecoratorCall;
  TracingType.tp_basicsize = sizeof(PyTracing);
  TracingType.tp_flags = Py_TPFLAGS_DEFAULT;
  TracingType.tp_dealloc = TracingDealloc;
  TracingType.tp_methods = tracing_methods;
  if (!InitGraphType(module) || !InitCompiledFunctionType(module) || PyType_Ready(&JitDecoratorType) < 0 ||
      PyType_Ready(&TracingType) < 0) {
    return false;
  }
  return PyModule_AddFunctions(module, jit_functions) >= 0;
}

}  // namespace dt::interpreter::py
