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

bool Tracer::HeldByFrames(const Sym& s, const TFrame& f) {
  for (const TFrame* frame = &f; frame != nullptr; frame = frame->caller) {
    for (const Sym& local : frame->locals) {
      if (local == s) return true;
      if (local != nullptr && local->kind == SymKind::kCell && !local->items.empty() && local->items[0] == s) return true;
    }
    const size_t slots = frame == &f ? frame->stack.size() - 1 : frame->stack.size();
    for (size_t i = 0; i < slots; ++i) {
      if (frame->stack[i] == s) return true;
    }
  }
  return false;
}

absl::Status Tracer::DoGetIter(TFrame& f, const Instr& in) {
  DT_RETURN_IF_ERROR(f.Need(1, in));
  Sym iterable = f.stack.back();
  // A generator that raises at its end, and a lazy zip()/enumerate() over an iterator, stay
  // themselves too: each FOR_ITER takes one step of them (they cannot cross a graph break).
  if (iterable->kind == SymKind::kIter &&
      (iterable->raises_when_exhausted || !iterable->zip_sources.empty() || HeldByFrames(iterable, f))) {
    // An iterator something else holds too (`r = reversed(xs)`, then `for t in r`): GET_ITER of
    // an iterator is the iterator itself, so what the loop takes is gone from it, as in CPython.
    // (Held only by the stack, as `for t in zip(a, b)`, it becomes the loop's own iterator, which
    // may cross a graph break.)
    return absl::OkStatus();
  }
  DT_ASSIGN_OR_RETURN(Sym it, IteratorOf(iterable, /*loop_iterator=*/true));
  f.Pop();
  f.stack.push_back(it);
  return absl::OkStatus();
}

// A new iterator over `iterable` (GET_ITER, iter()). Iterators user code holds (iter()'s) are not
// loop iterators: they keep their type, so they cannot cross a break.
absl::StatusOr<Sym> Tracer::IteratorOf(const Sym& iterable, bool loop_iterator) {
  Sym it = MakeSym(SymKind::kIter);
  it->loop_iterator = loop_iterator;
  if (iterable->kind == SymKind::kDict) DT_RETURN_IF_ERROR(GuardKeyOrder(iterable));
  if (iterable->kind == SymKind::kList || iterable->kind == SymKind::kDict) {
    // Read live: the body may change the container (see SymValue::over).
    it->over = iterable;
    it->keys_at_start = iterable->keys;
  } else {
    DT_ASSIGN_OR_RETURN(it->items, Iterate(iterable));
    if (iterable->kind == SymKind::kSet) {
      it->iterated_set = iterable;
      it->keys_at_start = iterable->keys;
    }
  }
  return it;
}

// The next item of an iterator the trace made, as FOR_ITER and next() take it; null when it is
// exhausted.
absl::StatusOr<Sym> Tracer::NextItem(const Sym& it) {
  if (!it->zip_sources.empty()) return NextZipItem(it);
  if (it->iterated_set != nullptr) DT_RETURN_IF_ERROR(CheckSetUnchanged(it));
  if (it->over != nullptr) return NextLiveItem(it);
  if (it->items.empty()) return Sym();
  Sym next = it->items.front();
  Mutating(it);
  it->items.erase(it->items.begin());
  if (it->raises_when_exhausted && it->items.empty()) return Throw(next);  // a generator's raise
  ++it->consumed;
  return next;
}

// One step of a lazy zip()/enumerate(): the next item of each source in order, stopping at the
// first that is exhausted (the sources before it have given an item each, as in CPython).
absl::StatusOr<Sym> Tracer::NextZipItem(const Sym& it) {
  Sym tuple = MakeSym(SymKind::kTuple);
  if (it->enumerate_start) {
    PyRef offset = PyRef::Steal(PyLong_FromSize_t(it->consumed));
    PyRef count = offset ? PyRef::Steal(PyNumber_Add(it->enumerate_start.get(), offset.get())) : PyRef();
    if (!count) {
      PyErr_Clear();
      return Unsupported("enumerate()'s count could not be made");
    }
    tuple->items.push_back(ConstSym(std::move(count)));
  }
  for (const Sym& source : it->zip_sources) {
    DT_ASSIGN_OR_RETURN(Sym item, NextItem(source));
    if (item == nullptr) return Sym();
    tuple->items.push_back(std::move(item));
  }
  Mutating(it);
  ++it->consumed;
  return tuple;
}

// The next item of a loop iterator that reads its container live, or null when it is exhausted
// (CPython's list and dict iterators, item for item).
absl::StatusOr<Sym> Tracer::NextLiveItem(const Sym& it) {
  const Sym& over = it->over;
  if (over->kind == SymKind::kDict) {
    if (over->keys.size() != it->keys_at_start.size()) {
      return Raises("the traced code raises RuntimeError: dictionary changed size during iteration");
    }
    for (size_t i = 0; i < over->keys.size(); ++i) {
      if (over->keys[i].get() != it->keys_at_start[i].get()) {
        return Unsupported("a dict's keys changed (at the same size) while a loop iterates it");
      }
    }
  }
  const size_t size = over->kind == SymKind::kDict ? over->keys.size() : over->items.size();
  if (it->position >= size) return Sym();
  Sym next = over->kind == SymKind::kDict ? KeySym(over->keys[it->position]) : over->items[it->position];
  Mutating(it);
  ++it->position;
  return next;
}

absl::Status Tracer::DoForIter(TFrame& f, const Instr& in) {
  DT_RETURN_IF_ERROR(f.Need(1, in));
  Sym it = f.stack.back();
  if (it->kind == SymKind::kRunIter) return DataDependent("the next loop item is only known at run time");
  if (it->kind != SymKind::kIter) return Unsupported("FOR_ITER on a non-iterator");
  DT_ASSIGN_OR_RETURN(Sym next, NextItem(it));
  if (next == nullptr) {
    f.Pop();
    // 3.12 jumps past the END_FOR its argument names; 3.11 jumps straight to the target.
    return f.JumpTo(JumpTarget(in), interpreter::kPython312 ? 1 : 0);
  }
  f.stack.push_back(next);
  return absl::OkStatus();
}

absl::Status Tracer::DoYieldValue(TFrame& f, const Instr& in) {
  if (!f.generator) return Unsupported("YIELD_VALUE outside a generator run by the trace");
  DT_RETURN_IF_ERROR(f.Need(1, in));
  f.yields.push_back(f.Pop());
  f.stack.push_back(ConstSym(PyRef::Borrow(Py_None)));  // what next() sends
  f.suspended = f.suspend_at_yield;
  return absl::OkStatus();
}

// `yield from x` in a generator the trace runs: x itself when it is an iterator (a generator
// run by the trace is one), else iter(x).
absl::Status Tracer::DoGetYieldFromIter(TFrame& f, const Instr& in) {
  DT_RETURN_IF_ERROR(f.Need(1, in));
  if (!f.generator) return Unsupported("GET_YIELD_FROM_ITER outside a generator run by the trace");
  const Sym& iterable = f.stack.back();
  if (iterable->kind == SymKind::kIter && !iterable->dict_view) return absl::OkStatus();
  DT_ASSIGN_OR_RETURN(Sym it, IteratorOf(iterable, /*loop_iterator=*/false));
  f.Pop();
  f.stack.push_back(it);
  return absl::OkStatus();
}

// SEND of `yield from`: what next() sends is None (the trace runs a generator straight through),
// so it is next(iterator); once that is exhausted, the iterator's return value (a generator's
// own, else None).
absl::Status Tracer::DoSend(TFrame& f, const Instr& in) {
  DT_RETURN_IF_ERROR(f.Need(2, in));
  const Sym& receiver = f.stack[f.stack.size() - 2];
  const Sym& sent = f.stack.back();
  if (!f.generator || receiver->kind != SymKind::kIter || receiver->dict_view ||
      !(sent->kind == SymKind::kConst && sent->obj.get() == Py_None)) {
    return Unsupported(absl::StrCat("SEND to a ", Describe(receiver)));
  }
  DT_ASSIGN_OR_RETURN(Sym next, NextItem(receiver));
  if (next != nullptr) {
    f.Pop();
    f.stack.push_back(next);
    return absl::OkStatus();
  }
  Sym value = receiver->returned != nullptr ? receiver->returned : ConstSym(PyRef::Borrow(Py_None));
  f.Pop();
  if (!interpreter::kPython312) f.Pop();
  f.stack.push_back(value);
  return f.JumpTo(JumpTarget(in));
}

absl::Status Tracer::DoEndSend(TFrame& f, const Instr& in) {
  DT_RETURN_IF_ERROR(f.Need(2, in));
  Sym value = f.Pop();
  f.Pop();
  f.stack.push_back(value);
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
