// The PEP 523 hook: per frame, one co_extra lookup decides whether dyntrace looks further; then
// guards pick a cache entry, a miss traces, and a compiled entry runs its graph and returns
// through the frame's own RETURN instruction.
#include <algorithm>
#include <cstdio>
#include <utility>
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
#include "interpreter/py_str.h"
#include "interpreter/py_types.h"
#include "interpreter/resume_iterator.h"
#include "runtime/cuda_tensor.h"
#include "runtime/errors.h"
#include "runtime/log.h"

namespace dt::jit {
namespace {

using py::PyRef;

// Breaks and recompile reasons kept per code object (for explain() and the report).
constexpr size_t kMaxRecordsPerCode = 64;

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
// Stress mode (DYNTRACE_STRESS=1, enable(stress=True)): every frame of every module is traced and
// run through segments, the standard library included, and frames without tensor work keep their
// entries instead of being skipped, so the interpreter's semantics meet code nobody wrote for it.
bool stress_mode = false;


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

bool IsGeneratorLike(PyCodeObject* code) {
  return (code->co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR)) != 0;
}

// dyntrace's own Python helpers (the prelude) run inside dyntrace's bookkeeping: never traced.
bool IsDyntraceInternal(PyCodeObject* code) {
  const std::optional<std::string> filename = py::Utf8(code->co_filename);
  if (!filename) return true;
  return absl::StartsWith(*filename, "<dyntrace");
}

// The standard library, installed packages and dyntrace's own helpers are not traced in
// tracing()/enable() mode (stress mode excludes only dyntrace's own helpers).
bool Excluded(PyCodeObject* code) {
  if (stress_mode) return IsDyntraceInternal(code);
  if (excluded_prefixes == nullptr) {
    excluded_prefixes = new std::vector<std::string>();
    InsideDyntrace guard;
    PyRef sysconfig = PyRef::Steal(PyImport_ImportModule("sysconfig"));
    PyRef paths = sysconfig ? PyRef::Steal(PyObject_CallMethod(sysconfig.get(), "get_paths", nullptr)) : PyRef();
    if (paths) {
      for (const char* key : {"stdlib", "platstdlib", "purelib", "platlib"}) {
        PyObject* p = PyDict_GetItemString(paths.get(), key);
        if (std::optional<std::string> prefix = py::Utf8(p)) excluded_prefixes->push_back(*prefix);
      }
    }
    PyErr_Clear();
    excluded_prefixes->push_back("/usr/lib/python3/");
    excluded_prefixes->push_back("<frozen");
    excluded_prefixes->push_back("<dyntrace");
  }
  const std::optional<std::string> filename = py::Utf8(code->co_filename);
  if (!filename) return true;
  for (const std::string& prefix : *excluded_prefixes) {
    if (!prefix.empty() && absl::StartsWith(*filename, prefix)) return true;
  }
  return absl::StrContains(*filename, "site-packages") || absl::StrContains(*filename, "dist-packages");
}

std::string CodeName(PyCodeObject* code) {
  return absl::StrFormat("%s (%s:%d)", py::Utf8Or(code->co_qualname),
                         py::Utf8Or(code->co_filename), code->co_firstlineno);
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

// Builds Python objects from output specs. Graph outputs are wrapped once (so a tensor returned
// twice is one object) and memo slots hold objects several slots share.
class Builder {
 public:
  Builder(const std::vector<Tensor>& outputs, const guards::FrameInputs& inputs, int num_memo,
          const std::vector<PyRef>& numbers)
      : outputs_(outputs), inputs_(inputs), numbers_(numbers), made_(outputs.size(), nullptr),
        memo_(num_memo, nullptr) {}
  ~Builder() {
    for (PyObject* m : made_) Py_XDECREF(m);
    for (PyObject* m : memo_) Py_XDECREF(m);
  }

  // A new reference; null is a valid result for kNull. `ok()` tells whether a Python error is set.
  PyObject* Build(const trace::OutputSpec& spec) {
    PyObject* obj = BuildUnmemoised(spec);
    if (obj != nullptr && spec.memo >= 0 && memo_[spec.memo] == nullptr) {
      Py_INCREF(obj);
      memo_[spec.memo] = obj;
    }
    return obj;
  }
  bool ok() const { return !failed_; }

 private:
  PyObject* Fail() {
    failed_ = true;
    if (!PyErr_Occurred()) {
      PyErr_SetString(PyExc_RuntimeError, "dyntrace: could not rebuild the frame state at a graph break");
    }
    return nullptr;
  }

  PyObject* BuildUnmemoised(const trace::OutputSpec& spec) {
    using Kind = trace::OutputSpec::Kind;
    switch (spec.kind) {
      case Kind::kGraphOutput: {
        PyObject*& slot = made_[spec.index];
        if (slot == nullptr) slot = py::Wrap(outputs_[spec.index]);
        if (slot == nullptr) return Fail();
        return Py_NewRef(slot);
      }
      case Kind::kConst: return Py_NewRef(spec.obj.get());
      case Kind::kNull: return nullptr;
      case Kind::kMemo:
        // A slot not built yet would be a cycle built in the wrong order: never a silent NULL.
        if (memo_[spec.index] == nullptr) return Fail();
        return Py_NewRef(memo_[spec.index]);
      case Kind::kScalarSlot: return Py_NewRef(numbers_[spec.index].get());
      case Kind::kSource: {
        PyObject* v = spec.source->Resolve(inputs_);
        // A local the segment never touched is passed on as it was, unbound included (nothing
        // guards that an untouched local is bound).
        if (v == nullptr && spec.source->kind == guards::Source::Kind::kLocal) return nullptr;
        if (v == nullptr) {
          PyErr_Format(PyExc_RuntimeError, "dyntrace: %s disappeared", spec.source->ToString().c_str());
          return Fail();
        }
        return Py_NewRef(v);
      }
      case Kind::kTuple:
      case Kind::kList:
      case Kind::kIterator: {
        const Py_ssize_t n = static_cast<Py_ssize_t>(spec.children.size());
        PyObject* seq = spec.kind == Kind::kList ? PyList_New(n) : PyTuple_New(n);
        if (seq == nullptr) return Fail();
        // Memoised before its items: a list may contain itself (`x.append(x)`).
        if (spec.memo >= 0 && spec.kind != Kind::kIterator) memo_[spec.memo] = Py_NewRef(seq);
        for (Py_ssize_t i = 0; i < n; ++i) {
          PyObject* item = Build(spec.children[i]);
          if (item == nullptr) {
            Py_DECREF(seq);
            return Fail();
          }
          if (spec.kind == Kind::kList) PyList_SET_ITEM(seq, i, item);
          else PyTuple_SET_ITEM(seq, i, item);
        }
        if (spec.kind != Kind::kIterator) return seq;
        // The remaining items of a loop the trace was in; readable by the next segment's trace.
        PyObject* it = py::NewResumeIterator(seq);
        return it != nullptr ? it : Fail();
      }
      case Kind::kDict: {
        PyObject* d = PyDict_New();
        if (d == nullptr) return Fail();
        if (spec.memo >= 0) memo_[spec.memo] = Py_NewRef(d);  // before its values, like lists
        for (size_t i = 0; i < spec.children.size(); ++i) {
          PyObject* item = Build(spec.children[i]);
          if (item == nullptr || PyDict_SetItem(d, spec.keys[i].get(), item) < 0) {
            Py_XDECREF(item);
            Py_DECREF(d);
            return Fail();
          }
          Py_DECREF(item);
        }
        return d;
      }
      case Kind::kCell: {
        // The cell exists (and is memoised) before its contents: a function stored in it may
        // close over the cell itself (`def trace(): return trace`).
        PyObject* cell = PyCell_New(nullptr);
        if (cell == nullptr) return Fail();
        if (spec.memo >= 0) memo_[spec.memo] = Py_NewRef(cell);
        PyObject* contents = Build(spec.children[0]);
        if (contents == nullptr && failed_) {
          Py_DECREF(cell);
          return nullptr;
        }
        PyCell_SET(cell, contents);  // steals `contents`
        return cell;
      }
      case Kind::kSlice: {
        PyObject* parts[3];
        for (int i = 0; i < 3; ++i) parts[i] = Build(spec.children[i]);
        PyObject* slice = failed_ ? nullptr : PySlice_New(parts[0], parts[1], parts[2]);
        for (PyObject* p : parts) Py_XDECREF(p);
        return slice != nullptr ? slice : Fail();
      }
      case Kind::kBoundMethod: {
        PyObject* self = Build(spec.children[0]);
        if (self == nullptr) return Fail();
        PyObject* fn = spec.obj.get();
        PyObject* method;
        if (PyUnicode_Check(fn)) {
          method = PyObject_GetAttr(self, fn);  // dict.get, list.append: C methods of builtins
        } else if (PyFunction_Check(fn)) {
          method = PyMethod_New(fn, self);
        } else if (Py_TYPE(fn)->tp_descr_get != nullptr) {
          method = Py_TYPE(fn)->tp_descr_get(fn, self, reinterpret_cast<PyObject*>(Py_TYPE(self)));
        } else {
          method = Py_NewRef(fn);
        }
        Py_DECREF(self);
        return method != nullptr ? method : Fail();
      }
      case Kind::kFunction: {
        PyObject* fn = PyFunction_New(spec.obj.get(), spec.globals);
        if (fn == nullptr) return Fail();
        // Memoised before its closure: a cell in the closure may hold the function itself.
        if (spec.memo >= 0) memo_[spec.memo] = Py_NewRef(fn);
        PyObject* parts[3];
        for (int i = 0; i < 3; ++i) parts[i] = Build(spec.children[i]);
        if (failed_ || (parts[0] != nullptr && PyFunction_SetDefaults(fn, parts[0]) < 0) ||
            (parts[1] != nullptr && PyFunction_SetKwDefaults(fn, parts[1]) < 0) ||
            (parts[2] != nullptr && PyFunction_SetClosure(fn, parts[2]) < 0)) {
          for (PyObject* p : parts) Py_XDECREF(p);
          Py_DECREF(fn);
          return Fail();
        }
        for (PyObject* p : parts) Py_XDECREF(p);
        return fn;
      }
    }
    __builtin_unreachable();
  }

  const std::vector<Tensor>& outputs_;
  const guards::FrameInputs& inputs_;
  const std::vector<PyRef>& numbers_;
  std::vector<PyObject*> made_;
  std::vector<PyObject*> memo_;
  bool failed_ = false;
};

std::vector<Tensor> ResolveInputs(const CacheEntry& entry, const guards::FrameInputs& inputs) {
  std::vector<Tensor> tensors;
  tensors.reserve(entry.input_sources.size());
  for (const guards::SourceRef& s : entry.input_sources) tensors.push_back(py::Unwrap(s->Resolve(inputs)));
  return tensors;
}

// Runs a Python backend's compiled callable; an error status means a Python error is set.
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

// Graphs that read run-time Python numbers run on the eager backend: a Python backend's callable
// only receives tensors.
bool GraphReadsNumbers(const Graph& g) {
  for (const Node& n : g.nodes()) {
    for (const GraphArg& a : n.args) {
      if (std::holds_alternative<ScalarRef>(a.content)) return true;
    }
  }
  return false;
}

bool GraphHasInplace(const Graph& g) {
  for (const Node& n : g.nodes()) {
    if (n.inplace) return true;
  }
  return false;
}

// Compiles a trace into an entry: the eager backend, or a Python backend's callable. Returns null
// with a Python error set when the backend raised.
// The cpu backend: fused kernels from the host compiler. When that fails (no compiler, a
// compiler error) the graph runs eagerly and the reason is logged: never a wrong result.
void CompileForCpu(CacheEntry& entry, const std::string& name) {
  absl::StatusOr<std::shared_ptr<backend::CpuExecutable>> built =
      backend::CpuExecutable::Build(*entry.graph, name);
  if (std::string warning = backend::KernelCache::Global().TakeWarning(); !warning.empty()) {
    // A warning turned into an error by a filter can't stop compilation here: it is printed.
    if (PyErr_WarnEx(PyExc_RuntimeWarning, warning.c_str(), 1) < 0) PyErr_WriteUnraisable(nullptr);
  }
  if (!built.ok()) {
    const std::string reason = absl::StrCat(name, ": the cpu backend could not compile the graph (",
                                            built.status().message(), "); it runs eagerly");
    stats.compile_failures.Add(reason);
    if (log::Enabled(log::Kind::kKernels)) log::Write(log::Kind::kKernels, reason);
    entry.backend_used = "eager";
    return;
  }
  entry.cpu = *built;
  entry.backend_used = "cpu";
  entry.kernel_source = entry.cpu->kernel_source();
  entry.compile_seconds += entry.cpu->build_seconds();
}

// The CUDA device a graph reads or creates tensors on, if any.
std::optional<Device> CudaDeviceRead(const CacheEntry& entry, const guards::FrameInputs& inputs) {
  for (const Tensor& t : ResolveInputs(entry, inputs)) {
    if (t.device().type == DeviceType::kCuda) return t.device();
  }
  for (const Node& node : entry.graph->nodes()) {  // creation ops asked for a CUDA result
    for (const GraphArg& arg : node.args) {
      const auto* value = std::get_if<ArgValue>(&arg.content);
      const Device* device = value ? std::get_if<Device>(value) : nullptr;
      if (device != nullptr && device->type == DeviceType::kCuda) return *device;
    }
  }
  return std::nullopt;
}

// The cuda backend: NVRTC-compiled kernels on the graph's device. Like the cpu backend, a
// failure (no NVRTC, a module the driver rejects) runs the graph eagerly with the reason logged.
void CompileForCuda(CacheEntry& entry, const std::string& name, Device device, const JitOptions& options) {
  // jit() validated the option; a bad value can only come from a caller inside dyntrace.
  const backend::CudaGraphMode graphs =
      backend::ParseCudaGraphMode(options.cuda_graphs).value_or(backend::CudaGraphMode::kAuto);
  absl::StatusOr<std::shared_ptr<backend::CudaExecutable>> built =
      backend::CudaExecutable::Build(*entry.graph, name, device, graphs);
  if (std::string warning = backend::KernelCache::Global().TakeWarning(); !warning.empty()) {
    if (PyErr_WarnEx(PyExc_RuntimeWarning, warning.c_str(), 1) < 0) PyErr_WriteUnraisable(nullptr);
  }
  if (!built.ok()) {
    const std::string reason = absl::StrCat(name, ": the cuda backend could not compile the graph (",
                                            built.status().message(), "); it runs eagerly");
    stats.compile_failures.Add(reason);
    if (log::Enabled(log::Kind::kKernels)) log::Write(log::Kind::kKernels, reason);
    entry.backend_used = "eager";
    return;
  }
  entry.cuda = *built;
  entry.backend_used = "cuda";
  entry.kernel_source = entry.cuda->kernel_source();
  entry.compile_seconds += entry.cuda->build_seconds();
}

std::shared_ptr<CacheEntry> Compile(trace::TraceResult trace, const JitOptions& options,
                                    const guards::FrameInputs& inputs, int start_offset,
                                    const std::string& name) {
  auto entry = std::make_shared<CacheEntry>();
  entry->start_offset = start_offset;
  entry->guards = std::move(trace.guards);
  entry->graph = trace.graph;
  entry->input_sources = std::move(trace.input_sources);
  entry->exit = trace.exit;
  entry->output = std::move(trace.output);
  entry->return_offset = trace.return_offset;
  entry->return_pushes_value = trace.return_pushes_value;
  entry->locals_state = std::move(trace.locals_state);
  entry->stack_state = std::move(trace.stack_state);
  entry->num_memo = trace.num_memo;
  entry->scalars = std::move(trace.scalars);
  entry->break_offset = trace.break_offset;
  entry->jump_target = trace.jump_target;
  entry->jump_if_true = trace.jump_if_true;
  entry->next_offset = trace.next_offset;
  entry->call_argc = trace.call_argc;
  entry->call_kwnames = trace.call_kwnames;
  if (trace.break_info) entry->break_reason = trace.break_info->reason;
  entry->has_inplace = GraphHasInplace(*entry->graph);
  if (options.backend_callable && !entry->graph->nodes().empty() && !GraphReadsNumbers(*entry->graph)) {
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
    entry->backend_used = "python";
  } else if ((options.backend == "cpu" || options.backend == "auto") && !entry->graph->nodes().empty() &&
             !CudaDeviceRead(*entry, inputs)) {
    CompileForCpu(*entry, name);
  } else if ((options.backend == "cuda" || options.backend == "auto") && !entry->graph->nodes().empty() &&
             CudaDeviceRead(*entry, inputs)) {
    CompileForCuda(*entry, name, *CudaDeviceRead(*entry, inputs), options);
  } else {
    // Graphs over CUDA tensors never run CPU kernels, which cannot read device memory; the
    // eager backend runs them through host mirrors (graph/cuda_eager.h).
    entry->backend_used = "eager";
  }
  return entry;
}

void RecordBreak(CodeCache& cache, const trace::BreakInfo& info, bool fallback) {
  BreakRecord b{info.reason, info.file, info.line,
                info.instruction.empty() ? "(frame entry)" : info.instruction, std::max(info.offset, 0)};
  // Per code object, the first breaks are kept for explain() and the report; a frame traced over
  // and over (a new closure each call) must not grow them without bound.
  if (cache.breaks.size() < kMaxRecordsPerCode) cache.breaks.push_back(b);
  if (trace_log != nullptr) trace_log->breaks.push_back(b);
  const std::string text = absl::StrFormat("%s at %s:%d (%s, offset %d)", b.reason, b.file, b.line,
                                           b.instruction, b.offset);
  ++stats.graph_breaks;
  stats.break_reasons.Add(text);
  if (fallback) stats.fallback_reasons.Add(text);
  if (log::Enabled(log::Kind::kBreaks)) log::Write(log::Kind::kBreaks, absl::StrCat(CodeName(cache.code), ": ", text));
}

trace::BreakInfo InfoOf(const trace::TraceFailure& f) {
  return trace::BreakInfo{f.reason, f.file, f.line, f.offset, f.instruction};
}

// The values a segment starts with: the frame itself at entry, else the state the previous
// segment left (owned references).
struct SegmentState {
  std::vector<PyObject*> locals;
  std::vector<PyObject*> stack;
  SegmentState() = default;
  SegmentState(const SegmentState&) = delete;
  SegmentState& operator=(SegmentState&& other) noexcept {
    Clear();
    locals.swap(other.locals);
    stack.swap(other.stack);
    return *this;
  }
  ~SegmentState() { Clear(); }
  void Clear() {
    for (PyObject* o : locals) Py_XDECREF(o);
    for (PyObject* o : stack) Py_XDECREF(o);
    locals.clear();
    stack.clear();
  }
  // Gives the references away (to the frame).
  std::vector<PyObject*> TakeLocals() { return std::exchange(locals, {}); }
  std::vector<PyObject*> TakeStack() { return std::exchange(stack, {}); }
};

// While an escape runs user code, the frame it escaped from is the thread's running frame,
// positioned at the escaping instruction with the segment's locals (see EnterForEscape).
// An escape also counts as one level of Python recursion, as the frame would under CPython's
// evaluator: a recursive function whose frames run as segments (`def f(): return f()`) must end
// in RecursionError, not in a C stack overflow.
class EscapeScope {
 public:
  EscapeScope(PyThreadState* tstate, _PyInterpreterFrame* frame, int offset, const SegmentState& state)
      : tstate_(tstate), entered_(Py_EnterRecursiveCall(" while calling a Python object") == 0) {
    if (entered_) previous_ = cpython::EnterForEscape(tstate, frame, offset, state.locals);
  }
  ~EscapeScope() {
    if (!entered_) return;
    cpython::LeaveAfterEscape(tstate_, previous_);
    Py_LeaveRecursiveCall();
  }
  EscapeScope(const EscapeScope&) = delete;
  EscapeScope& operator=(const EscapeScope&) = delete;
  // False: the recursion limit is reached and RecursionError is set; the escape must not run.
  bool entered() const { return entered_; }

 private:
  PyThreadState* tstate_;
  bool entered_;
  _PyInterpreterFrame* previous_ = nullptr;
};

// Continues the frame under CPython at `offset` with `state` (or from the start, at entry).
PyObject* HandBack(PyThreadState* tstate, _PyInterpreterFrame* frame, bool at_entry,
                   SegmentState& state, int offset) {
  if (at_entry) return cpython::EvalDefault(tstate, frame, 0);
  ++stats.handbacks;
  std::vector<PyObject*> locals = state.TakeLocals();
  std::vector<PyObject*> stack = state.TakeStack();
  cpython::WriteLocals(frame, locals);
  return cpython::ResumeAt(tstate, frame, offset, stack);
}

// Raises the pending error from the frame as if the instruction at `offset` raised it.
PyObject* RaiseFrom(PyThreadState* tstate, _PyInterpreterFrame* frame, bool at_entry,
                    SegmentState& state, int offset) {
  if (at_entry && state.locals.empty()) return cpython::RaiseInFrame(tstate, frame);
  std::vector<PyObject*> locals = state.TakeLocals();
  std::vector<PyObject*> stack = state.TakeStack();
  if (!locals.empty()) cpython::WriteLocals(frame, locals);
  return cpython::RaiseAt(tstate, frame, offset, stack);
}

// Replays a segment's number program on the real values; false (no error left set) when Python
// would raise there, in which case CPython reruns the segment's code and raises itself.
bool ComputeNumbers(const CacheEntry& entry, const guards::FrameInputs& inputs,
                    std::vector<PyRef>& values, std::vector<Scalar>& scalars) {
  values.clear();
  scalars.clear();
  for (const trace::ScalarInstr& in : entry.scalars) {
    PyObject* r = nullptr;
    auto operand = [&](int slot, const PyRef& constant) {
      return slot >= 0 ? values[slot].get() : constant.get();
    };
    switch (in.kind) {
      case trace::ScalarInstr::Kind::kInput:
        r = Py_XNewRef(in.source->Resolve(inputs));
        break;
      case trace::ScalarInstr::Kind::kNegate:
        r = PyNumber_Negative(operand(in.a, in.const_a));
        break;
      case trace::ScalarInstr::Kind::kCompare: {
        static const std::pair<const char*, int> codes[] = {{"<", Py_LT}, {"<=", Py_LE}, {"==", Py_EQ},
                                                            {"!=", Py_NE}, {">", Py_GT}, {">=", Py_GE}};
        for (const auto& [name, code] : codes) {
          if (in.op == name) r = PyObject_RichCompare(operand(in.a, in.const_a), operand(in.b, in.const_b), code);
        }
        break;
      }
      case trace::ScalarInstr::Kind::kCall: {
        PyObject* args = PyTuple_New(static_cast<Py_ssize_t>(in.arg_slots.size()));
        if (args == nullptr) break;
        for (size_t i = 0; i < in.arg_slots.size(); ++i) {
          PyTuple_SET_ITEM(args, i, Py_NewRef(operand(in.arg_slots[i], in.arg_consts[i])));
        }
        r = PyObject_Call(in.function.get(), args, nullptr);
        Py_DECREF(args);
        break;
      }
      case trace::ScalarInstr::Kind::kBinary: {
        PyObject* x = operand(in.a, in.const_a);
        PyObject* y = operand(in.b, in.const_b);
        if (in.op == "+") r = PyNumber_Add(x, y);
        else if (in.op == "-") r = PyNumber_Subtract(x, y);
        else if (in.op == "*") r = PyNumber_Multiply(x, y);
        else if (in.op == "/") r = PyNumber_TrueDivide(x, y);
        else if (in.op == "//") r = PyNumber_FloorDivide(x, y);
        else if (in.op == "%") r = PyNumber_Remainder(x, y);
        else if (in.op == "**") r = PyNumber_Power(x, y, Py_None);
        break;
      }
    }
    if (r == nullptr) {
      PyErr_Clear();
      return false;
    }
    auto scalar = py::ToScalar(r, "a run-time number");
    values.push_back(PyRef::Steal(r));
    if (!scalar.ok()) {
      // Only numbers used by tensor ops must fit a Scalar; keep a placeholder for the rest.
      scalars.push_back(Scalar::Int(0));
      continue;
    }
    scalars.push_back(*scalar);
  }
  return true;
}

PyObject* RunSegments(PyThreadState* tstate, _PyInterpreterFrame* frame,
                      const cpython::FrameView& view, CodeCache* cache);

PyObject* EvalFrame(PyThreadState* tstate, _PyInterpreterFrame* frame, int throwflag) {
  if (throwflag || inside_dyntrace) return cpython::EvalDefault(tstate, frame, throwflag);
  // Under sys.settrace (debuggers, coverage) every line must run in CPython to be reported; in
  // stress mode sys.setprofile's call events must also be those of plain CPython.
  if (cpython::TraceFunctionSet(tstate, /*profile=*/stress_mode)) {
    return cpython::EvalDefault(tstate, frame, 0);
  }
  const cpython::FrameView view = cpython::View(frame);
  auto* cache = static_cast<CodeCache*>(cpython::GetCodeExtra(view.code));
  if (cache == nullptr) {
    const JitOptions* mode = ActiveMode();
    if (mode == nullptr) return cpython::EvalDefault(tstate, frame, 0);
    cache = GetOrCreateCache(view.code, *mode, false);
    if (Excluded(view.code) || IsGeneratorLike(view.code)) {
      cache->excluded = true;
      cache->skip = true;
    }
  }
  if (cache->skip) {
    ++stats.frames_skipped;
    return cpython::EvalDefault(tstate, frame, 0);
  }
  return RunSegments(tstate, frame, view, cache);
}

// Kept out of line so the per-frame fast path above stays a small function: every Python call
// passes through it, and a large stack frame there costs even frames dyntrace skips.
__attribute__((noinline)) PyObject* RunSegments(PyThreadState* tstate, _PyInterpreterFrame* frame,
                                                const cpython::FrameView& view, CodeCache* cache) {
  ++stats.frames_seen;
  // Keeps the cache's code alive while segments run user code (an escaped call may drop the
  // last other reference to the function).
  PyRef keep_code = PyRef::Borrow(reinterpret_cast<PyObject*>(view.code));
  const int nlocalsplus = view.code->co_nlocalsplus;
  SegmentState state;
  bool at_entry = true;
  int offset = 0;
  for (;;) {
    guards::FrameInputs inputs = InputsOf(view);
    if (!at_entry) {
      inputs.locals = state.locals.data();
      inputs.num_locals = nlocalsplus;
      inputs.stack = state.stack.data();
      inputs.stack_size = static_cast<int>(state.stack.size());
    }
    std::vector<std::shared_ptr<CacheEntry>>& list = cache->segments[offset];
    std::shared_ptr<CacheEntry> entry;
    for (const auto& candidate : list) {
      if (candidate->guards.Check(inputs)) {
        entry = candidate;
        break;
      }
    }
    if (entry != nullptr) {
      if (entry->fallback) {
        ++stats.fallbacks;
        return HandBack(tstate, frame, at_entry, state, offset);
      }
      ++stats.cache_hits;
    } else {
      ++stats.cache_misses;
      if (!list.empty()) {
        std::string reason;
        {
          InsideDyntrace guard;
          reason = list.back()->guards.Explain(inputs).value_or("no guard failed (retrace)");
        }
        const std::string where = offset == 0 ? CodeName(view.code)
                                              : absl::StrCat(CodeName(view.code), " at offset ", offset);
        const std::string text = absl::StrCat(where, ": ", reason);
        if (static_cast<int>(list.size()) >= cache->options.cache_limit) {
          if (offset == 0) cache->skip = true;
          // Stress mode stays silent: a warning would change what the programs under test see.
          if (!cache->warned && !stress_mode) {
            cache->warned = true;
            const std::string msg = absl::StrFormat(
                "dyntrace: %s reached cache_limit=%d; it runs without compilation from now on. "
                "Last recompile reason: %s",
                where, cache->options.cache_limit, reason);
            if (PyErr_WarnEx(PyExc_RuntimeWarning, msg.c_str(), 1) < 0) {
              return RaiseFrom(tstate, frame, at_entry, state, offset);
            }
          }
          ++stats.fallbacks;
          stats.fallback_reasons.Add(
              absl::StrFormat("%s: cache_limit=%d reached; CPython runs it from here (last "
                              "recompile reason: %s)",
                              where, cache->options.cache_limit, reason));
          return HandBack(tstate, frame, at_entry, state, offset);
        }
        ++stats.recompiles;
        if (cache->recompile_reasons.size() < kMaxRecordsPerCode) cache->recompile_reasons.push_back(reason);
        stats.recompile_reasons.Add(text);
        if (log::Enabled(log::Kind::kRecompiles)) log::Write(log::Kind::kRecompiles, text);
      }
      ++stats.frames_traced;
      std::variant<trace::TraceResult, trace::TraceFailure> traced;
      {
        InsideDyntrace guard;
        traced = trace::TraceFrame({view.code, view.function, inputs, offset, cache->options.fullgraph});
        // Tracing never raises into the traced program: a Python error left by the Python code
        // it runs (dis, after user code removed a builtin) is a failed trace, reported as such.
        if (PyErr_Occurred()) {
          PyErr_Clear();
          if (auto* result = std::get_if<trace::TraceResult>(&traced)) {
            trace::TraceFailure failure;
            failure.reason = "a Python error inside the tracer";
            failure.touched_tensors = result->touched_tensors;
            traced = std::move(failure);
          }
        }
      }
      if (auto* failure = std::get_if<trace::TraceFailure>(&traced)) {
        RecordBreak(*cache, InfoOf(*failure), true);
        if (cache->options.fullgraph) {
          PyErr_Format(PyExc_RuntimeError,
                       "dyntrace (fullgraph=True): cannot capture %s: %s at %s:%d (%s)",
                       CodeName(view.code).c_str(), failure->reason.c_str(), failure->file.c_str(),
                       failure->line, failure->instruction.c_str());
          return RaiseFrom(tstate, frame, at_entry, state, offset);
        }
        ++stats.fallbacks;
        if (at_entry && !failure->touched_tensors && !cache->explicit_jit && !stress_mode) {
          cache->skip = true;  // no tensor work here: not worth looking at again
        } else {
          auto fallback = std::make_shared<CacheEntry>();
          fallback->start_offset = offset;
          fallback->guards = std::move(failure->guards);
          fallback->fallback = true;
          fallback->fallback_reason = failure->reason;
          cache->segments[offset].push_back(std::move(fallback));  // looked up again, as below
        }
        return HandBack(tstate, frame, at_entry, state, offset);
      }
      auto& result = std::get<trace::TraceResult>(traced);
      if (result.break_info) RecordBreak(*cache, *result.break_info, false);
      if (at_entry && !result.touched_tensors && !cache->explicit_jit && !stress_mode) {
        cache->skip = true;
        return cpython::EvalDefault(tstate, frame, 0);
      }
      const std::string name = offset == 0 ? py::Utf8Or(view.code->co_name)
                                           : absl::StrCat(py::Utf8Or(view.code->co_name), "_at_", offset);
      const std::string graph_text = result.graph->ToString(name);
      if (log::Enabled(log::Kind::kGraph)) log::Write(log::Kind::kGraph, CodeName(view.code), graph_text);
      if (log::Enabled(log::Kind::kGuards)) {
        log::Write(log::Kind::kGuards, CodeName(view.code), absl::StrJoin(result.guards.Lines(), "\n"));
      }
      if (trace_log != nullptr && !result.graph->nodes().empty()) {
        trace_log->graphs.push_back(graph_text);
        trace_log->guards.push_back(absl::StrJoin(result.guards.Lines(), "\n"));
      }
      entry = Compile(std::move(result), cache->options, inputs, offset, name);
      if (entry == nullptr) return RaiseFrom(tstate, frame, at_entry, state, offset);
      // Tracing and compiling run Python code (dis, a Python backend), so another thread may
      // have traced the same guards meanwhile: use its entry rather than caching a duplicate.
      // The list is looked up again: a reset() meanwhile may have removed the one found above.
      std::vector<std::shared_ptr<CacheEntry>>& current = cache->segments[offset];
      std::shared_ptr<CacheEntry> raced;
      for (const auto& candidate : current) {
        if (!candidate->fallback && candidate->guards.Check(inputs)) {
          raced = candidate;
          break;
        }
      }
      if (raced != nullptr) {
        entry = raced;
      } else {
        if (!entry->graph->nodes().empty()) ++stats.graphs;
        current.push_back(entry);
      }
    }

    // Replay the segment's Python-number arithmetic, then run its graph.
    std::vector<PyRef> numbers;
    std::vector<Scalar> number_scalars;
    if (!ComputeNumbers(*entry, inputs, numbers, number_scalars)) {
      return HandBack(tstate, frame, at_entry, state, offset);
    }
    absl::StatusOr<std::vector<Tensor>> outputs;
    if (entry->graph->nodes().empty() && entry->graph->outputs().empty()) {
      outputs = std::vector<Tensor>();
    } else if (entry->compiled) {
      outputs = RunPythonBackend(*entry, ResolveInputs(*entry, inputs));
      if (!outputs.ok()) return RaiseFrom(tstate, frame, at_entry, state, offset);
    } else {
      std::vector<Tensor> tensors = ResolveInputs(*entry, inputs);
      Py_BEGIN_ALLOW_THREADS
      if (entry->cpu) {
        outputs = entry->cpu->Run(tensors, number_scalars);
      } else if (entry->cuda) {
        outputs = entry->cuda->Run(tensors, number_scalars);
      } else {
        outputs = entry->graph->RunEager(tensors, number_scalars);
      }
      Py_END_ALLOW_THREADS
    }
    if (!outputs.ok()) {
      // Nothing was written unless the graph mutates: CPython reruns the segment's code and
      // raises where the user's code raises, with the user's traceback.
      if (!entry->has_inplace) return HandBack(tstate, frame, at_entry, state, offset);
      py::RaiseStatus(outputs.status());
      return RaiseFrom(tstate, frame, at_entry, state, offset);
    }

    if (entry->exit == trace::SegmentExit::kReturn) {
      PyObject* result;
      {
        Builder builder(*outputs, inputs, entry->num_memo, numbers);
        result = builder.Build(entry->output);
        if (!builder.ok()) return RaiseFrom(tstate, frame, at_entry, state, offset);
      }
      state.Clear();
      if (entry->return_pushes_value) {
        PyObject* stack[1] = {result};
        return cpython::ResumeAt(tstate, frame, entry->return_offset, stack);
      }
      Py_XDECREF(result);
      return cpython::ResumeAt(tstate, frame, entry->return_offset, {});
    }

    // A break: rebuild the frame state, then escape or hand back.
    SegmentState next;
    {
      Builder builder(*outputs, inputs, entry->num_memo, numbers);
      for (const trace::OutputSpec& spec : entry->locals_state) next.locals.push_back(builder.Build(spec));
      for (const trace::OutputSpec& spec : entry->stack_state) next.stack.push_back(builder.Build(spec));
      if (!builder.ok()) return RaiseFrom(tstate, frame, at_entry, state, offset);
    }
    state = std::move(next);
    at_entry = false;
    switch (entry->exit) {
      case trace::SegmentExit::kHandBack:
        return HandBack(tstate, frame, false, state, entry->break_offset);
      case trace::SegmentExit::kEscapeJump: {
        ++stats.escapes;
        PyObject* condition = state.stack.back();
        int truth;
        {
          EscapeScope running(tstate, frame, entry->break_offset, state);
          truth = running.entered() ? PyObject_IsTrue(condition) : -1;
        }
        if (truth < 0) return RaiseFrom(tstate, frame, false, state, entry->break_offset);
        state.stack.pop_back();
        Py_DECREF(condition);
        offset = (truth == 1) == entry->jump_if_true ? entry->jump_target : entry->next_offset;
        break;
      }
      case trace::SegmentExit::kEscapeCall: {
        ++stats.escapes;
        const int argc = entry->call_argc;
        std::vector<PyObject*>& st = state.stack;
        if (static_cast<int>(st.size()) < argc + 2) {
          return HandBack(tstate, frame, false, state, entry->break_offset);
        }
        PyObject* method = st[st.size() - argc - 2];
        PyObject* callable = method != nullptr ? method : st[st.size() - argc - 1];
        // args (with self first for a method call) are contiguous on the stack.
        PyObject* const* args = &st[st.size() - argc - (method != nullptr ? 1 : 0)];
        const Py_ssize_t total = argc + (method != nullptr ? 1 : 0);
        PyObject* kwnames = entry->call_kwnames.get();
        const Py_ssize_t nkw = kwnames != nullptr ? PyTuple_GET_SIZE(kwnames) : 0;
        PyObject* result;
        {
          EscapeScope running(tstate, frame, entry->break_offset, state);
          result = running.entered() ? PyObject_Vectorcall(callable, args, total - nkw, kwnames) : nullptr;
        }
        for (int i = 0; i < argc + 2; ++i) {
          Py_XDECREF(st.back());
          st.pop_back();
        }
        if (result == nullptr) return RaiseFrom(tstate, frame, false, state, entry->break_offset);
        st.push_back(result);
        offset = entry->next_offset;
        break;
      }
      case trace::SegmentExit::kEscapeForIter: {
        ++stats.escapes;
        PyObject* iterator = state.stack.back();
        PyObject* item;
        {
          EscapeScope running(tstate, frame, entry->break_offset, state);
          item = running.entered() ? PyIter_Next(iterator) : nullptr;
        }
        if (item == nullptr) {
          if (PyErr_Occurred()) return RaiseFrom(tstate, frame, false, state, entry->break_offset);
          state.stack.pop_back();
          Py_DECREF(iterator);
          offset = entry->jump_target;  // the loop is done
        } else {
          state.stack.push_back(item);
          offset = entry->next_offset;  // the loop body
        }
        break;
      }
      case trace::SegmentExit::kReturn:
        break;
    }
  }
}

}  // namespace

Stats& GlobalStats() { return stats; }

CodeCache* FindCache(PyCodeObject* code) {
  cpython::InitCodeExtra(&FreeCodeCache);
  return static_cast<CodeCache*>(cpython::GetCodeExtra(code));
}

namespace {

// Whether entries compiled under `a` serve calls made under `b` (cache_limit only bounds them).
bool SameCompileOptions(const JitOptions& a, const JitOptions& b) {
  return a.backend == b.backend && a.backend_callable.get() == b.backend_callable.get() &&
         a.fullgraph == b.fullgraph && a.cuda_graphs == b.cuda_graphs;
}

}  // namespace

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
    // dt.jit again with other compile options: the entries compiled under the old ones would
    // otherwise keep serving the frame, so they go (as torch.compile recompiles for another
    // backend). Running entries stay alive through their shared_ptr.
    if (!cache->segments.empty() && !SameCompileOptions(cache->options, options)) {
      cache->segments.clear();
      cache->breaks.clear();
    }
    cache->options = options;
    cache->explicit_jit = true;
    cache->skip = false;
    cache->warned = false;
  } else if (!cache->explicit_jit && cache->segments.empty()) {
    cache->options = options;
  }
  return cache;
}

std::vector<const CodeCache*> AllCaches() {
  std::vector<const CodeCache*> caches(all_caches->begin(), all_caches->end());
  auto key = [](const CodeCache* c) {
    return std::pair(py::Utf8Or(c->code->co_filename), c->code->co_firstlineno);
  };
  std::sort(caches.begin(), caches.end(), [&](const CodeCache* a, const CodeCache* b) { return key(a) < key(b); });
  return caches;
}

void ResetAll() {
  for (CodeCache* cache : *all_caches) {
    cache->segments.clear();
    cache->recompile_reasons.clear();
    cache->breaks.clear();
    cache->warned = false;
    cache->skip = cache->excluded;
  }
  stats = Stats();
  stats.kernel_baseline = backend::KernelCache::Global().counters();
  stats.nvrtc_baseline = backend::NvrtcCheckCounters();
  const backend::CudaGraphCounters& graphs = backend::GlobalCudaGraphCounters();
  stats.cuda_graph_baseline[0] = graphs.captures;
  stats.cuda_graph_baseline[1] = graphs.replays;
  stats.cuda_graph_baseline[2] = graphs.patches;
  stats.cuda_graph_baseline[3] = graphs.refusals;
  stats.cuda_graph_baseline[4] = graphs.kernel_launches;
  stats.cuda_host_ops_baseline = CudaHostOps();
}

void PushTracingMode(const JitOptions& options) {
  InstallHook();
  tracing_modes->push_back(options);
}

namespace {
// With the hook installed CPython stops inlining Python-to-Python calls, which costs call-heavy
// code far more than the hook itself: take it out whenever nothing needs it.
void UninstallHookIfUnused() {
  if (!hook_installed || !tracing_modes->empty() || global_mode != nullptr) return;
  for (CodeCache* cache : *all_caches) {
    if (cache->explicit_jit) return;
  }
  cpython::SetEvalFrame(nullptr);
  hook_installed = false;
}
}  // namespace

void PopTracingMode() {
  if (!tracing_modes->empty()) tracing_modes->pop_back();
  UninstallHookIfUnused();
}

void SetGlobalMode(const JitOptions* options) {
  delete global_mode;
  global_mode = options != nullptr ? new JitOptions(*options) : nullptr;
  if (options != nullptr) InstallHook();
  else UninstallHookIfUnused();
}

void InstallHook() {
  if (hook_installed) return;
  cpython::InitCodeExtra(&FreeCodeCache);
  cpython::SetEvalFrame(&EvalFrame);
  hook_installed = true;
}

void SetTraceLog(TraceLog* log) { trace_log = log; }

void SetStressMode(bool on) {
  stress_mode = on;
  if (!on) return;
  // Code seen before stress mode began may have been excluded as standard library.
  for (CodeCache* cache : *all_caches) {
    if (cache->excluded && !IsGeneratorLike(cache->code) && !IsDyntraceInternal(cache->code)) {
      cache->excluded = false;
      cache->skip = false;
    }
  }
}

bool StressMode() { return stress_mode; }


}  // namespace dt::jit
