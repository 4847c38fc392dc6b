// The PEP 523 hook: per frame, one co_extra lookup decides whether dyntrace looks further; then
// guards pick a cache entry, a miss traces, and a compiled entry runs its graph and returns
// through the frame's own RETURN instruction.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "interpreter/code_cache.h"
#include "interpreter/cpython_frame.h"
#include "interpreter/py_types.h"
#include "runtime/errors.h"

namespace dt::jit {
namespace {

using py::PyRef;

Stats stats;
absl::flat_hash_set<CodeCache*>* all_caches = new absl::flat_hash_set<CodeCache*>();
std::vector<JitOptions>* tracing_modes = new std::vector<JitOptions>();
JitOptions* global_mode = nullptr;
TraceLog* trace_log = nullptr;
bool hook_installed = false;
// Set while dyntrace itself runs Python code (dis, sysconfig, a Python backend): those frames
// are not traced.
thread_local bool inside_dyntrace = false;
std::vector<std::string>* excluded_prefixes = nullptr;

struct Logs {
  bool graph = false, guards = false, breaks = false, recompiles = false;
} logs;

class InsideDyntrace {
 public:
  InsideDyntrace() : saved_(inside_dyntrace) { inside_dyntrace = true; }
  ~InsideDyntrace() { inside_dyntrace = saved_; }

 private:
  bool saved_;
};

void FreeCodeCache(void* extra) {
  auto* cache = static_cast<CodeCache*>(extra);
  all_caches->erase(cache);
  delete cache;
}

const JitOptions* ActiveMode() {
  if (!tracing_modes->empty()) return &tracing_modes->back();
  return global_mode;
}

// The standard library, installed packages and dyntrace's own helpers are not traced in
// tracing()/enable() mode.
bool Excluded(PyCodeObject* code) {
  if (excluded_prefixes == nullptr) {
    excluded_prefixes = new std::vector<std::string>();
    InsideDyntrace guard;
    PyRef sysconfig = PyRef::Steal(PyImport_ImportModule("sysconfig"));
    PyRef paths = sysconfig ? PyRef::Steal(PyObject_CallMethod(sysconfig.get(), "get_paths", nullptr)) : PyRef();
    if (paths) {
      for (const char* key : {"stdlib", "platstdlib", "purelib", "platlib"}) {
        PyObject* p = PyDict_GetItemString(paths.get(), key);
        if (p != nullptr && PyUnicode_Check(p)) excluded_prefixes->push_back(PyUnicode_AsUTF8(p));
      }
    }
    PyErr_Clear();
    excluded_prefixes->push_back("/usr/lib/python3/");
    excluded_prefixes->push_back("<frozen");
    excluded_prefixes->push_back("<dyntrace");
  }
  const char* filename = PyUnicode_AsUTF8(code->co_filename);
  if (filename == nullptr) {
    PyErr_Clear();
    return true;
  }
  for (const std::string& prefix : *excluded_prefixes) {
    if (!prefix.empty() && absl::StartsWith(filename, prefix)) return true;
  }
  return absl::StrContains(filename, "site-packages") || absl::StrContains(filename, "dist-packages");
}

std::string CodeName(PyCodeObject* code) {
  return absl::StrFormat("%s (%s:%d)", PyUnicode_AsUTF8(code->co_qualname),
                         PyUnicode_AsUTF8(code->co_filename), code->co_firstlineno);
}

guards::FrameInputs InputsOf(const cpython::FrameView& v) {
  guards::FrameInputs in;
  in.locals = v.localsplus;
  in.num_locals = v.code->co_nlocalsplus;
  in.globals = v.globals;
  in.builtins = v.builtins;
  in.closure = v.function != nullptr && PyFunction_Check(v.function) ? PyFunction_GET_CLOSURE(v.function)
                                                                      : nullptr;
  return in;
}

// Builds the return value; `made` caches wrappers so an output returned twice is one object.
PyObject* BuildOutput(const trace::OutputSpec& spec, const std::vector<Tensor>& outputs,
                      std::vector<PyObject*>& made, const guards::FrameInputs& inputs) {
  using Kind = trace::OutputSpec::Kind;
  switch (spec.kind) {
    case Kind::kGraphOutput: {
      PyObject*& slot = made[spec.index];
      if (slot == nullptr) slot = py::Wrap(outputs[spec.index]);
      Py_XINCREF(slot);
      return slot;
    }
    case Kind::kConst: return Py_NewRef(spec.obj.get());
    case Kind::kSource: {
      PyObject* v = spec.source->Resolve(inputs);
      if (v == nullptr) {
        PyErr_SetString(PyExc_RuntimeError, "dyntrace: a returned input disappeared");
        return nullptr;
      }
      return Py_NewRef(v);
    }
    case Kind::kTuple:
    case Kind::kList: {
      const Py_ssize_t n = static_cast<Py_ssize_t>(spec.children.size());
      PyObject* seq = spec.kind == Kind::kTuple ? PyTuple_New(n) : PyList_New(n);
      for (Py_ssize_t i = 0; i < n; ++i) {
        PyObject* item = BuildOutput(spec.children[i], outputs, made, inputs);
        if (item == nullptr) {
          Py_DECREF(seq);
          return nullptr;
        }
        if (spec.kind == Kind::kTuple) PyTuple_SET_ITEM(seq, i, item);
        else PyList_SET_ITEM(seq, i, item);
      }
      return seq;
    }
    case Kind::kDict: {
      PyObject* d = PyDict_New();
      for (size_t i = 0; i < spec.children.size(); ++i) {
        PyObject* item = BuildOutput(spec.children[i], outputs, made, inputs);
        if (item == nullptr || PyDict_SetItem(d, spec.keys[i].get(), item) < 0) {
          Py_XDECREF(item);
          Py_DECREF(d);
          return nullptr;
        }
        Py_DECREF(item);
      }
      return d;
    }
  }
  __builtin_unreachable();
}

std::vector<Tensor> ResolveInputs(const CacheEntry& entry, const guards::FrameInputs& inputs) {
  std::vector<Tensor> tensors;
  tensors.reserve(entry.input_sources.size());
  for (const guards::SourceRef& s : entry.input_sources) tensors.push_back(py::Unwrap(s->Resolve(inputs)));
  return tensors;
}

// Runs a Python backend's compiled callable; null with a Python error on failure.
absl::StatusOr<std::vector<Tensor>> RunPythonBackend(const CacheEntry& entry,
                                                     const std::vector<Tensor>& tensors) {
  InsideDyntrace guard;
  PyRef args = PyRef::Steal(PyTuple_New(tensors.size()));
  for (size_t i = 0; i < tensors.size(); ++i) PyTuple_SET_ITEM(args.get(), i, py::Wrap(tensors[i]));
  PyRef r = PyRef::Steal(PyObject_Call(entry.compiled.get(), args.get(), nullptr));
  if (!r) return Error(ErrorKind::kRuntime, "python");
  PyRef seq = PyRef::Steal(PySequence_Fast(r.get(), "a dyntrace backend must return a list or tuple of tensors"));
  if (!seq) return Error(ErrorKind::kRuntime, "python");
  std::vector<Tensor> outs;
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq.get()); ++i) {
    PyObject* item = PySequence_Fast_GET_ITEM(seq.get(), i);
    if (!py::IsTensor(item)) {
      PyErr_SetString(PyExc_TypeError, "a dyntrace backend returned a non-tensor output");
      return Error(ErrorKind::kRuntime, "python");
    }
    outs.push_back(py::Unwrap(item));
  }
  if (outs.size() != entry.graph->outputs().size()) {
    PyErr_Format(PyExc_ValueError, "a dyntrace backend returned %zd outputs; the graph has %zd",
                 outs.size(), entry.graph->outputs().size());
    return Error(ErrorKind::kRuntime, "python");
  }
  return outs;
}

PyObject* ExecuteEntry(PyThreadState* tstate, _PyInterpreterFrame* frame, const CacheEntry& entry,
                       const guards::FrameInputs& inputs) {
  std::vector<Tensor> tensors = ResolveInputs(entry, inputs);
  absl::StatusOr<std::vector<Tensor>> outputs;
  if (entry.compiled) {
    outputs = RunPythonBackend(entry, tensors);
    if (!outputs.ok()) return cpython::RaiseInFrame(tstate, frame);
  } else {
    Py_BEGIN_ALLOW_THREADS
    outputs = entry.graph->RunEager(tensors);
    Py_END_ALLOW_THREADS
  }
  if (!outputs.ok()) {
    if (!entry.has_inplace) {
      // Nothing was written: CPython reruns the frame and raises where the user's code raises,
      // with the user's traceback.
      return cpython::EvalDefault(tstate, frame, 0);
    }
    py::RaiseStatus(outputs.status());
    return cpython::RaiseInFrame(tstate, frame);
  }
  std::vector<PyObject*> made(outputs->size(), nullptr);
  PyObject* result = BuildOutput(entry.output, *outputs, made, inputs);
  for (PyObject* m : made) Py_XDECREF(m);
  if (result == nullptr) return cpython::RaiseInFrame(tstate, frame);
  if (entry.return_pushes_value) {
    PyObject* stack[1] = {result};
    return cpython::ResumeAt(tstate, frame, entry.return_offset, stack);
  }
  Py_DECREF(result);
  return cpython::ResumeAt(tstate, frame, entry.return_offset, {});
}

bool GraphHasInplace(const Graph& g) {
  for (const Node& n : g.nodes()) {
    if (n.inplace) return true;
  }
  return false;
}

// Compiles a successful trace into an entry: the eager backend, or a Python backend's callable.
// Returns null with a Python error set when the backend raised.
std::unique_ptr<CacheEntry> Compile(trace::TraceResult trace, const JitOptions& options,
                                    const guards::FrameInputs& inputs) {
  auto entry = std::make_unique<CacheEntry>();
  entry->guards = std::move(trace.guards);
  entry->graph = trace.graph;
  entry->input_sources = std::move(trace.input_sources);
  entry->output = std::move(trace.output);
  entry->return_offset = trace.return_offset;
  entry->return_pushes_value = trace.return_pushes_value;
  entry->has_inplace = GraphHasInplace(*entry->graph);
  if (options.backend_callable) {
    PyRef graph_obj = PyRef::Steal(py::WrapGraph(entry->graph));
    PyRef examples = PyRef::Steal(PyList_New(0));
    for (const Tensor& t : ResolveInputs(*entry, inputs)) {
      PyRef w = PyRef::Steal(py::Wrap(t));
      PyList_Append(examples.get(), w.get());
    }
    InsideDyntrace guard;
    PyRef compiled = PyRef::Steal(PyObject_CallFunctionObjArgs(
        options.backend_callable.get(), graph_obj.get(), examples.get(), nullptr));
    if (!compiled) return nullptr;
    entry->compiled = compiled;
  }
  return entry;
}

void RecordBreak(CodeCache& cache, const trace::TraceFailure& failure) {
  BreakRecord b{failure.reason, failure.file, failure.line,
                failure.instruction.empty() ? "(frame entry)" : failure.instruction, std::max(failure.offset, 0)};
  cache.breaks.push_back(b);
  if (trace_log != nullptr) trace_log->breaks.push_back(b);
  const std::string text = absl::StrFormat("%s at %s:%d (%s, offset %d)", b.reason, b.file, b.line,
                                           b.instruction, b.offset);
  stats.fallback_reasons.push_back(text);
  if (logs.breaks) std::fprintf(stderr, "[dyntrace:breaks] %s: %s\n", CodeName(cache.code).c_str(), text.c_str());
}

PyObject* EvalFrame(PyThreadState* tstate, _PyInterpreterFrame* frame, int throwflag) {
  if (throwflag || inside_dyntrace) return cpython::EvalDefault(tstate, frame, throwflag);
  const cpython::FrameView view = cpython::View(frame);
  auto* cache = static_cast<CodeCache*>(cpython::GetCodeExtra(view.code));
  if (cache == nullptr) {
    const JitOptions* mode = ActiveMode();
    if (mode == nullptr) return cpython::EvalDefault(tstate, frame, 0);
    cache = GetOrCreateCache(view.code, *mode, false);
    if (Excluded(view.code) ||
        (view.code->co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR))) {
      cache->excluded = true;
      cache->skip = true;
    }
  }
  if (cache->skip) {
    ++stats.frames_skipped;
    return cpython::EvalDefault(tstate, frame, 0);
  }
  ++stats.frames_seen;
  const guards::FrameInputs inputs = InputsOf(view);
  for (size_t i = 0; i < cache->entries.size(); ++i) {
    std::shared_ptr<CacheEntry> entry = cache->entries[i];
    if (!entry->guards.Check(inputs)) continue;
    if (entry->fallback) {
      ++stats.fallbacks;
      return cpython::EvalDefault(tstate, frame, 0);
    }
    ++stats.cache_hits;
    return ExecuteEntry(tstate, frame, *entry, inputs);
  }
  ++stats.cache_misses;
  if (!cache->entries.empty()) {
    std::string reason;
    {
      InsideDyntrace guard;
      reason = cache->entries.back()->guards.Explain(inputs).value_or("no guard failed (retrace)");
    }
    const std::string text = absl::StrCat(CodeName(view.code), ": ", reason);
    if (static_cast<int>(cache->entries.size()) >= cache->options.cache_limit) {
      cache->skip = true;
      if (!cache->warned) {
        cache->warned = true;
        const std::string msg = absl::StrFormat(
            "dyntrace: %s reached cache_limit=%d; it runs without compilation from now on. "
            "Last recompile reason: %s",
            CodeName(view.code), cache->options.cache_limit, reason);
        if (PyErr_WarnEx(PyExc_RuntimeWarning, msg.c_str(), 1) < 0) {
          return cpython::RaiseInFrame(tstate, frame);
        }
      }
      return cpython::EvalDefault(tstate, frame, 0);
    }
    ++stats.recompiles;
    cache->recompile_reasons.push_back(reason);
    stats.recompile_reasons.push_back(text);
    if (logs.recompiles) std::fprintf(stderr, "[dyntrace:recompiles] %s\n", text.c_str());
  }
  ++stats.frames_traced;
  std::variant<trace::TraceResult, trace::TraceFailure> traced;
  {
    InsideDyntrace guard;
    traced = trace::TraceFrame({view.code, view.function, inputs});
  }
  if (auto* failure = std::get_if<trace::TraceFailure>(&traced)) {
    RecordBreak(*cache, *failure);
    if (cache->options.fullgraph) {
      PyErr_Format(PyExc_RuntimeError,
                   "dyntrace (fullgraph=True): cannot capture %s: %s at %s:%d (%s)",
                   CodeName(view.code).c_str(), failure->reason.c_str(), failure->file.c_str(),
                   failure->line, failure->instruction.c_str());
      return cpython::RaiseInFrame(tstate, frame);
    }
    ++stats.fallbacks;
    if (!failure->touched_tensors && !cache->explicit_jit) {
      cache->skip = true;  // no tensor work here: not worth looking at again
    } else {
      auto entry = std::make_unique<CacheEntry>();
      entry->guards = std::move(failure->guards);
      entry->fallback = true;
      entry->fallback_reason = failure->reason;
      cache->entries.push_back(std::move(entry));
    }
    return cpython::EvalDefault(tstate, frame, 0);
  }
  auto& result = std::get<trace::TraceResult>(traced);
  if (!result.touched_tensors && !cache->explicit_jit) {
    cache->skip = true;
    return cpython::EvalDefault(tstate, frame, 0);
  }
  const std::string graph_text = result.graph->ToString(PyUnicode_AsUTF8(view.code->co_name));
  if (logs.graph) std::fprintf(stderr, "[dyntrace:graph] %s\n%s", CodeName(view.code).c_str(), graph_text.c_str());
  if (logs.guards) {
    std::fprintf(stderr, "[dyntrace:guards] %s\n    %s\n", CodeName(view.code).c_str(),
                 absl::StrJoin(result.guards.Lines(), "\n    ").c_str());
  }
  if (trace_log != nullptr) {
    trace_log->graphs.push_back(graph_text);
    trace_log->guards.push_back(absl::StrJoin(result.guards.Lines(), "\n"));
  }
  std::unique_ptr<CacheEntry> entry = Compile(std::move(result), cache->options, inputs);
  if (entry == nullptr) return cpython::RaiseInFrame(tstate, frame);
  ++stats.graphs;
  std::shared_ptr<CacheEntry> e(std::move(entry));
  cache->entries.push_back(e);
  return ExecuteEntry(tstate, frame, *e, inputs);
}

}  // namespace

Stats& GlobalStats() { return stats; }

CodeCache* FindCache(PyCodeObject* code) {
  cpython::InitCodeExtra(&FreeCodeCache);
  return static_cast<CodeCache*>(cpython::GetCodeExtra(code));
}

CodeCache* GetOrCreateCache(PyCodeObject* code, const JitOptions& options, bool explicit_jit) {
  cpython::InitCodeExtra(&FreeCodeCache);
  auto* cache = static_cast<CodeCache*>(cpython::GetCodeExtra(code));
  if (cache == nullptr) {
    cache = new CodeCache();
    cache->code = code;
    cpython::SetCodeExtra(code, cache);
    all_caches->insert(cache);
  }
  if (explicit_jit) {
    cache->options = options;
    cache->explicit_jit = true;
    cache->skip = false;
    cache->warned = false;
  } else if (!cache->explicit_jit && cache->entries.empty()) {
    cache->options = options;
  }
  return cache;
}

void ResetAll() {
  for (CodeCache* cache : *all_caches) {
    cache->entries.clear();
    cache->recompile_reasons.clear();
    cache->breaks.clear();
    cache->warned = false;
    cache->skip = cache->excluded;
  }
  stats = Stats();
}

void PushTracingMode(const JitOptions& options) {
  InstallHook();
  tracing_modes->push_back(options);
}

void PopTracingMode() {
  if (!tracing_modes->empty()) tracing_modes->pop_back();
}

void SetGlobalMode(const JitOptions* options) {
  delete global_mode;
  global_mode = options != nullptr ? new JitOptions(*options) : nullptr;
  if (options != nullptr) InstallHook();
}

void InstallHook() {
  if (hook_installed) return;
  cpython::InitCodeExtra(&FreeCodeCache);
  cpython::SetEvalFrame(&EvalFrame);
  hook_installed = true;
}

void SetTraceLog(TraceLog* log) { trace_log = log; }

void SetLogs(const std::string& spec) {
  logs = Logs();
  trace::log_bytecode = false;
  for (absl::string_view kind : absl::StrSplit(spec, ',', absl::SkipWhitespace())) {
    if (kind == "graph") logs.graph = true;
    else if (kind == "guards") logs.guards = true;
    else if (kind == "breaks") logs.breaks = true;
    else if (kind == "recompiles") logs.recompiles = true;
    else if (kind == "bytecode") trace::log_bytecode = true;
  }
}

}  // namespace dt::jit
