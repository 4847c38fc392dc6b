// interpreter/eval_hook.cc: the PEP 523 hook. Per frame, one co_extra lookup decides whether
// dyntrace looks further; then a frame runs as segments: guards pick a cache entry (lookup), a
// miss traces and compiles one (recompile policy, trace-and-compile), the entry's graph runs,
// and the segment exits: it returns through the frame's own RETURN instruction, hands the frame
// back to CPython, or escapes (one instruction on real values) into the next segment.
#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "interpreter/code_cache.h"
#include "interpreter/compiled_segment.h"
#include "interpreter/cpython_frame.h"
#include "interpreter/frame_builder.h"
#include "interpreter/py_str.h"
#include "interpreter/py_types.h"
#include "interpreter/side_effects.h"
#include "runtime/log.h"

namespace dt::interpreter {
namespace {

using py::PyRef;

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

void RecordBreak(CodeCache& cache, const trace::BreakInfo& info, bool fallback) {
  BreakRecord b{info.reason, info.file, info.line,
                info.instruction.empty() ? "(frame entry)" : info.instruction, std::max(info.offset, 0)};
  // Per code object, the first breaks are kept for explain() and the report; a frame traced over
  // and over (a new closure each call) must not grow them without bound.
  if (cache.breaks.size() < kMaxRecordsPerCode) cache.breaks.push_back(b);
  if (TraceLog* log = ActiveTraceLog(); log != nullptr) log->breaks.push_back(b);
  const std::string text = absl::StrFormat("%s at %s:%d (%s, offset %d)", b.reason, b.file, b.line,
                                           b.instruction, b.offset);
  ++GlobalStats().graph_breaks;
  ++GlobalStats().break_kinds[static_cast<int>(info.kind)];
  GlobalStats().break_reasons.Add(text);
  if (fallback) GlobalStats().fallback_reasons.Add(text);
  if (log::Enabled(log::Kind::kBreaks)) log::Write(log::Kind::kBreaks, absl::StrCat(CodeName(cache.code), ": ", text));
}

trace::BreakInfo InfoOf(const trace::TraceFailure& f) {
  return trace::BreakInfo{f.reason, f.file, f.line, f.offset, f.instruction, f.kind};
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

// While dyntrace runs a frame (traces it, runs its segments and their escapes), the frame counts
// one level of recursion, as it would under CPython's evaluator (cpython::EnterFrameDepth): a
// recursive function whose frames run as segments (`def f(): return f()`) must end in
// RecursionError at sys.getrecursionlimit(), and a frame entered past the limit raises before
// any of its code runs. The level is given back before CPython's evaluator takes the frame over
// (a hand-back, a return, a raise), since the evaluator counts the frame itself.
class FrameDepth {
 public:
  explicit FrameDepth(PyThreadState* tstate) : tstate_(tstate), entered_(cpython::EnterFrameDepth(tstate)) {}
  ~FrameDepth() { Release(); }
  FrameDepth(const FrameDepth&) = delete;
  FrameDepth& operator=(const FrameDepth&) = delete;
  // False: the limit is reached and RecursionError is set.
  bool entered() const { return entered_; }
  void Release() {
    if (entered_) cpython::LeaveFrameDepth(tstate_);
    entered_ = false;
  }

 private:
  PyThreadState* tstate_;
  bool entered_;
};

// While an escape runs user code, the frame it escaped from is the thread's running frame,
// positioned at the escaping instruction with the segment's locals (see EnterForEscape).
class EscapeScope {
 public:
  EscapeScope(PyThreadState* tstate, _PyInterpreterFrame* frame, int offset, const SegmentState& state)
      : tstate_(tstate), previous_(cpython::EnterForEscape(tstate, frame, offset, state.locals)) {}
  ~EscapeScope() { cpython::LeaveAfterEscape(tstate_, previous_); }
  EscapeScope(const EscapeScope&) = delete;
  EscapeScope& operator=(const EscapeScope&) = delete;

 private:
  PyThreadState* tstate_;
  _PyInterpreterFrame* previous_;
};

// Continues the frame under CPython at `offset` with `state` (or from the start, at entry).
PyObject* HandBack(PyThreadState* tstate, _PyInterpreterFrame* frame, bool at_entry,
                   SegmentState& state, int offset, FrameDepth& depth) {
  depth.Release();
  if (at_entry) {
    ++GlobalStats().frames_whole_in_cpython;
    return cpython::EvalDefault(tstate, frame, 0);
  }
  ++GlobalStats().handbacks;
  std::vector<PyObject*> locals = state.TakeLocals();
  std::vector<PyObject*> stack = state.TakeStack();
  cpython::WriteLocals(frame, locals);
  return cpython::ResumeAt(tstate, frame, offset, stack);
}

// Raises the pending error from the frame as if the instruction at `offset` raised it.
PyObject* RaiseFrom(PyThreadState* tstate, _PyInterpreterFrame* frame, bool at_entry,
                    SegmentState& state, int offset, FrameDepth& depth) {
  depth.Release();
  if (at_entry && state.locals.empty()) return cpython::RaiseInFrame(tstate, frame);
  std::vector<PyObject*> locals = state.TakeLocals();
  std::vector<PyObject*> stack = state.TakeStack();
  if (!locals.empty()) cpython::WriteLocals(frame, locals);
  return cpython::RaiseAt(tstate, frame, offset, stack);
}

// One frame run as segments. Each step either finishes the frame (a result for CPython's caller)
// or leaves the state the next segment starts from.
class SegmentRun {
 public:
  SegmentRun(PyThreadState* tstate, _PyInterpreterFrame* frame, const cpython::FrameView& view, CodeCache* cache)
      : tstate_(tstate), frame_(frame), view_(view), cache_(cache), depth_(tstate) {}

  // REQUIRES: depth_entered().
  PyObject* Run();
  bool depth_entered() const { return depth_.entered(); }

 private:
  using Finished = std::optional<PyObject*>;  // set: the frame's result (null: an exception)

  guards::FrameInputs Inputs();
  std::shared_ptr<CacheEntry> Lookup(const guards::FrameInputs& inputs);
  Finished ApplyRecompilePolicy(const guards::FrameInputs& inputs);
  Finished GiveUp(const std::string& reason);
  void NoteDynamicValues(const CacheEntry& last, const guards::FrameInputs& inputs);
  void LogDynamic(const std::string& what) const;
  std::variant<std::shared_ptr<CacheEntry>, PyObject*> TraceAndCompile(const guards::FrameInputs& inputs);
  std::variant<trace::TraceResult, trace::TraceFailure> Trace(const guards::FrameInputs& inputs);
  PyObject* FallBack(trace::TraceFailure& failure);
  void LogTrace(const trace::TraceResult& result, const std::string& name);
  std::shared_ptr<CacheEntry> Publish(std::shared_ptr<CacheEntry> entry, const guards::FrameInputs& inputs);
  Finished RunEntry(const CacheEntry& entry, const guards::FrameInputs& inputs);
  PyObject* Return(const trace::ReturnExit& exit, PyObject* result);
  Finished Exit(const trace::SegmentExit& exit);
  Finished EscapeJump(const trace::EscapeJumpExit& exit);
  Finished EscapeCall(const trace::EscapeCallExit& exit);
  Finished EscapeForIter(const trace::EscapeForIterExit& exit);

  std::string Where() const {
    return offset_ == 0 ? CodeName(view_.code) : absl::StrCat(CodeName(view_.code), " at offset ", offset_);
  }
  PyObject* HandBackHere() { return HandBack(tstate_, frame_, at_entry_, state_, offset_, depth_); }
  PyObject* RaiseHere() { return RaiseFrom(tstate_, frame_, at_entry_, state_, offset_, depth_); }
  PyObject* HandBackAt(int offset) { return HandBack(tstate_, frame_, false, state_, offset, depth_); }
  PyObject* RaiseAt(int offset) { return RaiseFrom(tstate_, frame_, false, state_, offset, depth_); }

  PyThreadState* tstate_;
  _PyInterpreterFrame* frame_;
  const cpython::FrameView& view_;
  CodeCache* cache_;
  SegmentState state_;
  bool at_entry_ = true;
  int offset_ = 0;
  FrameDepth depth_;
};

guards::FrameInputs SegmentRun::Inputs() {
  guards::FrameInputs inputs = InputsOf(view_);
  if (!at_entry_) {
    inputs.locals = state_.locals.data();
    inputs.num_locals = view_.code->co_nlocalsplus;
    inputs.stack = state_.stack.data();
    inputs.stack_size = static_cast<int>(state_.stack.size());
  }
  return inputs;
}

std::shared_ptr<CacheEntry> SegmentRun::Lookup(const guards::FrameInputs& inputs) {
  for (const auto& candidate : cache_->segments[offset_]) {
    if (candidate->guards.Check(inputs)) return candidate;
  }
  return nullptr;
}

// A miss where entries exist is a recompile, up to cache_limit. Past it, CPython runs the frame
// from here (GiveUp), except in stress mode, which must keep running frames through the tracer:
// there the oldest entry of the list goes, so each list stays within cache_limit (memory stays
// bounded), and the frame is traced anew.
SegmentRun::Finished SegmentRun::ApplyRecompilePolicy(const guards::FrameInputs& inputs) {
  std::vector<std::shared_ptr<CacheEntry>>& list = cache_->segments[offset_];
  if (list.empty()) return std::nullopt;
  std::string reason;
  {
    InsideDyntrace guard;
    reason = list.back()->guards.Explain(inputs).value_or("no guard failed (retrace)");
  }
  Stats& stats = GlobalStats();
  const bool full = static_cast<int>(list.size()) >= cache_->options.cache_limit;
  if (full && !StressMode()) return GiveUp(reason);
  NoteDynamicValues(*list.back(), inputs);
  if (full) {
    list.erase(list.begin());  // a running entry stays alive through its shared_ptr
    ++stats.entries_evicted;
  }
  ++stats.recompiles;
  if (cache_->recompile_reasons.size() < kMaxRecordsPerCode) cache_->recompile_reasons.push_back(reason);
  const std::string text = absl::StrCat(Where(), ": ", reason);
  stats.recompile_reasons.Add(text);
  if (log::Enabled(log::Kind::kRecompiles)) log::Write(log::Kind::kRecompiles, text);
  return std::nullopt;
}

// Past cache_limit (outside stress mode, whose programs must not see a warning): CPython runs
// the frame from here, and from its entry on when offset 0 is full, with one warning per code.
SegmentRun::Finished SegmentRun::GiveUp(const std::string& reason) {
  if (offset_ == 0) cache_->skip = SkipReason::kCacheLimit;
  if (!cache_->warned) {
    cache_->warned = true;
    const std::string msg = absl::StrFormat(
        "dyntrace: %s reached cache_limit=%d; it runs without compilation from now on. Last recompile reason: %s",
        Where(), cache_->options.cache_limit, reason);
    if (PyErr_WarnEx(PyExc_RuntimeWarning, msg.c_str(), 1) < 0) return RaiseHere();
  }
  ++GlobalStats().fallbacks;
  GlobalStats().fallback_reasons.Add(absl::StrFormat(
      "%s: cache_limit=%d reached; CPython runs it from here (last recompile reason: %s)", Where(),
      cache_->options.cache_limit, reason));
  return HandBackHere();
}

// Automatic dynamic: each failing guard that compares an int or float with its value at trace
// time (the value now another number of the same type), or a tensor size read by Python (both
// sizes at least 2: 0 and 1 stay specialised), or the length of a list or tuple (a history that
// grows; empty stays specialised), names a value that is traced as a run-time value from now
// on, so the next new value does not recompile. dynamic=False turns this off.
void SegmentRun::NoteDynamicValues(const CacheEntry& last, const guards::FrameInputs& inputs) {
  if (cache_->options.dynamic == false) return;
  for (const guards::LeafGuard* failed : last.guards.Failing(inputs)) {
    PyObject* now = failed->source().Resolve(inputs);
    if (now == nullptr) continue;
    if (failed->kind() == guards::LeafGuard::Kind::kEquals &&
        (PyLong_CheckExact(now) || PyFloat_CheckExact(now))) {
      if (cache_->dynamic_numbers.insert(failed->source().ToString()).second) {
        LogDynamic(absl::StrCat(failed->source().ToString(), " changed between calls: a run-time number from now on"));
      }
    } else if (failed->kind() == guards::LeafGuard::Kind::kLength && !failed->at_least() &&
               (PyList_CheckExact(now) || PyTuple_CheckExact(now)) && PyObject_Length(now) >= 1) {
      const std::string key = trace::DynamicLengthKey(failed->source());
      if (cache_->dynamic_numbers.insert(key).second) {
        LogDynamic(absl::StrCat(key, " changed between calls: a run-time length from now on"));
      }
    } else if (failed->kind() == guards::LeafGuard::Kind::kTensorSize) {
      const Tensor* t = py::IsTensor(now) ? &py::Unwrap(now) : nullptr;
      if (t == nullptr || failed->dim() >= t->ndim() || t->size(failed->dim()) < 2) continue;
      const uint64_t marked_static = reinterpret_cast<const py::PyTensor*>(now)->marked_static;
      if (failed->dim() < 64 && (marked_static & (uint64_t{1} << failed->dim()))) continue;
      const std::string key = trace::DynamicSizeKey(failed->source(), failed->dim());
      if (cache_->dynamic_numbers.insert(key).second) {
        LogDynamic(absl::StrCat(key, " changed between calls: a symbolic size from now on"));
      }
    }
  }
}

void SegmentRun::LogDynamic(const std::string& what) const {
  if (log::Enabled(log::Kind::kDynamic)) log::Write(log::Kind::kDynamic, absl::StrCat(Where(), ": ", what));
}

std::variant<trace::TraceResult, trace::TraceFailure> SegmentRun::Trace(const guards::FrameInputs& inputs) {
  ++GlobalStats().frames_traced;
  InsideDyntrace guard;
  auto traced = trace::TraceFrame(
      {view_.code, view_.function, inputs, offset_, cache_->options.fullgraph, &cache_->dynamic_numbers,
       cache_->options.dynamic == true, !cache_->options.dynamic.has_value()});
  // Tracing never raises into the traced program: a Python error left by the Python code it runs
  // (dis, after user code removed a builtin) is a failed trace, reported as such.
  if (PyErr_Occurred()) {
    PyErr_Clear();
    if (auto* result = std::get_if<trace::TraceResult>(&traced)) {
      trace::TraceFailure failure;
      failure.reason = "a Python error inside the tracer";
      failure.touched_tensors = result->touched_tensors;
      traced = std::move(failure);
    }
  }
  return traced;
}

// The trace could not start here: fullgraph raises; otherwise CPython runs the frame from here,
// and later frames passing the same guards go straight to CPython (a fallback entry), unless
// the frame has no tensor work at all (then it is skipped from now on). Code that raises (a
// pop from an empty list, zip(strict=True) of unequal lengths) is not a capture failure, even
// with fullgraph: CPython runs the frame, and the frames it calls, and raises its own error,
// message and traceback.
PyObject* SegmentRun::FallBack(trace::TraceFailure& failure) {
  if (!failure.constraint_error.empty()) {
    PyErr_SetString(PyExc_RuntimeError, failure.constraint_error.c_str());
    return RaiseHere();
  }
  RecordBreak(*cache_, InfoOf(failure), true);
  if (cache_->options.fullgraph && failure.kind == BreakKind::kRaises) {
    InsideDyntrace plain_cpython;
    return HandBackHere();
  }
  if (cache_->options.fullgraph) {
    PyErr_Format(PyExc_RuntimeError, "dyntrace (fullgraph=True): cannot capture %s: %s at %s:%d (%s)",
                 CodeName(view_.code).c_str(), failure.reason.c_str(), failure.file.c_str(), failure.line,
                 failure.instruction.c_str());
    return RaiseHere();
  }
  ++GlobalStats().fallbacks;
  if (at_entry_ && !failure.touched_tensors && !cache_->explicit_jit && !StressMode()) {
    cache_->skip = SkipReason::kNoTensorWork;
  } else {
    auto fallback = std::make_shared<CacheEntry>();
    fallback->start_offset = offset_;
    fallback->guards = std::move(failure.guards);
    fallback->fallback_reason = failure.reason;
    cache_->segments[offset_].push_back(std::move(fallback));
  }
  return HandBackHere();
}

void SegmentRun::LogTrace(const trace::TraceResult& result, const std::string& name) {
  const std::string graph_text = result.graph->ToString(name);
  if (log::Enabled(log::Kind::kGraph)) log::Write(log::Kind::kGraph, CodeName(view_.code), graph_text);
  if (log::Enabled(log::Kind::kGuards)) {
    log::Write(log::Kind::kGuards, CodeName(view_.code), absl::StrJoin(result.guards.Lines(), "\n"));
  }
  if (TraceLog* log = ActiveTraceLog(); log != nullptr && !result.graph->nodes().empty()) {
    log->graphs.push_back(graph_text);
    log->guards.push_back(absl::StrJoin(result.guards.Lines(), "\n"));
  }
}

// Tracing and compiling run Python code (dis, a Python backend), so another thread may have
// traced the same guards meanwhile: its entry is used rather than caching a duplicate. The list
// is looked up again: a reset() meanwhile may have removed the one seen before tracing.
std::shared_ptr<CacheEntry> SegmentRun::Publish(std::shared_ptr<CacheEntry> entry, const guards::FrameInputs& inputs) {
  std::vector<std::shared_ptr<CacheEntry>>& current = cache_->segments[offset_];
  for (const auto& candidate : current) {
    if (!candidate->fallback() && candidate->guards.Check(inputs)) return candidate;
  }
  if (!entry->graph()->nodes().empty()) ++GlobalStats().graphs;
  current.push_back(entry);
  return entry;
}

// A new entry, or the frame's result when the trace or a Python backend ended the frame.
std::variant<std::shared_ptr<CacheEntry>, PyObject*> SegmentRun::TraceAndCompile(const guards::FrameInputs& inputs) {
  auto traced = Trace(inputs);
  if (auto* failure = std::get_if<trace::TraceFailure>(&traced)) return FallBack(*failure);
  auto& result = std::get<trace::TraceResult>(traced);
  if (result.break_info) RecordBreak(*cache_, *result.break_info, false);
  if (at_entry_ && !result.touched_tensors && !cache_->explicit_jit && !StressMode()) {
    cache_->skip = SkipReason::kNoTensorWork;  // not worth looking at again
    return HandBackHere();
  }
  const std::string name = offset_ == 0 ? py::Utf8Or(view_.code->co_name)
                                        : absl::StrCat(py::Utf8Or(view_.code->co_name), "_at_", offset_);
  LogTrace(result, name);
  std::shared_ptr<CacheEntry> entry = CompileSegment(std::move(result), cache_->options, inputs, offset_, name);
  if (entry == nullptr) return RaiseHere();
  return Publish(std::move(entry), inputs);
}

// `result`: the return value (a new reference), built after the builder's other references
// are released, so nothing of the segment is kept alive while CPython finishes the frame.
PyObject* SegmentRun::Return(const trace::ReturnExit& exit, PyObject* result) {
  state_.Clear();
  depth_.Release();
  if (exit.pushes_value) {
    PyObject* stack[1] = {result};
    return cpython::ResumeAt(tstate_, frame_, exit.return_offset, stack);
  }
  Py_XDECREF(result);
  return cpython::ResumeAt(tstate_, frame_, exit.return_offset, {});
}

// Replays the segment's Python-number arithmetic, runs its graph, replays its attribute stores,
// and exits.
SegmentRun::Finished SegmentRun::RunEntry(const CacheEntry& entry, const guards::FrameInputs& inputs) {
  std::vector<PyRef> numbers;
  std::vector<Scalar> number_scalars;
  if (!ComputeNumbers(entry, inputs, numbers, number_scalars)) return HandBackHere();
  absl::StatusOr<std::vector<Tensor>> outputs = RunCompiledGraph(entry, inputs, number_scalars);
  if (!outputs.ok()) {
    if (PyErr_Occurred()) return RaiseHere();  // a Python backend raised
    // Nothing was written unless the graph mutates: CPython reruns the segment's code and
    // raises where the user's code raises, with the user's traceback.
    if (!entry.has_inplace) return HandBackHere();
    py::RaiseStatus(outputs.status());
    return RaiseHere();
  }
  const auto* ret = std::get_if<trace::ReturnExit>(&entry.trace.exit);
  PyObject* result = nullptr;
  SegmentState next;
  {
    // Built in the order the trace described them (memo slots refer back to earlier ones); the
    // stores come last, before anything runs that could see them.
    Builder builder(*outputs, inputs, entry.trace.num_memo, numbers);
    if (ret != nullptr) {
      result = builder.Build(ret->output);
    } else {  // a break: rebuild the frame state, then escape or hand back
      for (const trace::OutputSpec& spec : entry.trace.locals_state) next.locals.push_back(builder.Build(spec));
      for (const trace::OutputSpec& spec : entry.trace.stack_state) next.stack.push_back(builder.Build(spec));
    }
    if (!builder.ok() || !ApplySideEffects(entry.trace, builder, inputs)) {
      Py_XDECREF(result);
      return RaiseHere();
    }
  }
  if (ret != nullptr) return Return(*ret, result);
  state_ = std::move(next);
  at_entry_ = false;
  return Exit(entry.trace.exit);
}

SegmentRun::Finished SegmentRun::Exit(const trace::SegmentExit& exit) {
  struct Visitor {
    SegmentRun& run;
    Finished operator()(const trace::ReturnExit&) { return std::nullopt; }  // handled by RunEntry
    Finished operator()(const trace::HandBackExit& e) {
      return run.HandBackAt(e.resume_offset);
    }
    Finished operator()(const trace::EscapeJumpExit& e) { return run.EscapeJump(e); }
    Finished operator()(const trace::EscapeCallExit& e) { return run.EscapeCall(e); }
    Finished operator()(const trace::EscapeForIterExit& e) { return run.EscapeForIter(e); }
  };
  return std::visit(Visitor{*this}, exit);
}

SegmentRun::Finished SegmentRun::EscapeJump(const trace::EscapeJumpExit& exit) {
  ++GlobalStats().escapes;
  PyObject* condition = state_.stack.back();
  int truth;
  {
    EscapeScope running(tstate_, frame_, exit.break_offset, state_);
    truth = PyObject_IsTrue(condition);
  }
  if (truth < 0) return RaiseAt(exit.break_offset);
  state_.stack.pop_back();
  Py_DECREF(condition);
  offset_ = (truth == 1) == exit.jump_if_true ? exit.jump_target : exit.next_offset;
  return std::nullopt;
}

SegmentRun::Finished SegmentRun::EscapeCall(const trace::EscapeCallExit& exit) {
  ++GlobalStats().escapes;
  const int argc = exit.argc;
  std::vector<PyObject*>& st = state_.stack;
  if (static_cast<int>(st.size()) < argc + 2) return HandBackAt(exit.break_offset);
  PyObject* method = st[st.size() - argc - 2];
  PyObject* callable = method != nullptr ? method : st[st.size() - argc - 1];
  // args (with self first for a method call) are contiguous on the stack.
  PyObject* const* args = &st[st.size() - argc - (method != nullptr ? 1 : 0)];
  const Py_ssize_t total = argc + (method != nullptr ? 1 : 0);
  PyObject* kwnames = exit.kwnames.get();
  const Py_ssize_t nkw = kwnames != nullptr ? PyTuple_GET_SIZE(kwnames) : 0;
  PyObject* result;
  {
    EscapeScope running(tstate_, frame_, exit.break_offset, state_);
    result = PyObject_Vectorcall(callable, args, total - nkw, kwnames);
  }
  for (int i = 0; i < argc + 2; ++i) {
    Py_XDECREF(st.back());
    st.pop_back();
  }
  if (result == nullptr) return RaiseAt(exit.break_offset);
  st.push_back(result);
  offset_ = exit.next_offset;
  return std::nullopt;
}

SegmentRun::Finished SegmentRun::EscapeForIter(const trace::EscapeForIterExit& exit) {
  ++GlobalStats().escapes;
  PyObject* iterator = state_.stack.back();
  PyObject* item;
  {
    EscapeScope running(tstate_, frame_, exit.break_offset, state_);
    item = PyIter_Next(iterator);
  }
  if (item == nullptr) {
    if (PyErr_Occurred()) return RaiseAt(exit.break_offset);
    state_.stack.pop_back();
    Py_DECREF(iterator);
    offset_ = exit.loop_exit_offset;  // the loop is done
  } else {
    state_.stack.push_back(item);
    offset_ = exit.next_offset;  // the loop body
  }
  return std::nullopt;
}

PyObject* SegmentRun::Run() {
  Stats& stats = GlobalStats();
  ++stats.frames_seen;
  // Keeps the cache's code alive while segments run user code (an escaped call may drop the
  // last other reference to the function).
  PyRef keep_code = PyRef::Borrow(reinterpret_cast<PyObject*>(view_.code));
  for (;;) {
    // An escape may have installed sys.settrace (a test's tracer around a call): from then on
    // CPython runs the frame, so the calls and lines it reports are all there.
    if (!at_entry_ && cpython::TraceFunctionSet(tstate_, /*profile=*/StressMode())) return HandBackHere();
    // An escape may have let Python take the frame's frame object. Its locals are the frame's
    // fast locals, which segments leave as the escape saw them: a frame ending in a segment
    // would leave them there, keeping alive what the code dropped (unittest's assertRaises sets
    // `context = None` in a finally to break the cycle context -> exception -> traceback ->
    // frame -> context, CPython's bpo-23890) and showing stale values. CPython runs the rest.
    if (!at_entry_ && cpython::FrameObjectShared(frame_)) return HandBackHere();
    const guards::FrameInputs inputs = Inputs();
    std::shared_ptr<CacheEntry> entry = Lookup(inputs);
    if (entry != nullptr && entry->fallback()) {
      ++stats.fallbacks;
      return HandBackHere();
    }
    if (entry != nullptr) {
      ++stats.cache_hits;
    } else {
      ++stats.cache_misses;
      if (Finished stop = ApplyRecompilePolicy(inputs)) return *stop;
      auto made = TraceAndCompile(inputs);
      if (PyObject** finished = std::get_if<PyObject*>(&made)) return *finished;
      entry = std::get<std::shared_ptr<CacheEntry>>(std::move(made));
    }
    if (Finished done = RunEntry(*entry, inputs)) return *done;
  }
}

// Kept out of line so that EvalFrame stays small. The shared_ptr keeps the cache alive while the
// frame's segments run user code (which may reset() its key).
__attribute__((noinline)) PyObject* RunSegmentsOutOfLine(PyThreadState* tstate, _PyInterpreterFrame* frame,
                                                         const cpython::FrameView& view,
                                                         std::shared_ptr<CodeCache> cache) {
  SegmentRun run(tstate, frame, view, cache.get());
  // Past the recursion limit CPython raises before the frame's first instruction.
  if (!run.depth_entered()) return cpython::RaiseInFrame(tstate, frame);
  return run.Run();
}

}  // namespace

void RecordGeneratorRoot(const ActiveMode& mode) {
  const std::shared_ptr<CodeCache>& cache = GetOrCreateCaches(mode.root)->For(mode);
  trace::BreakInfo info;
  info.reason = "generator and coroutine functions run under CPython (the frame runs when the generator is "
                "iterated, after the compiled call returned)";
  info.file = py::Utf8Or(mode.root->co_filename);
  info.line = mode.root->co_firstlineno;
  RecordBreak(*cache, info, /*fallback=*/true);
  ++GlobalStats().fallbacks;
}

namespace {

// Everything past the fast path (kept out of line so EvalFrame compiles to a few loads and a
// tail call).
__attribute__((noinline)) PyObject* EvalFrameSlow(PyThreadState* tstate, _PyInterpreterFrame* frame,
                                                  const ActiveMode* mode, CodeCaches* caches) {
  const cpython::FrameView view = cpython::View(frame);
  if (caches == nullptr) caches = GetOrCreateCaches(view.code);
  // Generator frames are resumed through here too (each resumption counts): they always run
  // under CPython. Excluded code (the standard library ...) runs under CPython unless it is what
  // the compiled callable wraps.
  if (caches->generator || (caches->excluded && view.code != mode->root)) {
    CountSkip(caches->generator ? SkipReason::kGenerator : SkipReason::kExcluded);
    return cpython::EvalDefault(tstate, frame, 0);
  }
  // Under sys.settrace (debuggers, coverage) every line must run in CPython to be reported; in
  // stress mode sys.setprofile's call events must also be those of plain CPython.
  if (cpython::TraceFunctionSet(tstate, /*profile=*/StressMode())) {
    CountSkip(SkipReason::kTraceHook);
    return cpython::EvalDefault(tstate, frame, 0);
  }
  const std::shared_ptr<CodeCache>& cache = caches->For(*mode);
  if (cache->skip != SkipReason::kNone) {
    caches->skip_key = mode->key;
    caches->skip_reason = cache->skip;
    CountSkip(cache->skip);
    return cpython::EvalDefault(tstate, frame, 0);
  }
  return RunSegmentsOutOfLine(tstate, frame, view, cache);
}

}  // namespace

PyObject* EvalFrame(PyThreadState* tstate, _PyInterpreterFrame* frame, int throwflag) {
  const HookThreadState& thread = hook_thread;
  if (throwflag || thread.inside_dyntrace) return cpython::EvalDefault(tstate, frame, throwflag);
  const ActiveMode* mode = thread.modes.empty() ? GlobalMode() : &thread.modes.back();
  // No mode on this thread (the hook is installed while another thread runs compiled code).
  if (mode == nullptr) return cpython::EvalDefault(tstate, frame, 0);
  PyCodeObject* code = cpython::View(frame).code;
  CodeCaches* caches = FindCachesFast(code);
  if (caches == nullptr) caches = FindCaches(code);
  // Code seen before without tensor work: most frames under tracing() end here.
  if (caches != nullptr && caches->skip_key == mode->key) {
    CountSkip(caches->skip_reason);
    return cpython::EvalDefault(tstate, frame, 0);
  }
  return EvalFrameSlow(tstate, frame, mode, caches);
}

}  // namespace dt::interpreter
