// interpreter/trace_reconstruct.cc: trace values back into Python objects and frame state (output specs).
#include <Python.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "graph/pointwise.h"
#include "interpreter/py_str.h"
#include "interpreter/py_types.h"
#include "interpreter/sym_dict.h"
#include "interpreter/tracer_internal.h"
#include "runtime/errors.h"
#include "runtime/indexing.h"

namespace dt::interpreter::trace {

// ---------------------------------------------------------------------------------------------

namespace {

OutputSpec FromSource(const SourceRef& source) {
  OutputSpec out;
  out.kind = OutputSpec::Kind::kSource;
  out.source = source;
  return out;
}

OutputSpec OfKind(OutputSpec::Kind kind, int index = -1) {
  OutputSpec out;
  out.kind = kind;
  out.index = index;
  return out;
}

// Objects with identity built by the trace are built once, however many slots hold them. Tuples
// too: `copy.copy(t) is t` of a tuple the trace built must stay true.
bool HasIdentity(const Sym& s) {
  return s->kind == SymKind::kList || s->kind == SymKind::kDict || s->kind == SymKind::kTuple ||
         s->kind == SymKind::kCell || s->kind == SymKind::kIter || s->kind == SymKind::kObject ||
         s->kind == SymKind::kSet || s->kind == SymKind::kPartial || IsTraceException(s) ||
         (s->kind == SymKind::kFunction && !PyFunction_Check(s->obj.get()));
}

}  // namespace

absl::StatusOr<OutputSpec> Tracer::ChildOutput(const Sym& parent, const Sym& c, std::vector<ValueId>& outputs) {
  if (c != nullptr && c->kind != SymKind::kNull) return ToOutput(c, outputs);
  // Only cells and a made function's optional parts may be empty.
  if (parent->kind != SymKind::kCell && parent->kind != SymKind::kFunction) {
    return Unsupported(absl::StrCat("rebuilding a ", Describe(parent), " with an empty slot"));
  }
  return OfKind(OutputSpec::Kind::kNull);
}

OutputSpec Tracer::TensorOutput(const Sym& s, std::vector<ValueId>& outputs) {
  const GraphValue& v = graph_->value(s->value);
  if (v.producer < 0 && s->source != nullptr) return FromSource(s->source);
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i] == s->value) return OfKind(OutputSpec::Kind::kGraphOutput, static_cast<int>(i));
  }
  outputs.push_back(s->value);
  return OfKind(OutputSpec::Kind::kGraphOutput, static_cast<int>(outputs.size() - 1));
}

// Constants, functions and op functions; bound ones with their self.
absl::StatusOr<OutputSpec> Tracer::CallableOutput(const Sym& s, OutputSpec out, std::vector<ValueId>& outputs) {
  if (s->kind == SymKind::kOpMethod && !s->items.empty()) {
    out.kind = OutputSpec::Kind::kBoundMethod;
    out.obj = s->obj;
    DT_ASSIGN_OR_RETURN(OutputSpec self, ChildOutput(s, s->items[0], outputs));
    out.children.push_back(std::move(self));
    return out;
  }
  if (s->kind == SymKind::kFunction && !PyFunction_Check(s->obj.get())) {
    out.kind = OutputSpec::Kind::kFunction;
    out.obj = s->obj;
    out.globals = s->globals;
    for (const Sym& part : {s->defaults, s->kwdefaults, s->closure}) {
      DT_ASSIGN_OR_RETURN(OutputSpec c, ChildOutput(s, part, outputs));
      out.children.push_back(std::move(c));
    }
    return out;
  }
  // The run-time object, not the one seen when tracing: values are guarded by equality, so an
  // equal but different object (`a is c` of equal strings) may be there now.
  if (s->source != nullptr) return FromSource(s->source);
  out.kind = OutputSpec::Kind::kConst;
  out.obj = s->obj;
  return out;
}

// Tuples, lists, dicts, iterators, slices and cells: rebuilt from their items.
absl::StatusOr<OutputSpec> Tracer::ContainerOutput(const Sym& s, OutputSpec out, std::vector<ValueId>& outputs) {
  switch (s->kind) {
    case SymKind::kTuple:
      out.kind = OutputSpec::Kind::kTuple;
      out.obj = s->named_type;  // rebuilt as that named tuple
      break;
    case SymKind::kList:
    case SymKind::kRunSeq: out.kind = OutputSpec::Kind::kList; break;  // kRunSeq: what was appended
    case SymKind::kDict:
      for (const PyRef& key : s->keys) {
        if (IsTensorKey(key.get())) return Unsupported("a dict with a tensor key leaves the trace");
      }
      out.kind = OutputSpec::Kind::kDict;
      break;
    case SymKind::kSlice: out.kind = OutputSpec::Kind::kSlice; break;
    case SymKind::kObject:  // made by the trace: its class, then its attributes
      if (IsTraceClass(reinterpret_cast<PyObject*>(Py_TYPE(s->obj.get())))) {
        return Unsupported("an instance of a class a `class` statement made leaves the trace");
      }
      out.kind = OutputSpec::Kind::kNewObject;
      out.obj = PyRef::Borrow(reinterpret_cast<PyObject*>(Py_TYPE(s->obj.get())));
      break;
    case SymKind::kCell: out.kind = OutputSpec::Kind::kCell; break;
    case SymKind::kIter:
      if (!s->loop_iterator && s->reversed_of != nullptr) return ReversedOutput(s, std::move(out), outputs);
      if (!s->loop_iterator) {
        return Unsupported("an iterator made by zip(), enumerate(), reversed() or a dict view "
                           "crosses a graph break (it would change type)");
      }
      out.kind = OutputSpec::Kind::kIterator;
      break;
    default: return Unsupported(absl::StrCat("rebuilding a ", Describe(s)));
  }
  // An empty cell holds one null item.
  const std::vector<Sym> items = s->kind == SymKind::kCell && s->items.empty() ? std::vector<Sym>{nullptr} : s->items;
  for (const Sym& item : items) {
    DT_ASSIGN_OR_RETURN(OutputSpec c, ChildOutput(s, item, outputs));
    out.children.push_back(std::move(c));
  }
  out.keys = s->keys;
  return out;
}

// A loop's iterator: the object read from the frame, advanced past what this segment consumed;
// live over its list or dict; or over the items left.
absl::StatusOr<OutputSpec> Tracer::IteratorOutput(const Sym& s, OutputSpec out, std::vector<ValueId>& outputs) {
  // Over the items left, it would not raise when CPython code between segments changes the set.
  if (s->iterated_set != nullptr) return Unsupported("a loop over a set crosses a graph break");
  if (s->resumed && s->source != nullptr) {
    OutputSpec advanced = OfKind(OutputSpec::Kind::kAdvancedIterator, static_cast<int>(s->consumed));
    advanced.children.push_back(FromSource(s->source));
    return advanced;
  }
  if (s->over == nullptr) return ContainerOutput(s, std::move(out), outputs);
  if (!s->loop_iterator) {
    return Unsupported("an iterator from iter() of a list or dict crosses a graph break (it would change type)");
  }
  auto same_key = [](const PyRef& a, const PyRef& b) { return a.get() == b.get(); };
  if (s->over->kind == SymKind::kDict &&
      !std::equal(s->over->keys.begin(), s->over->keys.end(), s->keys_at_start.begin(), s->keys_at_start.end(), same_key)) {
    // CPython's iterator would raise at its next step, which a new iterator would not.
    return Unsupported("a loop over a dict the body changed crosses a graph break");
  }
  DT_ASSIGN_OR_RETURN(OutputSpec container, ToOutput(s->over, outputs));
  out.kind = OutputSpec::Kind::kLiveIterator;
  out.index = static_cast<int>(s->position);
  out.children.push_back(std::move(container));
  return out;
}

// `r = reversed(xs)` held by user code at a break: reversed() of the list or tuple again, moved
// on past the items the segment took, so it keeps its type (list_reverseiterator) and stays live
// over the list as CPython's does. Refused when the list changed after reversed() read it.
absl::StatusOr<OutputSpec> Tracer::ReversedOutput(const Sym& s, OutputSpec out, std::vector<ValueId>& outputs) {
  const Sym& of = s->reversed_of;
  if (of->items != s->reversed_items || s->items.size() > of->items.size()) {
    return Unsupported("an iterator made by reversed() of a list the trace changed crosses a graph break");
  }
  DT_ASSIGN_OR_RETURN(OutputSpec container, ToOutput(of, outputs));
  OutputSpec call;
  call.kind = OutputSpec::Kind::kCall;
  call.obj = PyRef::Borrow(reinterpret_cast<PyObject*>(&PyReversed_Type));
  call.children.push_back(std::move(container));
  out.kind = OutputSpec::Kind::kAdvance;
  out.index = static_cast<int>(of->items.size() - s->items.size());
  out.children.push_back(std::move(call));
  return out;
}

absl::StatusOr<OutputSpec> Tracer::ToOutput(const Sym& s, std::vector<ValueId>& outputs) {
  OutputSpec out;
  if (HasIdentity(s) && s->source == nullptr) {
    if (auto it = memo_.find(s); it != memo_.end()) return OfKind(OutputSpec::Kind::kMemo, it->second);
    out.memo = num_memo_++;
    memo_[s] = out.memo;
  }
  if (s->kind == SymKind::kConst && IsTraceClass(s->obj.get())) {
    return Unsupported("a class a `class` statement made leaves the trace (CPython makes one per call)");
  }
  switch (s->kind) {
    case SymKind::kTensor: return TensorOutput(s, outputs);
    case SymKind::kNull: return OfKind(OutputSpec::Kind::kNull);
    case SymKind::kNumber: return OfKind(OutputSpec::Kind::kScalarSlot, s->value);
    // The same iterator object, at its current position.
    case SymKind::kRunIter: return FromSource(s->source);
    // The caller's list itself (what the trace appended is made on it: ContainerStore::append).
    case SymKind::kRunSeq: return FromSource(s->source);
    case SymKind::kSuper: return Unsupported("a super() object crossing a graph break");
    // Its generator is suspended inside the trace: no real generator can be made at that point.
    case SymKind::kGenManager: return Unsupported("a contextlib.contextmanager manager crossing a graph break");
    case SymKind::kPartial:
      if (s->source != nullptr) return FromSource(s->source);
      return PartialOutput(s, std::move(out), outputs);
    case SymKind::kSet: {  // rebuilt from its history, so its table is CPython's
      out.kind = OutputSpec::Kind::kSet;
      out.obj = PyRef::Steal(PyTuple_New(static_cast<Py_ssize_t>(s->keys.size())));
      for (size_t i = 0; i < s->keys.size(); ++i) PyTuple_SET_ITEM(out.obj.get(), i, Py_NewRef(s->keys[i].get()));
      return out;
    }
    case SymKind::kObject:
      if (!s->made_by_trace) return FromSource(s->source);
      return ContainerOutput(s, std::move(out), outputs);
    case SymKind::kConst:
      if (IsTraceException(s)) return ExceptionOutput(s, std::move(out));
      return CallableOutput(s, std::move(out), outputs);
    case SymKind::kOpMethod:
    case SymKind::kFunction: return CallableOutput(s, std::move(out), outputs);
    case SymKind::kShape: {
      DT_ASSIGN_OR_RETURN(Sym t, MaterializeShape(s));
      return ToOutput(t, outputs);
    }
    case SymKind::kBoundMethod: {
      out.kind = OutputSpec::Kind::kBoundMethod;
      out.obj = s->obj;
      DT_ASSIGN_OR_RETURN(OutputSpec self, ChildOutput(s, s->items[0], outputs));
      out.children.push_back(std::move(self));
      return out;
    }
    case SymKind::kCell:
      if (s->source != nullptr) return FromSource(s->source);
      return ContainerOutput(s, std::move(out), outputs);
    case SymKind::kTuple:
    case SymKind::kList:
    case SymKind::kDict:
      // The caller's own list/dict (unchanged), or its tuple: rebuilding a tuple would break
      // `is` (`ex is exc_info` after `ex = exc_info`).
      if (s->from_frame && s->source != nullptr) return FromSource(s->source);
      return ContainerOutput(s, std::move(out), outputs);
    case SymKind::kIter: return IteratorOutput(s, std::move(out), outputs);
    case SymKind::kSlice: return ContainerOutput(s, std::move(out), outputs);
  }
  return Unsupported(absl::StrCat("rebuilding a ", Describe(s)));
}

}  // namespace dt::interpreter::trace
