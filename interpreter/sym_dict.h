// interpreter/sym_dict.h: key lookup and insertion for symbolic dicts (SymKind::kDict).
//
// A symbolic dict keeps its keys (trace-time constants) and values (Syms) in insertion order.
// Every lookup and every insertion goes through this file, so key equality is decided in one
// place, and decided as CPython decides it: equal hashes, then identity or ==. So 1, 1.0 and True
// are one key, and storing under an existing key keeps the first key object and its position
// (`{1: "a", True: "b"}` is `{1: "b"}`).
//
// Hashing or comparing a key of an arbitrary type could run user code or raise at trace time, and
// the trace could not guard what that code did. Only keys whose hash and == are known to be pure
// (None, bool, int, str, bytes, non-NaN float and complex, tuples of those, and objects that keep
// object's identity hash and ==) are decided here; any other key gives an Unimplemented status,
// the tracer's "cannot capture" signal, so the graph breaks and CPython runs the instruction.
//
//   DT_ASSIGN_OR_RETURN(std::optional<size_t> i, DictFind(*d, key.get()));
//   if (!i) return Unsupported("the traced code raises KeyError");
//   return d->items[*i];
#ifndef DYNTRACE_INTERPRETER_SYM_DICT_H_
#define DYNTRACE_INTERPRETER_SYM_DICT_H_

#include <Python.h>

#include <optional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "interpreter/py_ref.h"
#include "interpreter/symbolic.h"

namespace dt::interpreter::trace {

// The position of `key` in `dict`'s keys, or nullopt when absent.
// REQUIRES: dict.kind == SymKind::kDict.
[[nodiscard]] absl::StatusOr<std::optional<size_t>> DictFind(const SymValue& dict, PyObject* key);

// dict[key] = value with CPython's semantics: an equal key keeps its object and position and
// gets the new value; a new key is appended. The caller records the mutation (the tracer's undo
// journal) before calling. REQUIRES: dict.kind == SymKind::kDict.
[[nodiscard]] absl::Status DictInsert(SymValue& dict, py::PyRef key, Sym value);

}  // namespace dt::interpreter::trace

#endif  // DYNTRACE_INTERPRETER_SYM_DICT_H_
