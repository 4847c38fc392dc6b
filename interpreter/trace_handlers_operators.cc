// interpreter/trace_handlers_operators.cc: operator instructions (binary, unary, comparisons,
// identity, membership) and string formatting.
#include <Python.h>

#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "interpreter/cpython_frame.h"
#include "interpreter/sym_dict.h"
#include "interpreter/tracer_internal.h"
#include "runtime/errors.h"

namespace dt::interpreter::trace {
namespace {

// Numbers, strings and tuples are guarded by value, not identity: whether two equal ones are one
// object is only known at run time (None, bools, dtypes are singletons).
bool GuardedByValue(PyObject* o) {
  return PyLong_CheckExact(o) || PyFloat_CheckExact(o) || PyUnicode_CheckExact(o) || PyBytes_CheckExact(o) ||
         PyComplex_CheckExact(o) || PyTuple_CheckExact(o) || PySlice_Check(o) || PyRange_Check(o);
}

bool IsNone(const Sym& s) { return s->kind == SymKind::kConst && s->obj.get() == Py_None; }

// `a is b` when the trace can know it.
absl::StatusOr<bool> SameObject(const Sym& a, const Sym& b) {
  if (a == b) return true;
  if (a->kind == SymKind::kConst && b->kind == SymKind::kConst) {
    if (GuardedByValue(a->obj.get()) && GuardedByValue(b->obj.get())) {
      return Unsupported("`is` between two values guarded by equality (identity is only known at run time)");
    }
    return a->obj.get() == b->obj.get();
  }
  if (IsNone(a) || IsNone(b)) {
    // The other side is a tensor, container or function: never None.
    const Sym& other = IsNone(a) ? b : a;
    if (other->kind == SymKind::kNull) return Unsupported("`is` on NULL");
    return false;
  }
  if (a->kind == SymKind::kTensor && b->kind == SymKind::kTensor) {
    if (a->value == b->value) return true;
    return Unsupported("`is` between two tensors");
  }
  return Unsupported("`is` between non-constant values");
}

PyRef Bool(bool b) { return PyRef::Borrow(b ? Py_True : Py_False); }

}  // namespace

absl::Status Tracer::DoBinaryOp(TFrame& f, const Instr& in) {
  DT_RETURN_IF_ERROR(f.Need(2, in));
  std::string name = in.argrepr;
  if (name.empty() && in.arg < static_cast<int>(f.decoded->binary_ops.size())) name = f.decoded->binary_ops[in.arg];
  Sym b = f.Pop();
  Sym a = f.Pop();
  DT_ASSIGN_OR_RETURN(Sym r, BinaryOp(name, a, b));
  f.stack.push_back(r);
  return absl::OkStatus();
}

absl::Status Tracer::DoUnary(TFrame& f, const Instr& in) {
  DT_RETURN_IF_ERROR(f.Need(1, in));
  Sym a = f.Pop();
  if (a->kind == SymKind::kTensor) {
    if (in.op == Op::kUnaryPositive) {
      f.stack.push_back(a);
      return absl::OkStatus();
    }
    if (in.op == Op::kUnaryInvert && a->meta.dtype() != DType::kBool) return Unsupported("~ on a non-bool tensor");
    DT_ASSIGN_OR_RETURN(Sym r, EmitNamed(in.op == Op::kUnaryNegative ? "neg" : "logical_not", {a}));
    f.stack.push_back(r);
    return absl::OkStatus();
  }
  if (a->kind == SymKind::kNumber && in.op == Op::kUnaryNegative) {
    DT_ASSIGN_OR_RETURN(Sym r, NumberOp("*", false, a, ConstSym(PyRef::Steal(PyLong_FromLong(-1)))));
    f.stack.push_back(r);
    return absl::OkStatus();
  }
  DT_ASSIGN_OR_RETURN(PyRef c, ConstValue(a));
  if (!IsPureConstType(c.get())) return Unsupported("unary operator on a non-constant");
  PyObject* r = in.op == Op::kUnaryNegative ? PyNumber_Negative(c.get())
                : in.op == Op::kUnaryPositive ? PyNumber_Positive(c.get()) : PyNumber_Invert(c.get());
  if (r == nullptr) {
    PyErr_Clear();
    return Raises("the traced code raises in a unary operator");
  }
  f.stack.push_back(ConstSym(PyRef::Steal(r)));
  return absl::OkStatus();
}

absl::Status Tracer::DoUnaryNot(TFrame& f, const Instr& in) {
  DT_RETURN_IF_ERROR(f.Need(1, in));
  DT_ASSIGN_OR_RETURN(bool t, Truth(f.stack.back()));
  f.Pop();
  f.stack.push_back(ConstSym(Bool(!t)));
  return absl::OkStatus();
}

absl::Status Tracer::DoCallIntrinsic1(TFrame& f, const Instr& in) {
  DT_RETURN_IF_ERROR(f.Need(1, in));
  if (in.argrepr == "INTRINSIC_LIST_TO_TUPLE") return DoListToTuple(f, in);
  if (in.argrepr != "INTRINSIC_UNARY_POSITIVE") {
    return Unsupported(absl::StrCat("CALL_INTRINSIC_1 ", in.argrepr));
  }
  Sym a = f.Pop();
  if (a->kind == SymKind::kTensor) {
    f.stack.push_back(a);
    return absl::OkStatus();
  }
  DT_ASSIGN_OR_RETURN(PyRef c, ConstValue(a));
  PyObject* r = PyNumber_Positive(c.get());
  if (r == nullptr) {
    PyErr_Clear();
    return Raises("the traced code raises in unary +");
  }
  f.stack.push_back(ConstSym(PyRef::Steal(r)));
  return absl::OkStatus();
}

absl::Status Tracer::DoCompareOp(TFrame& f, const Instr& in) {
  DT_RETURN_IF_ERROR(f.Need(2, in));
  DT_ASSIGN_OR_RETURN(std::string op, Text(in.argval.get()));
  Sym b = f.Pop();
  Sym a = f.Pop();
  DT_ASSIGN_OR_RETURN(Sym r, Compare(op, a, b));
  f.stack.push_back(r);
  return absl::OkStatus();
}

absl::Status Tracer::DoIsOp(TFrame& f, const Instr& in) {
  DT_RETURN_IF_ERROR(f.Need(2, in));
  Sym b = f.Pop();
  Sym a = f.Pop();
  absl::StatusOr<bool> same = SameObject(a, b);
  if (!same.ok()) {
    DT_ASSIGN_OR_RETURN(std::optional<bool> known, KnownIdentity(a, b));
    if (!known) return same.status();
    same = *known;
  }
  f.stack.push_back(ConstSym(Bool(*same != (in.arg == 1))));
  return absl::OkStatus();
}

namespace {

// Kinds whose values are never True, False or Ellipsis (None is IsNone's).
bool NeverASingleton(SymKind kind) {
  switch (kind) {
    case SymKind::kTensor:
    case SymKind::kTuple:
    case SymKind::kList:
    case SymKind::kDict:
    case SymKind::kIter:
    case SymKind::kBoundMethod:
    case SymKind::kOpMethod:
    case SymKind::kFunction:
    case SymKind::kObject:
    case SymKind::kSlice:
    case SymKind::kShape:
    case SymKind::kRunIter:
    case SymKind::kSuper:
    case SymKind::kSet:
    case SymKind::kPartial:
    case SymKind::kGenManager:
    case SymKind::kRunSeq: return true;
    case SymKind::kConst:
    case SymKind::kNull:
    case SymKind::kCell:
    case SymKind::kNumber: return false;  // a run-time number may be a bool
  }
  return false;
}

bool IsSingleton(const Sym& s) {
  return s->kind == SymKind::kConst &&
         (s->obj.get() == Py_True || s->obj.get() == Py_False || s->obj.get() == Py_Ellipsis);
}

}  // namespace

// `a is b` where SameObject cannot say from the values alone, but the trace knows the objects'
// identities: a singleton against a value of another kind; a list, dict, set or object the trace
// made (a new object, one Sym per object) against any other Sym; a tensor an op made (a new
// object: ops that return their operand give back its Sym) against another; and two values of the
// caller, whose identity now is guarded (Same or NotSame). Nullopt when it does not know.
absl::StatusOr<std::optional<bool>> Tracer::KnownIdentity(const Sym& a, const Sym& b) {
  if ((IsSingleton(a) && NeverASingleton(b->kind)) || (IsSingleton(b) && NeverASingleton(a->kind))) return false;
  auto made_here = [&](const Sym& s) {
    switch (s->kind) {
      case SymKind::kList:
      case SymKind::kDict:
      case SymKind::kSet: return s->source == nullptr && !s->from_frame && CallerObject(s) == nullptr;
      case SymKind::kObject: return s->made_by_trace;
      case SymKind::kTensor: return s->value >= 0 && graph_->value(s->value).producer >= 0;
      default: return false;
    }
  };
  const bool comparable = a->kind == b->kind || (a->kind != SymKind::kTensor && b->kind != SymKind::kTensor &&
                                                  NeverASingleton(a->kind) && NeverASingleton(b->kind));
  if (a != b && comparable && (made_here(a) || made_here(b))) {
    if (a->kind != SymKind::kTensor || a->value != b->value) return false;
  }
  // Two values of the caller, each read from where the guards can find it again.
  const bool callers = (a->kind == SymKind::kTensor && b->kind == SymKind::kTensor) ||
                       (a->kind == SymKind::kObject && b->kind == SymKind::kObject);
  if (callers && a->source != nullptr && b->source != nullptr && !made_here(a) && !made_here(b)) {
    PyObject* x = a->source->Resolve(frame_.inputs);
    PyObject* y = b->source->Resolve(frame_.inputs);
    if (x == nullptr || y == nullptr) return std::nullopt;
    const bool same = x == y;
    guards_.Add(same ? LeafGuard::Same(a->source, b->source, Here()) : LeafGuard::NotSame(a->source, b->source, Here()));
    return same;
  }
  return std::nullopt;
}

absl::StatusOr<PyRef> Tracer::DictKey(const Sym& s) {
  if (s->kind != SymKind::kTensor) return ConstValue(s);
  for (const auto& [tensor, key] : tensor_keys_) {
    if (tensor == s) return key;
    DT_ASSIGN_OR_RETURN(std::optional<bool> same, KnownIdentity(tensor, s));
    if (!same.has_value()) return Unsupported("a tensor as a dict key that the trace cannot tell from another one");
    if (*same) return key;
  }
  PyRef key = PyRef::Steal(PyObject_CallNoArgs(reinterpret_cast<PyObject*>(&PyBaseObject_Type)));
  if (!key) {
    PyErr_Clear();
    return Unsupported("a placeholder for a tensor dict key");
  }
  tensor_keys_.emplace_back(s, key);
  return key;
}

bool Tracer::IsTensorKey(PyObject* key) const {
  for (const auto& entry : tensor_keys_) {
    if (entry.second.get() == key) return true;
  }
  return false;
}

Sym Tracer::KeySym(const PyRef& key) {
  for (const auto& [tensor, k] : tensor_keys_) {
    if (k.get() == key.get()) return tensor;
  }
  return ConstSym(key);
}

absl::StatusOr<bool> Tracer::Contains(const Sym& container, const Sym& item) {
  if (container->kind == SymKind::kSet) return SetContains(container, item);
  if (IsKeyedCallerDict(container)) {
    DT_ASSIGN_OR_RETURN(std::optional<Sym> found, KeyedLookup(container, item));
    return found.has_value();
  }
  DT_ASSIGN_OR_RETURN(PyRef key, container->kind == SymKind::kDict ? DictKey(item) : ConstValue(item));
  if (container->kind == SymKind::kDict) {
    DT_ASSIGN_OR_RETURN(std::optional<size_t> at, DictFind(*container, key.get()));
    return at.has_value();
  }
  if (container->kind == SymKind::kTuple || container->kind == SymKind::kList) {
    bool found = false;
    for (const Sym& s : container->items) {
      DT_ASSIGN_OR_RETURN(PyRef c, ConstValue(s));
      if (!IsPureConstType(c.get()) && c.get() != key.get()) return Unsupported("`in` over non-constant items");
      found |= PyObject_RichCompareBool(c.get(), key.get(), Py_EQ) == 1;
      PyErr_Clear();
    }
    return found;
  }
  DT_ASSIGN_OR_RETURN(PyRef c, ConstValue(container));
  if (!IsPureConstType(c.get())) return Unsupported("`in` on a non-constant container");
  const int r = PySequence_Contains(c.get(), key.get());
  if (r < 0) {
    PyErr_Clear();
    return Raises("the traced code raises in `in`");
  }
  return r == 1;
}

absl::Status Tracer::DoContainsOp(TFrame& f, const Instr& in) {
  DT_RETURN_IF_ERROR(f.Need(2, in));
  Sym container = f.Pop();
  Sym item = f.Pop();
  DT_ASSIGN_OR_RETURN(const bool found, Contains(container, item));
  f.stack.push_back(ConstSym(Bool(found != (in.arg == 1))));
  return absl::OkStatus();
}

absl::Status Tracer::DoFormatValue(TFrame& f, const Instr& in) {
  DT_RETURN_IF_ERROR(f.Need((in.arg & 0x04) ? 2 : 1, in));
  Sym spec = (in.arg & 0x04) ? f.Pop() : nullptr;
  Sym value = f.Pop();
  DT_ASSIGN_OR_RETURN(Sym text, Format(value, in.arg & 0x03, spec));
  f.stack.push_back(std::move(text));
  return absl::OkStatus();
}

// `format(value, spec)` after a conversion (0 none, 1 str, 2 repr, 3 ascii), as an f-string's
// FORMAT_VALUE and str.format's fields do it.
absl::StatusOr<Sym> Tracer::Format(Sym value, int conversion, const Sym& spec) {
  if (value->kind == SymKind::kObject) {
    // `{obj!r}`, `{obj!s}`, and `{obj}` where the class leaves __format__ to object (which is
    // str() for an empty spec): the object's Python __repr__/__str__ is inlined.
    static PyObject* const format_name = PyUnicode_InternFromString("__format__");
    const bool empty_spec = spec == nullptr || (spec->kind == SymKind::kConst && PyUnicode_CheckExact(spec->obj.get()) &&
                                                PyUnicode_GET_LENGTH(spec->obj.get()) == 0);
    const bool plain_format = conversion == 0 && empty_spec &&
                              cpython::LookupOnType(Py_TYPE(value->obj.get()), format_name) ==
                                  cpython::LookupOnType(&PyBaseObject_Type, format_name);
    if (conversion == 1 || conversion == 2 || plain_format) {
      DT_ASSIGN_OR_RETURN(Sym text, ObjectText(value, conversion == 2));
      if (text != nullptr) {
        value = text;
        conversion = 0;
      }
    }
  }
  DT_ASSIGN_OR_RETURN(PyRef c, ConstValue(value));
  if (!IsPureConstType(c.get()) && !IsTraceException(value)) return Unsupported("formatting a non-constant value");
  PyRef converted = c;
  switch (conversion) {
    case 1: converted = PyRef::Steal(PyObject_Str(c.get())); break;
    case 2: converted = PyRef::Steal(PyObject_Repr(c.get())); break;
    case 3: converted = PyRef::Steal(PyObject_ASCII(c.get())); break;
    default: break;
  }
  PyRef spec_obj = spec ? ConstValue(spec).value_or(PyRef()) : PyRef();
  PyRef r = converted ? PyRef::Steal(PyObject_Format(converted.get(), spec_obj.get())) : PyRef();
  if (!r) return PythonError("the traced code raises in an f-string");
  return ConstSym(r);
}

absl::Status Tracer::DoBuildString(TFrame& f, const Instr& in) {
  DT_RETURN_IF_ERROR(f.Need(in.arg, in));
  // Joined as Python strings, as CPython does: text need not be valid UTF-8 (a lone surrogate)
  // and may hold NULs.
  PyRef parts = PyRef::Steal(PyTuple_New(in.arg));
  if (!parts) {
    PyErr_Clear();
    return Unsupported("out of memory building a string");
  }
  for (int i = 0; i < in.arg; ++i) {
    DT_ASSIGN_OR_RETURN(PyRef c, ConstValue(f.stack[f.stack.size() - in.arg + i]));
    if (!PyUnicode_CheckExact(c.get())) return Unsupported("BUILD_STRING of a non-string");
    PyTuple_SET_ITEM(parts.get(), i, c.Release());
  }
  PyRef empty = PyRef::Steal(PyUnicode_FromStringAndSize(nullptr, 0));
  PyRef joined = empty ? PyRef::Steal(PyUnicode_Join(empty.get(), parts.get())) : PyRef();
  if (!joined) {
    PyErr_Clear();
    return Unsupported("BUILD_STRING failed");
  }
  f.stack.resize(f.stack.size() - in.arg);
  f.stack.push_back(ConstSym(std::move(joined)));
  return absl::OkStatus();
}

}  // namespace dt::interpreter::trace
