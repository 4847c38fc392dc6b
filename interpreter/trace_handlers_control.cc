// interpreter/trace_handlers_control.cc: jumps, loops and returns.
#include <Python.h>

#include <vector>

#include "interpreter/tracer_internal.h"
#include "runtime/errors.h"

namespace dt::interpreter::trace {
namespace {

int JumpTarget(const Instr& in) { return static_cast<int>(PyLong_AsLong(in.argval.get())); }

}  // namespace

absl::Status Tracer::DoPopJumpIf(TFrame& f, const Instr& in) {
  DT_RETURN_IF_ERROR(f.Need(1, in));
  // Decided before popping: a tensor condition breaks here with the condition on the stack.
  DT_ASSIGN_OR_RETURN(const bool t, Truth(f.stack.back()));
  f.Pop();
  if (t == (in.op == Op::kPopJumpIfTrue)) return f.JumpTo(JumpTarget(in));
  return absl::OkStatus();
}

absl::Status Tracer::DoPopJumpIfNone(TFrame& f, const Instr& in) {
  DT_RETURN_IF_ERROR(f.Need(1, in));
  if (f.stack.back()->kind == SymKind::kNull) return Unsupported("None test on NULL");
  Sym v = f.Pop();
  const bool is_none = v->kind == SymKind::kConst && v->obj.get() == Py_None;
  if (is_none == (in.op == Op::kPopJumpIfNone)) return f.JumpTo(JumpTarget(in));
  return absl::OkStatus();
}

absl::Status Tracer::DoJumpIfOrPop(TFrame& f, const Instr& in) {
  DT_RETURN_IF_ERROR(f.Need(1, in));
  DT_ASSIGN_OR_RETURN(const bool t, Truth(f.stack.back()));
  if (t == (in.op == Op::kJumpIfTrueOrPop)) return f.JumpTo(JumpTarget(in));
  f.Pop();
  return absl::OkStatus();
}

absl::Status Tracer::DoGetIter(TFrame& f, const Instr& in) {
  DT_RETURN_IF_ERROR(f.Need(1, in));
  DT_ASSIGN_OR_RETURN(std::vector<Sym> items, Iterate(f.stack.back()));
  f.Pop();
  Sym it = MakeSym(SymKind::kIter);
  it->loop_iterator = true;
  it->items = std::move(items);
  f.stack.push_back(it);
  return absl::OkStatus();
}

absl::Status Tracer::DoForIter(TFrame& f, const Instr& in) {
  DT_RETURN_IF_ERROR(f.Need(1, in));
  Sym it = f.stack.back();
  if (it->kind == SymKind::kRunIter) return DataDependent("the next loop item is only known at run time");
  if (it->kind != SymKind::kIter) return Unsupported("FOR_ITER on a non-iterator");
  if (it->items.empty()) {
    f.Pop();
    // 3.12 jumps past the END_FOR its argument names; 3.11 jumps straight to the target.
    return f.JumpTo(JumpTarget(in), interpreter::kPython312 ? 1 : 0);
  }
  Sym next = it->items.front();
  Mutating(it);
  it->items.erase(it->items.begin());
  f.stack.push_back(next);
  return absl::OkStatus();
}

absl::Status Tracer::DoYieldValue(TFrame& f, const Instr& in) {
  if (!f.generator) return Unsupported("YIELD_VALUE outside a generator run by the trace");
  DT_RETURN_IF_ERROR(f.Need(1, in));
  f.yields.push_back(f.Pop());
  f.stack.push_back(ConstSym(PyRef::Borrow(Py_None)));  // what next() sends
  return absl::OkStatus();
}

absl::Status Tracer::DoReturn(TFrame& f, const Instr& in) {
  if (in.op == Op::kReturnConst) {
    f.result = ConstSym(in.argval);
  } else {
    DT_RETURN_IF_ERROR(f.Need(1, in));
    f.result = f.Pop();
  }
  f.returned = true;
  return absl::OkStatus();
}

}  // namespace dt::interpreter::trace
