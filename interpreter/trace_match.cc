// interpreter/trace_match.cc: the instructions `match` statements compile to: MATCH_SEQUENCE,
// MATCH_MAPPING, GET_LEN, MATCH_KEYS and MATCH_CLASS. Literal and value patterns compile to
// comparisons, captures and `**rest` to stores and dict operations the tracer already follows.
// Each answer is decided as CPython decides it: sequence and mapping by the subject type's
// flags, keys by the dict's own lookup, classes by isinstance, __match_args__ and attribute reads.
#include <Python.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "interpreter/py_types.h"
#include "interpreter/sym_dict.h"
#include "interpreter/tracer_internal.h"

namespace dt::interpreter::trace {
namespace {

Sym Bool(bool b) { return ConstSym(PyRef::Borrow(b ? Py_True : Py_False)); }

// Builtins whose class pattern with one positional subpattern matches the subject itself.
bool MatchesSelf(PyObject* cls) {
  for (PyTypeObject* t : {&PyBool_Type, &PyByteArray_Type, &PyBytes_Type, &PyDict_Type, &PyFloat_Type,
                          &PyFrozenSet_Type, &PyLong_Type, &PyList_Type, &PySet_Type, &PyUnicode_Type, &PyTuple_Type}) {
    if (cls == reinterpret_cast<PyObject*>(t)) return true;
  }
  return false;
}

}  // namespace

// The subject's type flags (Py_TPFLAGS_SEQUENCE or Py_TPFLAGS_MAPPING), as CPython reads them.
absl::StatusOr<bool> Tracer::HasTypeFlag(const Sym& s, unsigned long flag) {
  if (s->kind == SymKind::kShape) {
    DT_ASSIGN_OR_RETURN(Sym t, MaterializeShape(s));
    return HasTypeFlag(t, flag);
  }
  // Numbers and functions are neither sequences nor mappings, whatever their exact type.
  if (s->kind == SymKind::kNumber || s->kind == SymKind::kFunction || s->kind == SymKind::kBoundMethod ||
      s->kind == SymKind::kOpMethod) {
    return false;
  }
  PyTypeObject* type = KnownTypeOf(s);
  if (type == nullptr) return Unsupported(absl::StrCat("match on a ", Describe(s)));
  return PyType_HasFeature(type, flag);
}

// [subject] -> [subject, is it a sequence / a mapping]
absl::Status Tracer::DoMatchKind(TFrame& f, const Instr& in) {
  DT_RETURN_IF_ERROR(f.Need(1, in));
  DT_ASSIGN_OR_RETURN(const bool is,
                      HasTypeFlag(f.stack.back(), in.op == Op::kMatchSequence ? Py_TPFLAGS_SEQUENCE : Py_TPFLAGS_MAPPING));
  f.stack.push_back(Bool(is));
  return absl::OkStatus();
}

absl::Status Tracer::DoGetLen(TFrame& f, const Instr& in) {
  DT_RETURN_IF_ERROR(f.Need(1, in));
  DT_ASSIGN_OR_RETURN(Sym n, BuiltinLen(f.stack.back()));
  if (n == nullptr) return Unsupported(absl::StrCat("len() of a ", Describe(f.stack.back()), " in a match"));
  f.stack.push_back(std::move(n));
  return absl::OkStatus();
}

// [dict, keys] -> [dict, keys, values of those keys (a tuple), or None when one is missing]
absl::Status Tracer::DoMatchKeys(TFrame& f, const Instr& in) {
  DT_RETURN_IF_ERROR(f.Need(2, in));
  const Sym& subject = f.stack[f.stack.size() - 2];
  DT_ASSIGN_OR_RETURN(PyRef keys, ConstValue(f.stack.back()));
  if (subject->kind != SymKind::kDict || !PyTuple_Check(keys.get())) {
    return Unsupported(absl::StrCat("a mapping pattern on a ", Describe(subject)));
  }
  Sym values = MakeSym(SymKind::kTuple);
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(keys.get()); ++i) {
    DT_ASSIGN_OR_RETURN(std::optional<size_t> at, DictFind(*subject, PyTuple_GET_ITEM(keys.get(), i)));
    if (!at.has_value()) {
      f.stack.push_back(ConstSym(PyRef::Borrow(Py_None)));
      return absl::OkStatus();
    }
    values->items.push_back(subject->items[*at]);
  }
  f.stack.push_back(std::move(values));
  return absl::OkStatus();
}

// The attribute names a class pattern reads: `count` positional ones from __match_args__, then
// the keyword ones. Empty with `self` set when the pattern matches the subject itself.
absl::StatusOr<std::vector<PyRef>> Tracer::MatchClassNames(const Sym& cls, int count, PyObject* keywords, bool& self) {
  std::vector<PyRef> names;
  self = false;
  if (count > 0 && MatchesSelf(cls->obj.get())) {
    if (count > 1) return Raises("the traced code raises TypeError: too many positional sub-patterns");
    self = true;
  } else if (count > 0) {
    DT_ASSIGN_OR_RETURN(Sym match_args, GetAttr(cls, "__match_args__"));
    DT_ASSIGN_OR_RETURN(PyRef args, ConstValue(match_args));
    if (!PyTuple_Check(args.get()) || PyTuple_GET_SIZE(args.get()) < count) {
      return Raises("the traced code raises TypeError: __match_args__ does not cover the positional patterns");
    }
    for (int i = 0; i < count; ++i) names.push_back(PyRef::Borrow(PyTuple_GET_ITEM(args.get(), i)));
  }
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(keywords); ++i) names.push_back(PyRef::Borrow(PyTuple_GET_ITEM(keywords, i)));
  for (size_t i = 0; i < names.size(); ++i) {
    if (!PyUnicode_Check(names[i].get())) return Raises("the traced code raises TypeError: a non-str match attribute");
    for (size_t j = 0; j < i; ++j) {
      if (PyUnicode_Compare(names[i].get(), names[j].get()) == 0) {
        return Raises("the traced code raises TypeError: an attribute matched twice");
      }
    }
  }
  return names;
}

// [subject, class, keyword names] -> the attributes (a tuple), or None when it does not match.
absl::Status Tracer::DoMatchClass(TFrame& f, const Instr& in) {
  DT_RETURN_IF_ERROR(f.Need(3, in));
  const Sym subject = f.stack[f.stack.size() - 3];
  const Sym cls = f.stack[f.stack.size() - 2];
  DT_ASSIGN_OR_RETURN(PyRef keywords, ConstValue(f.stack.back()));
  if (cls->kind != SymKind::kConst || !PyType_Check(cls->obj.get()) || !PyTuple_Check(keywords.get())) {
    return Unsupported("a class pattern whose class the trace does not know");
  }
  DT_ASSIGN_OR_RETURN(Sym is_instance, BuiltinIsinstance(subject, cls));
  Sym result = ConstSym(PyRef::Borrow(Py_None));
  if (is_instance->obj.get() == Py_True) {
    bool self = false;
    DT_ASSIGN_OR_RETURN(std::vector<PyRef> names, MatchClassNames(cls, in.arg, keywords.get(), self));
    result = MakeSym(SymKind::kTuple);
    if (self) result->items.push_back(subject);
    for (const PyRef& name : names) {
      DT_ASSIGN_OR_RETURN(const std::string text, NameText(name.get()));
      DT_ASSIGN_OR_RETURN(Sym attr, GetAttr(subject, text));
      result->items.push_back(std::move(attr));
    }
  }
  f.stack.resize(f.stack.size() - 3);
  f.stack.push_back(std::move(result));
  return absl::OkStatus();
}

}  // namespace dt::interpreter::trace
