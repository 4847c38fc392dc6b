// interpreter/trace_run_sequence.cc: a caller's list or tuple whose length is a run-time value.
//
// A list that grows between calls (a history appended to, a decode loop's outputs collected
// across a graph break) would otherwise be traced once per length. Once its length changed
// between calls (or, for a list in the state of a segment that starts mid-function, at once),
// it is wrapped as a kRunSeq: only its type and `len >= 1` are guarded, and these uses need no
// items:
//   - len(s): a run-time number (the number program's kSequence read, plus what the trace
//     appended);
//   - sum(s), min(s), max(s) of a sequence of ints (or of floats) nothing was appended to yet: a
//     run-time number, with a guard that every item still has that type;
//   - s.append(v): recorded, and made on the real list after the graph (ContainerStore::append);
//   - passing it to a Python function the trace follows, storing and loading it, returning it.
// Anything else (iterating it, indexing it, another method, a dyntrace op) needs its items: it is
// materialised into a kList/kTuple in place, with its exact length guarded, as before.
#include "absl/strings/str_cat.h"
#include "interpreter/tracer_internal.h"

namespace dt::interpreter::trace {

using guards::LeafGuard;
using py::PyRef;

std::string DynamicLengthKey(const guards::Source& source) { return absl::StrCat("len(", source.ToString(), ")"); }

bool Tracer::LengthIsDynamic(PyObject* obj, const SourceRef& source) const {
  if (!(PyList_CheckExact(obj) || PyTuple_CheckExact(obj)) || PyObject_Length(obj) < 1) return false;
  if (frame_.start_offset > 0 && PyList_CheckExact(obj) &&
      (source->kind == guards::Source::Kind::kLocal || source->kind == guards::Source::Kind::kStack)) {
    return true;  // a segment's state: a list a loop appends to changes length every iteration
  }
  return frame_.all_dynamic ||
         (frame_.dynamic_numbers != nullptr && frame_.dynamic_numbers->contains(DynamicLengthKey(*source)));
}

absl::StatusOr<Sym> Tracer::WrapRunSequence(PyObject* obj, const SourceRef& source) {
  const Provenance where = Here();
  guards_.Add(LeafGuard::Type(source, Py_TYPE(obj), where));
  guards_.Add(LeafGuard::LengthAtLeast(source, 1, where));
  Sym s = MakeSym(SymKind::kRunSeq);
  s->source = source;
  s->obj = PyRef::Borrow(obj);
  s->from_frame = true;
  if (PyList_CheckExact(obj)) DT_RETURN_IF_ERROR(NoteCallerValue(obj, s));
  return s;
}

// The real items, wrapped and guarded one by one, followed by what the trace appended; the Sym
// becomes the kList (kTuple) every other handler knows. Changes recorded on it stay recorded.
absl::Status Tracer::Materialise(const Sym& s) {
  if (s->kind != SymKind::kRunSeq) return absl::OkStatus();
  PyObject* obj = s->obj.get();
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(obj);
  if (n > kMaxUnpackedItems) return Unsupported("a long list whose items the trace needs");
  guards_.Add(LeafGuard::Length(s->source, n, Here()));
  Mutating(s);  // a break in this instruction rolls the Sym back to a kRunSeq
  std::vector<Sym> items;
  {
    WrapDepthScope nested(wrap_depth_);
    for (Py_ssize_t i = 0; i < n; ++i) {
      DT_ASSIGN_OR_RETURN(Sym item, Wrap(PySequence_Fast_GET_ITEM(obj, i), guards::ItemSource(s->source, static_cast<int>(i))));
      items.push_back(item);
    }
  }
  items.insert(items.end(), s->items.begin(), s->items.end());
  s->items = std::move(items);
  s->kind = PyTuple_CheckExact(obj) ? SymKind::kTuple : SymKind::kList;
  s->value = -1;
  return absl::OkStatus();
}

absl::Status Tracer::MaterialiseAll(const std::vector<Sym>& values) {
  for (const Sym& v : values) {
    if (v != nullptr) DT_RETURN_IF_ERROR(Materialise(v));
  }
  return absl::OkStatus();
}

// The number program's read of the sequence itself, made once per Sym.
int Tracer::SequenceSlot(const Sym& s) {
  if (s->value >= 0) return static_cast<int>(s->value);
  ScalarInstr read;
  read.kind = ScalarInstr::Kind::kSequence;
  read.source = s->source;
  const int slot = static_cast<int>(scalar_program_.size());
  scalar_program_.push_back(std::move(read));
  slot_samples_.push_back(s->obj);
  slot_syms_.push_back(nullptr);  // never a value of the trace: only len/sum/min/max read it
  slot_inputs_.push_back({slot});
  s->value = slot;
  return slot;
}

absl::StatusOr<Sym> Tracer::RunSequenceLength(const Sym& s) {
  const int slot = SequenceSlot(s);
  ScalarInstr call;
  call.kind = ScalarInstr::Kind::kCall;
  call.function = PyRef::Borrow(PyDict_GetItemString(frame_.inputs.builtins, "len"));
  call.arg_slots = {slot};
  call.arg_consts = {PyRef()};
  DT_ASSIGN_OR_RETURN(Sym length, NumberSlot(std::move(call), PyRef::Steal(PyLong_FromSsize_t(PyObject_Length(s->obj.get()))), {slot}));
  if (s->items.empty()) return length;
  return NumberOp("+", false, length, ConstSym(PyRef::Steal(PyLong_FromSize_t(s->items.size()))));
}

// sum/min/max over ints only (or floats only): the result's type does not depend on the values.
// Null when the items are of another kind, or the trace appended to it (the program reads the
// list as it was before the segment).
absl::StatusOr<Sym> Tracer::RunSequenceFold(PyObject* fn, const Sym& s) {
  PyObject* obj = s->obj.get();
  if (!s->items.empty()) return Sym();
  PyTypeObject* item_type = Py_TYPE(PySequence_Fast_GET_ITEM(obj, 0));
  if (item_type != &PyLong_Type && item_type != &PyFloat_Type) return Sym();
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(obj); ++i) {
    if (Py_TYPE(PySequence_Fast_GET_ITEM(obj, i)) != item_type) return Sym();
  }
  const int slot = SequenceSlot(s);
  sequence_values_read_.insert(slot);
  const SourceRef source = s->source;
  auto every_item = std::make_shared<const LeafGuard::RelationFn>(
      [source, item_type](const guards::FrameInputs& inputs) -> std::optional<bool> {
        PyObject* seq = source->Resolve(inputs);
        if (seq == nullptr || !(PyList_CheckExact(seq) || PyTuple_CheckExact(seq))) return std::nullopt;
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); ++i) {
          if (Py_TYPE(PySequence_Fast_GET_ITEM(seq, i)) != item_type) return false;
        }
        return true;
      });
  guards_.Add(LeafGuard::Relation(source, absl::StrCat("every item of ", source->ToString(), " is a ", item_type->tp_name),
                                  true, std::move(every_item), Here()));
  ScalarInstr call;
  call.kind = ScalarInstr::Kind::kCall;
  call.function = PyRef::Borrow(fn);
  call.arg_slots = {slot};
  call.arg_consts = {PyRef()};
  PyRef sample = PyRef::Steal(PyObject_CallOneArg(fn, obj));
  if (!sample) {
    PyErr_Clear();
    return Raises(absl::StrCat("the traced code raises in ", ShortRepr(fn)));
  }
  return NumberSlot(std::move(call), std::move(sample), {slot});
}

// A builtin call on a run-time sequence, decided without its items; null when it needs them.
absl::StatusOr<Sym> Tracer::CallOnRunSequence(PyObject* fn, const std::vector<Sym>& args, const Kwargs& kwargs) {
  if (args.size() != 1 || !kwargs.empty() || args[0]->kind != SymKind::kRunSeq) return Sym();
  auto is = [&](const char* name) { return fn == PyDict_GetItemString(frame_.inputs.builtins, name); };
  if (is("len")) return RunSequenceLength(args[0]);
  if (is("sum") || is("min") || is("max")) return RunSequenceFold(fn, args[0]);
  return Sym();
}

// A number computed from the sequence must become a constant: its length, and for a fold its
// items, are guarded.
void Tracer::SpecializeSequence(int slot) {
  const ScalarInstr& in = scalar_program_[slot];
  PyObject* seq = slot_samples_[slot].get();
  guards_.Add(LeafGuard::Length(in.source, PySequence_Fast_GET_SIZE(seq), Here()));
  if (!sequence_values_read_.contains(slot)) return;
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); ++i) {
    const SourceRef item = guards::ItemSource(in.source, static_cast<int>(i));
    guards_.Add(LeafGuard::Type(item, Py_TYPE(PySequence_Fast_GET_ITEM(seq, i)), Here()));
    guards_.Add(LeafGuard::Equals(item, PySequence_Fast_GET_ITEM(seq, i), Here()));
  }
}

// A function the trace follows takes the sequence as it is, and so does list.append on one;
// everything else (a builtin, a dyntrace op, a tensor or container method) gets its items.
absl::Status Tracer::MaterialiseCallArguments(const Sym& callable, const std::vector<Sym>& args, const Kwargs& kwargs) {
  const bool followed = callable->kind == SymKind::kFunction || callable->kind == SymKind::kObject ||
                        (callable->kind == SymKind::kBoundMethod && PyFunction_Check(callable->obj.get()));
  const bool appends = callable->kind == SymKind::kBoundMethod && !callable->items.empty() &&
                       callable->items[0]->kind == SymKind::kRunSeq;
  if (followed || appends) return absl::OkStatus();
  DT_RETURN_IF_ERROR(MaterialiseAll(args));
  for (const auto& [name, value] : kwargs) DT_RETURN_IF_ERROR(Materialise(value));
  return absl::OkStatus();
}

absl::Status Tracer::AppendToRunSequence(const Sym& s, const Sym& value) {
  DT_RETURN_IF_ERROR(MutatingContainer(s));
  s->items.push_back(value);
  return absl::OkStatus();
}

// Before an instruction that pops values: a run-time sequence among them is materialised unless
// the instruction only moves it (or a call decides for itself, trace_calls.cc).
absl::Status Tracer::MaterialiseOperands(TFrame& f, const Instr& in) {
  switch (in.op) {
    case Op::kPopTop:
    case Op::kCopy:
    case Op::kSwap:
    case Op::kStoreFast:
    case Op::kReturnValue:
    case Op::kLoadAttr:
    case Op::kLoadMethod:
    case Op::kCall:
    case Op::kPrecall:
    case Op::kPopJumpIfFalse:  // its truth: len >= 1 is guarded
    case Op::kPopJumpIfTrue:
    case Op::kUnaryNot: return absl::OkStatus();
    default: break;
  }
  const interpreter::StackEffect effect = interpreter::RowOf(in.op).stack(in.arg, false);
  const size_t n = std::min<size_t>(effect.pops, f.stack.size());
  for (size_t i = f.stack.size() - n; i < f.stack.size(); ++i) {
    if (f.stack[i] != nullptr) DT_RETURN_IF_ERROR(Materialise(f.stack[i]));
  }
  return absl::OkStatus();
}

}  // namespace dt::interpreter::trace
