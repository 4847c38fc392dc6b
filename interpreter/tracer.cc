// interpreter/tracer.cc: a trace from the frame's start state to its result, and what a graph
// break leaves: the graph up to the breaking instruction, the frame state to rebuild, and how
// the segment exits (read from the instruction table's flow of the breaking instruction).
#include "interpreter/tracer.h"

#include <Python.h>

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "interpreter/cpython_frame.h"
#include "interpreter/number_program.h"
#include "interpreter/py_str.h"
#include "interpreter/stack_names.h"
#include "interpreter/tracer_internal.h"
#include "runtime/errors.h"

namespace dt::interpreter::trace {

void Tracer::RollBackToSnapshot() {
  graph_->Truncate(snapshot_.num_nodes);
  // What the failed instruction established is not relied on (it runs for real, or in CPython).
  guards_.RollBack(snapshot_.num_guards);
  grad_mode_ = snapshot_.grad_mode;
  grad_mode_changed_ = snapshot_.grad_mode_changed;
  autocast_ = snapshot_.autocast;  // its guard went with the guards rolled back
  autocast_changed_ = snapshot_.autocast_changed;
  if (backward_at_node_.has_value() && snapshot_.num_nodes <= *backward_at_node_) backward_at_node_.reset();
  raising_ = nullptr;
  handled_exceptions_.resize(snapshot_.handled_exceptions);
  while (journal_.size() > snapshot_.journal_size) {
    Undo& undo = journal_.back();
    undo.sym->items = std::move(undo.items);
    undo.sym->keys = std::move(undo.keys);
    undo.sym->position = undo.position;
    undo.sym->consumed = undo.consumed;
    undo.sym->kind = undo.kind;
    undo.sym->value = undo.value;
    undo.sym->meta = std::move(undo.meta);
    journal_.pop_back();
  }
  ForgetRolledBackChanges();
}

namespace {

bool KnownOnlyAtRunTime(const Sym& s, SymKind kind) { return s != nullptr && s->kind == kind; }

// Where an exhausted loop continues after FOR_ITER: 3.12 jumps past the END_FOR its argument names.
int LoopExitOffset(const DecodedCode& decoded, const Instr& in) {
  const int target = static_cast<int>(PyLong_AsLong(in.argval.get()));
  if (!interpreter::kPython312) return target;
  auto t = decoded.index_of_offset.find(target);
  if (t == decoded.index_of_offset.end() || t->second + 1 >= static_cast<int>(decoded.instrs.size())) {
    return target;
  }
  return decoded.instrs[t->second + 1].offset;
}

}  // namespace

// What the segment does at the instruction that broke it: the row of the instruction says which
// escape it allows; the values on the stack say whether this break can take it.
SegmentExit Tracer::ExitAt(const TFrame& root, const Instr& in) const {
  const auto& instrs = root.decoded->instrs;
  const int next_offset = snapshot_.pc + 1 < static_cast<int>(instrs.size()) ? instrs[snapshot_.pc + 1].offset : -1;
  const Sym top = snapshot_.stack.empty() ? nullptr : snapshot_.stack.back();
  if (next_offset >= 0) {
    switch (interpreter::RowOf(in.op).exit) {
      case interpreter::BreakExit::kEscapeJump:
        if (KnownOnlyAtRunTime(top, SymKind::kTensor) || KnownOnlyAtRunTime(top, SymKind::kNumber)) {
          return EscapeJumpExit{in.offset, static_cast<int>(PyLong_AsLong(in.argval.get())), next_offset,
                                in.op == Op::kPopJumpIfTrue};
        }
        break;
      case interpreter::BreakExit::kEscapeForIter:
        if (KnownOnlyAtRunTime(top, SymKind::kRunIter)) {
          return EscapeForIterExit{in.offset, next_offset, LoopExitOffset(*root.decoded, in)};
        }
        break;
      case interpreter::BreakExit::kEscapeCall:
        return EscapeCallExit{in.offset, next_offset, in.arg, snapshot_.kw_names};
      case interpreter::BreakExit::kHandBack:
        break;
    }
  }
  // KW_NAMES keeps its names in the evaluator, not on the stack: a hand-back resumes before it.
  return HandBackExit{snapshot_.kw_names ? snapshot_.kw_names_offset : in.offset};
}

std::variant<TraceResult, TraceFailure> Tracer::Break(TFrame& root, const interpreter::BreakReason& reason) {
  if (snapshot_.handled_exceptions > 0) {
    // CPython cannot resume inside a handler the trace entered (its thread state has no exception
    // being handled): the segment breaks where that exception was raised instead, and CPython
    // raises it for real and runs the handler.
    if (!before_handling_ || before_handling_->handled_exceptions > 0) {
      return Fail(interpreter::MakeBreak(
          reason.kind, absl::StrCat("a graph break inside an except or finally block (", reason.message, ")")));
    }
    snapshot_ = *before_handling_;
  }
  const auto& instrs = root.decoded->instrs;
  const Instr& in = instrs[snapshot_.pc];
  RollBackToSnapshot();
  TraceResult r;
  r.break_info = BreakInfo{reason.message, fail_file_, fail_line_, fail_offset_, fail_instruction_, reason.kind};
  r.exit = ExitAt(root, in);
  std::vector<ValueId> outputs;
  if (absl::Status built = BuildFrameState(root, r, outputs); !built.ok()) return Fail(built);
  auto stores = AttrStores(outputs);
  if (!stores.ok()) return Fail(stores.status());
  r.attr_stores = *std::move(stores);
  auto container_stores = ContainerStores(outputs);
  if (!container_stores.ok()) return Fail(container_stores.status());
  r.container_stores = *std::move(container_stores);
  if (grad_mode_changed_) r.grad_mode_at_exit = grad_mode_;
  if (autocast_changed_) r.autocast_at_exit = autocast_;
  GuardChangedUnaliased();
  r.num_memo = num_memo_;
  r.scalars = scalar_program_;
  graph_->SetOutputs(outputs);
  graph_->EliminateDeadCode();
  NameScalars();
  r.graph = graph_;
  if (absl::Status split = SplitForAutograd(r); !split.ok()) return Fail(split);
  r.input_sources = input_sources_;
  r.guards = guards_;
  r.touched_tensors = touched_tensors_;
  return r;
}

// [NULL, bound method] becomes CPython's own method-call layout [function, self], so the next
// segment sees objects with a stable identity (a bound method is new every time). False: the
// pair is rebuilt as it is.
absl::StatusOr<bool> Tracer::RebuildMethodCall(const Sym& slot, const Sym& next, TraceResult& r,
                                               std::vector<ValueId>& outputs) {
  if (slot == nullptr || slot->kind != SymKind::kNull || !slot->method_call_slot || next == nullptr ||
      (next->kind != SymKind::kBoundMethod && next->kind != SymKind::kOpMethod) || next->items.empty() ||
      next->items[0] == nullptr) {
    return false;
  }
  PyObject* function = next->obj.get();
  if (PyUnicode_Check(function)) {
    // dict.get / list.append on a container: the type's method descriptor.
    const SymKind container = next->items[0]->kind;
    PyTypeObject* type = container == SymKind::kDict ? &PyDict_Type
                         : container == SymKind::kList ? &PyList_Type : &PyTuple_Type;
    function = cpython::LookupOnType(type, next->obj.get());
  }
  if (function == nullptr) return false;
  OutputSpec fn;
  fn.kind = OutputSpec::Kind::kConst;
  fn.obj = PyRef::Borrow(function);
  DT_ASSIGN_OR_RETURN(OutputSpec self, ToOutput(next->items[0], outputs));
  r.stack_state.push_back(std::move(fn));
  r.stack_state.push_back(std::move(self));
  return true;
}

absl::Status Tracer::BuildFrameState(TFrame& root, TraceResult& r, std::vector<ValueId>& outputs) {
  for (size_t i = 0; i < snapshot_.locals.size(); ++i) {
    const Sym& local = snapshot_.locals[i];
    OutputSpec spec;
    if (local != nullptr) {
      DT_ASSIGN_OR_RETURN(spec, ToOutput(local, outputs));
    } else if (snapshot_.argument_live[i] && static_cast<int>(i) < frame_.inputs.num_locals) {
      // Untouched since the segment began: passed on as it is at run time, bound or not (it may
      // be unbound when traced and bound in a later run passing the same guards, or the reverse).
      spec.kind = OutputSpec::Kind::kSource;
      spec.source = guards::LocalSource(static_cast<int>(i), py::Utf8Or(cpython::LocalNameObject(root.code, static_cast<int>(i))));
    } else {
      spec.kind = OutputSpec::Kind::kNull;
    }
    r.locals_state.push_back(std::move(spec));
  }
  const auto& stack = snapshot_.stack;
  for (size_t i = 0; i < stack.size(); ++i) {
    if (i + 1 < stack.size()) {
      DT_ASSIGN_OR_RETURN(const bool rebuilt, RebuildMethodCall(stack[i], stack[i + 1], r, outputs));
      if (rebuilt) {
        ++i;
        continue;
      }
    }
    OutputSpec spec;
    if (stack[i] == nullptr) {
      spec.kind = OutputSpec::Kind::kNull;
    } else {
      DT_ASSIGN_OR_RETURN(spec, ToOutput(stack[i], outputs));
    }
    r.stack_state.push_back(std::move(spec));
  }
  return absl::OkStatus();
}

TraceFailure Tracer::Fail(const absl::Status& s) const {
  TraceFailure failure;
  failure.reason = std::string(s.message());
  const std::optional<interpreter::BreakReason> reason = interpreter::AsBreak(s);
  // Not a break: an error of dyntrace itself (decoding, a broken invariant), reported as such.
  if (!reason) failure.reason = absl::StrCat("internal error of the tracer: ", s.ToString());
  failure.kind = reason ? reason->kind : interpreter::BreakKind::kUnsupported;
  failure.file = fail_file_.empty() ? py::Utf8Or(frame_.code->co_filename) : fail_file_;
  failure.line = fail_line_ >= 0 ? fail_line_ : frame_.code->co_firstlineno;
  failure.offset = fail_offset_;
  failure.instruction = fail_instruction_;
  failure.guards = guards_;
  failure.touched_tensors = touched_tensors_;
  failure.constraint_error = constraint_error_;
  return failure;
}

absl::Status Tracer::WrapStartStack(TFrame& root) {
  const std::vector<std::string> names =
      frame_.inputs.stack_size > 0 ? interpreter::StackNamesAt(*root.decoded, frame_.start_offset,
                                                               frame_.inputs.stack_size)
                                   : std::vector<std::string>();
  for (int i = 0; i < frame_.inputs.stack_size; ++i) {
    PyObject* v = frame_.inputs.stack[i];
    if (v == nullptr) {
      root.stack.push_back(MakeSym(SymKind::kNull));
      continue;
    }
    DT_ASSIGN_OR_RETURN(Sym wrapped, Wrap(v, guards::StackSource(i, names.empty() ? "" : names[i])));
    root.stack.push_back(wrapped);
  }
  return absl::OkStatus();
}

std::variant<TraceResult, TraceFailure> Tracer::Run() {
  TFrame root;
  root.code = frame_.code;
  root.is_root = true;
  root.globals = frame_.inputs.globals;
  root.function = frame_.function;
  auto decoded = Decode(frame_.code);
  if (!decoded.ok()) return Fail(decoded.status());
  root.decoded = *decoded;
  root.locals.assign(frame_.code->co_nlocalsplus, nullptr);
  root.argument_live.assign(frame_.code->co_nlocalsplus, true);
  if (frame_.code->co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR)) {
    return Fail(Unsupported("generator and coroutine frames run under CPython"));
  }
  current_ = &root;
  if (auto it = root.decoded->index_of_offset.find(frame_.start_offset);
      it != root.decoded->index_of_offset.end()) {
    root.pc = it->second;  // provenance of the start-state guards: the segment's first instruction
  }
  absl::Status wrapped = WrapStartStack(root);
  auto result = wrapped.ok() ? RunFrame(root) : absl::StatusOr<Sym>(wrapped);
  current_ = nullptr;
  if (!result.ok()) {
    const std::optional<interpreter::BreakReason> reason = interpreter::AsBreak(result.status());
    if (frame_.fullgraph || !snapshot_.valid || !reason || !constraint_error_.empty()) return Fail(result.status());
    return Break(root, *reason);
  }
  std::vector<ValueId> outputs;
  auto spec = ToOutput(*result, outputs);
  if (!spec.ok()) return Fail(spec.status());
  auto stores = AttrStores(outputs);
  if (!stores.ok()) return Fail(stores.status());
  auto container_stores = ContainerStores(outputs);
  if (!container_stores.ok()) return Fail(container_stores.status());
  GuardChangedUnaliased();
  graph_->SetOutputs(outputs);
  graph_->EliminateDeadCode();
  NameScalars();
  TraceResult r;
  r.graph = graph_;
  if (absl::Status split = SplitForAutograd(r); !split.ok()) return Fail(split);
  r.input_sources = input_sources_;
  r.guards = guards_;
  r.num_memo = num_memo_;
  r.scalars = scalar_program_;
  r.exit = ReturnExit{*std::move(spec), return_offset_, return_pushes_value_};
  r.attr_stores = *std::move(stores);
  r.container_stores = *std::move(container_stores);
  if (grad_mode_changed_) r.grad_mode_at_exit = grad_mode_;
  if (autocast_changed_) r.autocast_at_exit = autocast_;
  r.touched_tensors = touched_tensors_;
  return r;
}

namespace {

using NumberFn = PyObject* (*)(PyObject*, PyObject*);

PyObject* Power(PyObject* x, PyObject* y) { return PyNumber_Power(x, y, Py_None); }

const absl::flat_hash_map<std::string, NumberFn>& NumberOps() {
  static const auto* ops = new absl::flat_hash_map<std::string, NumberFn>{
      {"+", &PyNumber_Add},         {"-", &PyNumber_Subtract}, {"*", &PyNumber_Multiply},
      {"/", &PyNumber_TrueDivide},  {"//", &PyNumber_FloorDivide}, {"%", &PyNumber_Remainder},
      {"**", &Power},               {"<<", &PyNumber_Lshift},  {">>", &PyNumber_Rshift},
      {"&", &PyNumber_And},         {"|", &PyNumber_Or},       {"^", &PyNumber_Xor}};
  return *ops;
}

const absl::flat_hash_map<std::string, int>& Comparisons() {
  static const auto* codes = new absl::flat_hash_map<std::string, int>{
      {"<", Py_LT}, {"<=", Py_LE}, {"==", Py_EQ}, {"!=", Py_NE}, {">", Py_GT}, {">=", Py_GE}};
  return *codes;
}

}  // namespace

bool IsNumberOp(absl::string_view op) {
  return NumberOps().contains(std::string(op)) || Comparisons().contains(std::string(op));
}

PyObject* ApplyNumberOp(absl::string_view op, PyObject* x, PyObject* y) {
  const std::string key(op);
  if (auto it = NumberOps().find(key); it != NumberOps().end()) return it->second(x, y);
  if (auto it = Comparisons().find(key); it != Comparisons().end()) return PyObject_RichCompare(x, y, it->second);
  return nullptr;
}

// What the run-time numbers the graph reads are, for its printout (`# s0 = L['x'].size(0)`),
// and which input sizes are symbolic (`v0: f32[s0, 4]`).
void Tracer::NameScalars() {
  std::vector<bool> used(scalar_program_.size(), false);
  for (const Node& n : graph_->nodes()) {
    for (const GraphArg& a : n.args) {
      if (const auto* s = std::get_if<ScalarRef>(&a.content)) used[s->slot] = true;
      if (const auto* d = std::get_if<DimsRef>(&a.content)) {
        for (int slot : d->slots) {
          if (slot >= 0) used[slot] = true;
        }
      }
    }
  }
  for (size_t slot = 0; slot < scalar_program_.size(); ++slot) {
    const ScalarInstr& in = scalar_program_[slot];
    bool names_an_input_size = false;
    if (in.kind == ScalarInstr::Kind::kTensorSize) {
      const std::string source = in.source->ToString();
      for (size_t i = 0; i < graph_->input_sources().size(); ++i) {
        if (graph_->input_sources()[i] != source) continue;
        graph_->MarkSymbolicInputSize(static_cast<int>(i), in.a, static_cast<int>(slot));
        names_an_input_size = true;
      }
    }
    // Every symbol the printout shows is defined in it (`v0: f32[s0, 5]` and `# s0 = ...`).
    if (used[slot] || names_an_input_size) {
      graph_->NameScalar(static_cast<int>(slot), NumberExpression(scalar_program_, static_cast<int>(slot)));
    }
  }
}

std::string DynamicSizeKey(const guards::Source& tensor, int64_t dim) {
  return absl::StrCat(tensor.ToString(), ".size(", dim, ")");
}

std::variant<TraceResult, TraceFailure> TraceFrame(const FrameToTrace& frame) {
  Tracer tracer(frame);
  return tracer.Run();
}

}  // namespace dt::interpreter::trace
