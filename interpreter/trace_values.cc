// interpreter/trace_values.cc: values read from the frame, Python numbers, and trace values as Python objects.
#include <Python.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "graph/pointwise.h"
#include "interpreter/cpython_frame.h"
#include "interpreter/py_str.h"
#include "interpreter/py_types.h"
#include "interpreter/sym_dict.h"
#include "interpreter/traced_int.h"
#include "interpreter/tracer_internal.h"
#include "runtime/autograd_meta.h"
#include "runtime/errors.h"
#include "runtime/indexing.h"

namespace dt::interpreter::trace {

bool IsPureConstType(PyObject* obj) {
  return obj == Py_None || PyBool_Check(obj) || PyLong_CheckExact(obj) || PyFloat_CheckExact(obj) ||
         PyUnicode_CheckExact(obj) || PyBytes_CheckExact(obj) || PyComplex_CheckExact(obj) ||
         obj == Py_Ellipsis || PySlice_Check(obj) || PyRange_Check(obj) ||
         (PyFrozenSet_CheckExact(obj) && [&] {  // `x in {1, 2}` compiles to a frozenset constant
           // Iterating a set runs no code of its elements.
           PyRef it = PyRef::Steal(PyObject_GetIter(obj));
           bool pure = static_cast<bool>(it);
           while (PyObject* item = pure ? PyIter_Next(it.get()) : nullptr) {
             pure = IsPureConstType(item);
             Py_DECREF(item);
           }
           PyErr_Clear();
           return pure;
         }()) ||
         PyObject_TypeCheck(obj, &py::DTypeType) || PyObject_TypeCheck(obj, &py::DeviceType) || py::IsDTypeInfo(obj) ||
         ((PyTuple_CheckExact(obj) || PyList_CheckExact(obj)) && [&] {
           for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(obj); ++i) {
             if (!IsPureConstType(PySequence_Fast_GET_ITEM(obj, i))) return false;
           }
           return true;
         }());
}

std::string ShortRepr(PyObject* obj) {
  if (!guards::ReprRunsNoUserCode(obj)) return absl::StrCat("<", Py_TYPE(obj)->tp_name, " object>");
  PyRef r = PyRef::Steal(PyObject_Repr(obj));
  if (!r) {
    PyErr_Clear();
    return "<?>";
  }
  std::string s = py::Utf8Or(r.get());
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

std::string Describe(const Sym& s) {
  switch (s->kind) {
    case SymKind::kConst: return ShortRepr(s->obj.get());
    case SymKind::kTensor: return absl::StrCat("v", s->value, ":", DescribeMeta(s->meta));
    case SymKind::kTuple: return absl::StrFormat("tuple(%d)", s->items.size());
    case SymKind::kList: return absl::StrFormat("list(%d)", s->items.size());
    case SymKind::kDict: return absl::StrFormat("dict(%d)", s->items.size());
    case SymKind::kNull: return "NULL";
    case SymKind::kIter: return "iter";
    case SymKind::kCell: return "cell";
    case SymKind::kBoundMethod: return "bound method";
    case SymKind::kOpMethod: return "dyntrace op";
    case SymKind::kFunction: return "function";
    case SymKind::kObject: return absl::StrCat("<", Py_TYPE(s->obj.get())->tp_name, ">");
    case SymKind::kSlice: return "slice";
    case SymKind::kShape: return "shape";
    case SymKind::kNumber: return absl::StrCat("number s", s->value, "=", ShortRepr(s->obj.get()));
    case SymKind::kRunIter: return "run-time iterator";
    case SymKind::kRunSeq:
      return absl::StrCat(Py_TYPE(s->obj.get())->tp_name, " of run-time length",
                          s->items.empty() ? "" : absl::StrCat(" (+", s->items.size(), " appended)"));
    case SymKind::kPartial: return "functools.partial";
    case SymKind::kGenManager: return "contextlib.contextmanager manager";
    case SymKind::kSet: return absl::StrCat("set (", s->keys.size(), " steps)");
    case SymKind::kSuper: return absl::StrCat("super(", reinterpret_cast<PyTypeObject*>(s->obj.get())->tp_name, ", ...)");
  }
  __builtin_unreachable();
}


absl::StatusOr<std::string> Text(PyObject* obj) {
  std::optional<std::string> text = py::Utf8(obj);
  if (!text) return Unsupported("a string that is not valid UTF-8 text (a lone surrogate?)");
  return *std::move(text);
}

absl::StatusOr<std::string> NameText(PyObject* obj) {
  DT_ASSIGN_OR_RETURN(std::string text, Text(obj));
  if (text.find('\0') != std::string::npos) return Unsupported("a name holding a NUL character");
  return text;
}

absl::StatusOr<std::string> KeywordName(PyObject* key) {
  if (!PyUnicode_Check(key)) return Raises("the traced code raises: keywords must be strings");
  return Text(key);
}

// ---------------------------------------------------------------------------------------------
// Values from the frame

absl::StatusOr<Sym> Tracer::TensorInput(PyObject* obj, SourceRef source) {
  const std::string key = source->ToString();
  if (auto it = inputs_by_source_.find(key); it != inputs_by_source_.end()) return it->second;
  // The same tensor reached another way (a parameter through its module and through the
  // optimizer's param groups) is the same value, so an in-place change through one name is seen
  // through the other, and the graph has one input per tensor; a guard keeps the names one object.
  Sym same;
  for (const auto& [value, known] : input_objects_) {
    if (known.get() != obj) continue;
    for (const auto& [known_key, sym] : inputs_by_source_) {
      if (sym->value == value && sym->source != nullptr) same = sym;
    }
  }
  if (same != nullptr) {
    guards_.Add(LeafGuard::Same(source, same->source, Here()));
    inputs_by_source_[key] = same;
    return same;
  }
  const Tensor& real = py::Unwrap(obj);
  Tensor meta(Storage::Allocate(0, Device::Meta()), real.sizes(), real.strides(), 0, real.dtype());
  guards_.Add(LeafGuard::TensorMatch(source, real, Here()));
  Sym s = MakeSym(SymKind::kTensor);
  s->value = graph_->AddInput(meta, key);
  s->meta = meta;
  value_device_[s->value] = real.device();  // guarded by TensorMatch just above
  // TensorMatch guards tracks_grad too: this entry serves only calls where autograd follows the
  // tensor, and the trace ends in a joint forward/backward split. Unless the traced code turned
  // grad mode off before the tensor entered: then nothing here records for it.
  if (TracksGrad(real)) {
    if (TracedGradMode()) {
      grad_inputs_.insert(s->value);
      grad_values_.insert(s->value);
    } else {
      untracked_grad_inputs_.insert(s->value);
    }
  }
  input_objects_[s->value] = PyRef::Borrow(obj);
  s->source = source;
  inputs_by_source_[key] = s;
  input_sources_.push_back(source);
  touched_tensors_ = true;
  return s;
}

// A local or stack slot of the segment's start state, or an item of a tuple/list held there
// (the (index, value) pairs an enumerate loop carries across a break).
static bool InSegmentState(const guards::Source& source) {
  const guards::Source* s = &source;
  while (s->kind == guards::Source::Kind::kItem) s = s->parent.get();
  return s->kind == guards::Source::Kind::kLocal || s->kind == guards::Source::Kind::kStack;
}

absl::StatusOr<Sym> Tracer::NumberSlot(ScalarInstr instr, PyRef sample, std::vector<int> deps) {
  Sym s = MakeSym(SymKind::kNumber);
  s->value = static_cast<ValueId>(scalar_program_.size());
  s->obj = sample;
  scalar_program_.push_back(std::move(instr));
  slot_samples_.push_back(std::move(sample));
  slot_syms_.push_back(s);
  slot_inputs_.push_back(std::move(deps));
  return s;
}

absl::StatusOr<Sym> Tracer::Specialize(const Sym& number) {
  for (int input : slot_inputs_[number->value]) {
    const ScalarInstr& in = scalar_program_[input];
    if (in.kind == ScalarInstr::Kind::kTensorSize) {
      if (in.a < 64 && (MarksOf(*in.source).first & (uint64_t{1} << in.a))) {
        const Provenance here = Here();
        constraint_error_ = absl::StrFormat(
            "dyntrace: %s.size(%d) was marked dynamic (dt.mark_dynamic), but line %d (%s) needs its value "
            "(%d) to compile; unmark it, or mark it static (dt.mark_static)",
            in.source->ToString(), in.a, here.line, here.instruction,
            PyLong_AsLongLong(slot_samples_[input].get()));
        return Unsupported(constraint_error_);
      }
      guards_.Add(LeafGuard::TensorSize(in.source, in.a, PyLong_AsLongLong(slot_samples_[input].get()), Here()));
    } else if (in.kind == ScalarInstr::Kind::kSequence) {
      SpecializeSequence(input);
    } else {
      guards_.Add(LeafGuard::Equals(in.source, slot_samples_[input].get(), Here()));
    }
  }
  return ConstSym(number->obj);
}

bool IsNumber(const Sym& s) {
  return s->kind == SymKind::kNumber ||
         (s->kind == SymKind::kConst && (PyLong_Check(s->obj.get()) || PyFloat_CheckExact(s->obj.get())));
}

absl::StatusOr<Sym> Tracer::NumberOp(const std::string& op, bool compare, const Sym& a, const Sym& b) {
  PyObject* x = a->obj.get();
  PyObject* y = b->obj.get();
  if (!IsNumberOp(op)) return Unsupported(absl::StrCat("operator ", op, " on a run-time number"));
  PyObject* r = ApplyNumberOp(op, x, y);
  if (r == nullptr) {
    PyErr_Clear();
    return Raises(absl::StrCat("the traced code raises on ", op));
  }
  ScalarInstr instr;
  instr.kind = compare ? ScalarInstr::Kind::kCompare : ScalarInstr::Kind::kBinary;
  instr.op = op;
  std::vector<int> deps;
  if (a->kind == SymKind::kNumber) {
    instr.a = a->value;
    deps = slot_inputs_[a->value];
  } else {
    instr.const_a = a->obj;
  }
  if (b->kind == SymKind::kNumber) {
    instr.b = b->value;
    deps.insert(deps.end(), slot_inputs_[b->value].begin(), slot_inputs_[b->value].end());
  } else {
    instr.const_b = b->obj;
  }
  return NumberSlot(std::move(instr), PyRef::Steal(r), std::move(deps));
}

namespace {

Sym WithSource(Sym s, SourceRef source) {
  s->source = std::move(source);
  return s;
}

// Objects the trace relies on by identity: singletons, functions, modules, classes, builtins.
bool GuardedByIdentity(PyObject* obj) {
  return obj == Py_None || PyBool_Check(obj) || obj == Py_Ellipsis || obj == Py_NotImplemented ||
         PyFunction_Check(obj) || py::IsOpFunction(obj) || PyModule_Check(obj) || PyType_Check(obj) ||
         PyCFunction_Check(obj) || PyObject_TypeCheck(obj, &py::DTypeType) ||
         PyObject_TypeCheck(obj, &PyMethodDescr_Type) || PyObject_TypeCheck(obj, &PyWrapperDescr_Type) ||
         py::IsDTypeInfo(obj);
}

}  // namespace

// Values only a segment that starts mid-function has in its state: run-time numbers, loop
// iterators that crossed a break, cells. Null when `obj` is none of those.
absl::StatusOr<Sym> Tracer::WrapSegmentState(PyObject* obj, const SourceRef& source) {
  const Provenance where = Here();
  if ((PyLong_CheckExact(obj) || PyFloat_CheckExact(obj)) && InSegmentState(*source)) {
    // Numbers (loop counters, .item() results) stay unspecialised: their type is guarded, their
    // value is read each run.
    guards_.Add(LeafGuard::Type(source, Py_TYPE(obj), where));
    ScalarInstr input;
    input.kind = ScalarInstr::Kind::kInput;
    input.source = source;
    const int slot = static_cast<int>(scalar_program_.size());
    return NumberSlot(std::move(input), PyRef::Borrow(obj), {slot});
  }
  if (source->kind == guards::Source::Kind::kStack && PyIter_Check(obj) && !py::IsTensor(obj)) {
    // A loop's iterator that crossed a break: FOR_ITER advances it at run time (an escape), so
    // each iteration reuses the same segments whatever is left in it.
    guards_.Add(LeafGuard::Type(source, Py_TYPE(obj), where));
    Sym it = MakeSym(SymKind::kRunIter);
    it->obj = PyRef::Borrow(obj);
    return WithSource(it, source);
  }
  return Sym();
}

// A loop iterator read back from a break (its remaining items are this segment's to unroll),
// or a cell of the segment's state (the same cell stays in place; its contents are read through
// it). Null when `obj` is neither.
absl::StatusOr<Sym> Tracer::WrapIteratorOrCell(PyObject* obj, const SourceRef& source) {
  const Provenance where = Here();
  guards::RemainingItems remaining;
  if (guards::ReadRemainingItems(obj, &remaining)) {
    guards_.Add(LeafGuard::Type(source, Py_TYPE(obj), where));
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(remaining.items) - remaining.start;
    guards_.Add(LeafGuard::Length(source, n, where));
    Sym it = WithSource(MakeSym(SymKind::kIter), source);
    it->loop_iterator = true;
    it->resumed = true;
    for (Py_ssize_t k = 0; k < n; ++k) {
      DT_ASSIGN_OR_RETURN(Sym item, Wrap(PySequence_Fast_GET_ITEM(remaining.items, remaining.start + k),
                                         guards::IterItemSource(source, static_cast<int>(k))));
      it->items.push_back(item);
    }
    return it;
  }
  if (!PyCell_Check(obj)) return Sym();
  guards_.Add(LeafGuard::Type(source, Py_TYPE(obj), where));
  Sym c = WithSource(MakeSym(SymKind::kCell), source);
  c->from_frame = true;
  c->items.push_back(nullptr);
  if (PyObject* contents = PyCell_GET(obj); contents != nullptr) {
    DT_ASSIGN_OR_RETURN(c->items[0], Wrap(contents, guards::CellContentsSource(source)));
  }
  return c;
}

namespace {

bool HasOnlyStrKeys(PyObject* dict) {
  PyObject *key, *value;
  Py_ssize_t pos = 0;
  while (PyDict_Next(dict, &pos, &key, &value)) {
    if (!PyUnicode_CheckExact(key)) return false;
  }
  return true;
}

}  // namespace

// A small, shallow tuple, list or dict of the caller: unpacked item by item, each guarded. Null
// when `obj` is not one (larger or deeper ones are opaque objects, so guards stay cheap and Wrap
// always ends).
absl::StatusOr<Sym> Tracer::WrapContainer(PyObject* obj, const SourceRef& source) {
  const bool sequence = PyTuple_CheckExact(obj) || PyList_CheckExact(obj);
  if (sequence && LengthIsDynamic(obj, source)) {
    if (auto seen = containers_by_source_.find(source->ToString()); seen != containers_by_source_.end()) {
      return seen->second;
    }
    return WrapRunSequence(obj, source);
  }
  if (wrap_depth_ >= kMaxUnpackedDepth || !(sequence || PyDict_CheckExact(obj)) ||
      PyObject_Length(obj) > kMaxUnpackedItems) {
    return Sym();
  }
  if (auto seen = containers_by_source_.find(source->ToString()); seen != containers_by_source_.end()) {
    return seen->second;  // read before through this very source
  }
  if (!sequence && !HasOnlyStrKeys(obj)) return Sym();  // read key by key (trace_keyed_dict.cc)
  WrapDepthScope nested(wrap_depth_);
  const Provenance where = Here();
  guards_.Add(LeafGuard::Type(source, Py_TYPE(obj), where));
  guards_.Add(LeafGuard::Length(source, PyObject_Length(obj), where));
  Sym s = WithSource(MakeSym(PyTuple_CheckExact(obj) ? SymKind::kTuple
                             : PyList_CheckExact(obj) ? SymKind::kList : SymKind::kDict), source);
  s->from_frame = true;
  if (!PyTuple_CheckExact(obj)) DT_RETURN_IF_ERROR(NoteCallerValue(obj, s));
  if (sequence) {
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(obj); ++i) {
      DT_ASSIGN_OR_RETURN(Sym item, Wrap(PySequence_Fast_GET_ITEM(obj, i),
                                         guards::ItemSource(source, static_cast<int>(i))));
      s->items.push_back(item);
    }
    return s;
  }
  PyObject *key, *value;
  Py_ssize_t pos = 0;
  while (PyDict_Next(obj, &pos, &key, &value)) {
    DT_ASSIGN_OR_RETURN(std::string key_text, Text(key));
    DT_ASSIGN_OR_RETURN(Sym item, Wrap(value, guards::DictItemSource(source, key_text)));
    s->keys.push_back(PyRef::Borrow(key));
    s->items.push_back(item);
  }
  return s;
}

absl::StatusOr<Sym> Tracer::Wrap(PyObject* obj, SourceRef source) {
  const Provenance where = Here();
  if (frame_.start_offset > 0) {
    DT_ASSIGN_OR_RETURN(Sym state, WrapSegmentState(obj, source));
    if (state != nullptr) return state;
  }
  if (py::IsTensor(obj)) return TensorInput(obj, source);
  DT_ASSIGN_OR_RETURN(Sym iterator_or_cell, WrapIteratorOrCell(obj, source));
  if (iterator_or_cell != nullptr) return iterator_or_cell;
  if ((PyLong_CheckExact(obj) || PyFloat_CheckExact(obj)) &&
      ((frame_.all_dynamic && InSegmentState(*source)) ||
       (frame_.float_arguments_dynamic && PyFloat_CheckExact(obj) && frame_.start_offset == 0 &&
        source->kind == guards::Source::Kind::kLocal) ||
       (frame_.dynamic_numbers != nullptr && frame_.dynamic_numbers->contains(source->ToString())))) {
    // A number whose value changed between calls: its type is guarded, its value is read each
    // run (a run-time scalar of the graph), so new values do not recompile.
    guards_.Add(LeafGuard::Type(source, Py_TYPE(obj), where));
    ScalarInstr input;
    input.kind = ScalarInstr::Kind::kInput;
    input.source = source;
    const int slot = static_cast<int>(scalar_program_.size());
    return NumberSlot(std::move(input), PyRef::Borrow(obj), {slot});
  }
  if (PyLong_CheckExact(obj) || PyFloat_CheckExact(obj) || PyUnicode_CheckExact(obj) ||
      PyBytes_CheckExact(obj)) {
    guards_.Add(LeafGuard::Type(source, Py_TYPE(obj), where));
    guards_.Add(LeafGuard::Equals(source, obj, where));
    return WithSource(ConstSym(PyRef::Borrow(obj)), source);
  }
  DT_ASSIGN_OR_RETURN(Sym container, WrapContainer(obj, source));
  if (container != nullptr) return container;
  if (PyMethod_Check(obj) && PyFunction_Check(PyMethod_GET_FUNCTION(obj))) return WrapBoundMethod(obj, source);
  if (Py_TYPE(obj) == reinterpret_cast<PyTypeObject*>(PartialType())) return WrapPartial(obj, source);
  if (GuardedByIdentity(obj)) {
    guards_.Add(LeafGuard::Identity(source, obj, where));
    const SymKind kind = PyFunction_Check(obj) ? SymKind::kFunction
                         : py::IsOpFunction(obj) ? SymKind::kOpMethod : SymKind::kConst;
    Sym s = MakeSym(kind);
    s->obj = PyRef::Borrow(obj);
    return WithSource(s, source);
  }
  // An iterator of the caller (a comprehension's `.0` when its frame is traced on its own, a
  // zip or enumerate passed in): FOR_ITER advances it at run time (an escape per item).
  if (PyIter_Check(obj)) {
    guards_.Add(LeafGuard::Type(source, Py_TYPE(obj), where));
    Sym it = MakeSym(SymKind::kRunIter);
    it->obj = PyRef::Borrow(obj);
    return WithSource(it, source);
  }
  // A plain object: its class is fixed by a guard; attributes are read (and guarded) on use.
  // Reached again another way (a with block's `__exit__.__self__` and the manager's name), it is
  // the same Sym, so a store through one name is seen through the other; a guard says both
  // sources are still one object.
  SeenObject& seen = objects_[obj];
  if (seen.sym != nullptr && seen.sym->source != nullptr) {
    guards_.Add(LeafGuard::Same(source, seen.sym->source, where));
    return seen.sym;
  }
  guards_.Add(LeafGuard::Type(source, Py_TYPE(obj), where));
  Sym s = MakeSym(SymKind::kObject);
  s->obj = PyRef::Borrow(obj);
  if (seen.sym == nullptr) seen.sym = s;
  ++seen.sources;
  DT_RETURN_IF_ERROR(NoteCallerValue(obj, s));
  return WithSource(s, source);
}

// A bound method of a Python function (a with block's __exit__ on a segment's start stack, a
// method passed as an argument): its function guarded by identity, its self wrapped as any value.
absl::StatusOr<Sym> Tracer::WrapBoundMethod(PyObject* method, const SourceRef& source) {
  if (wrap_depth_ >= kMaxUnpackedDepth) return Unsupported("a bound method nested too deep to follow");
  WrapDepthScope nested(wrap_depth_);
  guards_.Add(LeafGuard::Type(source, &PyMethod_Type, Here()));
  DT_ASSIGN_OR_RETURN(Sym function, Wrap(PyMethod_GET_FUNCTION(method), guards::MethodFuncSource(source)));
  DT_ASSIGN_OR_RETURN(Sym self, Wrap(PyMethod_GET_SELF(method), guards::MethodSelfSource(source)));
  Sym s = MakeSym(SymKind::kBoundMethod);
  s->obj = function->obj;
  s->items.push_back(std::move(self));
  return s;
}

void Tracer::GuardStillUnbound(TFrame& f, int index) {
  if (!f.is_root || index >= frame_.inputs.num_locals || !f.argument_live[index] ||
      f.locals[index] != nullptr || frame_.inputs.locals[index] != nullptr) {
    return;
  }
  PyObject* name = cpython::LocalNameObject(f.code, index);
  guards_.Add(LeafGuard::Absent(guards::LocalSource(index, py::Utf8Or(name)), Here()));
}

absl::StatusOr<Sym> Tracer::LoadLocal(TFrame& f, int index) {
  if (index < 0 || index >= static_cast<int>(f.locals.size())) return Unsupported("bad local index");
  if (f.locals[index] == nullptr && f.is_root && index < frame_.inputs.num_locals &&
      f.argument_live[index] && frame_.inputs.locals[index] != nullptr) {
    PyObject* name = cpython::LocalNameObject(f.code, index);
    DT_ASSIGN_OR_RETURN(f.locals[index],
                        Wrap(frame_.inputs.locals[index],
                             guards::LocalSource(index, py::Utf8Or(name))));
  }
  if (f.locals[index] == nullptr) {
    PyObject* name = cpython::LocalNameObject(f.code, index);
    return Raises(absl::StrCat("local variable '", py::Utf8Or(name),
                                    "' is read before assignment (the code raises)"));
  }
  return f.locals[index];
}

absl::StatusOr<Sym> Tracer::LoadGlobal(TFrame& f, const std::string& name) {
  if (Sym stored = StoredGlobal(f, name)) return stored;  // a `global` store earlier in the trace
  PyObject* value = PyDict_GetItemString(f.globals, name.c_str());
  if (value != nullptr) {
    SourceRef src = f.globals_source == nullptr ? guards::GlobalSource(name)
                                                : guards::DictItemSource(f.globals_source, name);
    return Wrap(value, src);
  }
  PyObject* builtins = PyDict_GetItemString(f.globals, "__builtins__");
  if (builtins != nullptr && PyModule_Check(builtins)) builtins = PyModule_GetDict(builtins);
  if (builtins != frame_.inputs.builtins) return Unsupported("a function with different builtins");
  value = PyDict_GetItemString(frame_.inputs.builtins, name.c_str());
  if (value == nullptr) return Raises(absl::StrCat("name '", name, "' is not defined (the code raises)"));
  // A global of that name would shadow the builtin: guard its absence through the builtin's
  // identity and the trace being re-made if globals change is out of reach, so guard both.
  // A global of the same name would shadow the builtin: guard that there is none.
  guards_.Add(LeafGuard::Absent(f.globals_source == nullptr ? guards::GlobalSource(name)
                                                            : guards::DictItemSource(f.globals_source, name),
                                Here()));
  return Wrap(value, guards::BuiltinSource(name));
}

absl::StatusOr<PyObject*> Tracer::ToPython(const Sym& s) {
  DT_RETURN_IF_ERROR(Materialise(s));
  switch (s->kind) {
    case SymKind::kNumber: {
      // Run-time ints reach an op's argument parser as TracedInts, floats as float objects of
      // their own: found again by identity, each is a run-time scalar of the graph
      // (`p.add_(g, alpha=-lr)` with a scheduler's lr).
      const bool is_int = PyLong_CheckExact(s->obj.get());
      if (traced_ints_ != nullptr && (is_int || PyFloat_CheckExact(s->obj.get()))) {
        PyRef marker = PyRef::Steal(is_int ? py::NewTracedInt(s->obj.get())
                                           : PyFloat_FromDouble(PyFloat_AS_DOUBLE(s->obj.get())));
        if (!marker) {
          PyErr_Clear();
          return Unsupported("could not pass a run-time number to an op");
        }
        (*traced_ints_)[marker.get()] = s;
        wrappers_.push_back(marker);
        return marker.get();
      }
      DT_ASSIGN_OR_RETURN(Sym c, Specialize(s));
      wrappers_.push_back(c->obj);
      return c->obj.get();
    }
    case SymKind::kConst:
    case SymKind::kOpMethod:
      if (s->kind == SymKind::kOpMethod && !s->items.empty()) break;
      return s->obj.get();
    case SymKind::kTensor: {
      PyRef w = PyRef::Steal(py::Wrap(s->meta));
      if (!w) return Unsupported("cannot wrap a meta tensor");
      sym_of_wrapper_[w.get()] = s;
      wrappers_.push_back(w);
      return w.get();
    }
    case SymKind::kTuple:
    case SymKind::kList: {
      PyRef seq = PyRef::Steal(s->kind == SymKind::kTuple ? PyTuple_New(s->items.size())
                                                          : PyList_New(s->items.size()));
      for (size_t i = 0; i < s->items.size(); ++i) {
        DT_ASSIGN_OR_RETURN(PyObject* item, ToPython(s->items[i]));
        Py_INCREF(item);
        if (s->kind == SymKind::kTuple) PyTuple_SET_ITEM(seq.get(), i, item);
        else PyList_SET_ITEM(seq.get(), i, item);
      }
      if (s->named_type) {
        seq = PyRef::Steal(MakeNamedTuple(s->named_type.get(), seq.get()));
        if (!seq) {
          PyErr_Clear();
          return Unsupported("a named result tuple could not be made");
        }
      }
      wrappers_.push_back(seq);
      return seq.get();
    }
    case SymKind::kShape: {
      DT_ASSIGN_OR_RETURN(Sym t, MaterializeShape(s));
      return ToPython(t);
    }
    case SymKind::kSlice: {
      std::vector<PyObject*> parts;
      for (const Sym& p : s->items) {
        DT_ASSIGN_OR_RETURN(PyObject* o, ToPython(p));
        parts.push_back(o);
      }
      PyRef slice = PyRef::Steal(PySlice_New(parts[0], parts[1], parts[2]));
      wrappers_.push_back(slice);
      return slice.get();
    }
    case SymKind::kDict:
    case SymKind::kNull:
    case SymKind::kIter:
    case SymKind::kCell:
    case SymKind::kBoundMethod:
    case SymKind::kFunction:
    case SymKind::kObject:
    case SymKind::kRunIter:
    case SymKind::kRunSeq:  // materialised above
    case SymKind::kGenManager:
    case SymKind::kSuper:
    case SymKind::kSet:
    case SymKind::kPartial:
      break;
  }
  return Unsupported(absl::StrCat("passing a ", Describe(s), " to a dyntrace op"));
}

absl::StatusOr<PyRef> Tracer::ConstValue(const Sym& s) {
  DT_RETURN_IF_ERROR(Materialise(s));
  switch (s->kind) {
    case SymKind::kConst: return s->obj;
    case SymKind::kNumber: {
      DT_ASSIGN_OR_RETURN(Sym c, Specialize(s));
      return c->obj;
    }
    case SymKind::kTuple: {
      PyRef t = PyRef::Steal(PyTuple_New(s->items.size()));
      for (size_t i = 0; i < s->items.size(); ++i) {
        DT_ASSIGN_OR_RETURN(PyRef item, ConstValue(s->items[i]));
        PyTuple_SET_ITEM(t.get(), i, item.Release());
      }
      // A named tuple is its class's instance (whose repr, say, is its own), never a plain tuple.
      if (s->named_type) {
        PyRef named = PyRef::Steal(MakeNamedTuple(s->named_type.get(), t.get()));
        if (!named) {
          PyErr_Clear();
          return Unsupported("making a named tuple's value");
        }
        return named;
      }
      return t;
    }
    case SymKind::kList: {
      PyRef l = PyRef::Steal(PyList_New(s->items.size()));
      for (size_t i = 0; i < s->items.size(); ++i) {
        DT_ASSIGN_OR_RETURN(PyRef item, ConstValue(s->items[i]));
        PyList_SET_ITEM(l.get(), i, item.Release());
      }
      return l;
    }
    case SymKind::kShape: {
      DT_ASSIGN_OR_RETURN(Sym t, MaterializeShape(s));
      return ConstValue(t);
    }
    case SymKind::kSet: return SetValue(s);
    case SymKind::kSlice: {
      DT_ASSIGN_OR_RETURN(PyRef a, ConstValue(s->items[0]));
      DT_ASSIGN_OR_RETURN(PyRef b, ConstValue(s->items[1]));
      DT_ASSIGN_OR_RETURN(PyRef c, ConstValue(s->items[2]));
      return PyRef::Steal(PySlice_New(a.get(), b.get(), c.get()));
    }
    case SymKind::kTensor:
    case SymKind::kDict:
    case SymKind::kNull:
    case SymKind::kIter:
    case SymKind::kCell:
    case SymKind::kBoundMethod:
    case SymKind::kOpMethod:
    case SymKind::kFunction:
    case SymKind::kObject:
    case SymKind::kRunIter:
    case SymKind::kRunSeq:  // materialised above
    case SymKind::kGenManager:
    case SymKind::kSuper:
    case SymKind::kPartial:
      return Unsupported(absl::StrCat("using a ", Describe(s), " as a Python value"));
  }
}

}  // namespace dt::interpreter::trace
