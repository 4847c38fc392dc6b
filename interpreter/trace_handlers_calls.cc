// interpreter/trace_handlers_calls.cc: call instructions and MAKE_FUNCTION.
#include <Python.h>

#include <bit>
#include <string>
#include <utility>
#include <vector>

#include "interpreter/tracer_internal.h"
#include "runtime/errors.h"

namespace dt::interpreter::trace {

absl::Status Tracer::DoKwNames(TFrame& f, const Instr& in) {
  // The argument indexes co_consts (dis shows the names only in argrepr on 3.11).
  f.kw_names = PyRef::Borrow(PyTuple_GET_ITEM(f.code->co_consts, in.arg));
  f.kw_names_offset = in.offset;
  return absl::OkStatus();
}

absl::Status Tracer::DoCall(TFrame& f, const Instr& in) {
  const int argc = in.arg;
  DT_RETURN_IF_ERROR(f.Need(argc + 2, in));
  auto& st = f.stack;
  std::vector<Sym> all(st.end() - argc, st.end());
  st.resize(st.size() - argc);
  Sym second = f.Pop();
  Sym first = f.Pop();
  // [NULL, callable, args] or [callable, self, args] (a method call).
  Sym callable = second;
  if (first->kind != SymKind::kNull) {
    callable = first;
    all.insert(all.begin(), second);
  }
  Kwargs kwargs;
  if (f.kw_names) {
    const Py_ssize_t nkw = PyTuple_GET_SIZE(f.kw_names.get());
    for (Py_ssize_t i = 0; i < nkw; ++i) {
      DT_ASSIGN_OR_RETURN(std::string name, Text(PyTuple_GET_ITEM(f.kw_names.get(), i)));
      kwargs.emplace_back(std::move(name), all[all.size() - nkw + i]);
    }
    all.resize(all.size() - nkw);
    f.kw_names = PyRef();
  }
  DT_ASSIGN_OR_RETURN(Sym r, CallSym(callable, std::move(all), std::move(kwargs)));
  st.push_back(r);
  return absl::OkStatus();
}

absl::StatusOr<Kwargs> Tracer::KeywordArguments(const Sym& kw) {
  Kwargs kwargs;
  if (kw->kind == SymKind::kConst && PyDict_Check(kw->obj.get())) {
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(kw->obj.get(), &pos, &k, &v)) {
      DT_ASSIGN_OR_RETURN(std::string name, KeywordName(k));
      kwargs.emplace_back(std::move(name), ConstSym(PyRef::Borrow(v)));
    }
    return kwargs;
  }
  if (kw->kind != SymKind::kDict) return Unsupported("**kwargs that is not a dict");
  for (size_t i = 0; i < kw->keys.size(); ++i) {
    DT_ASSIGN_OR_RETURN(std::string name, KeywordName(kw->keys[i].get()));
    kwargs.emplace_back(std::move(name), kw->items[i]);
  }
  return kwargs;
}

absl::Status Tracer::DoCallFunctionEx(TFrame& f, const Instr& in) {
  DT_RETURN_IF_ERROR(f.Need(3 + (in.arg & 1), in));
  Sym kw = (in.arg & 1) ? f.Pop() : nullptr;
  Sym args = f.Pop();
  Sym callable = f.Pop();
  f.Pop();  // the NULL (3.11, 3.12) below the callable
  DT_ASSIGN_OR_RETURN(std::vector<Sym> positional, Iterate(args));
  Kwargs kwargs;
  if (kw != nullptr) {
    DT_ASSIGN_OR_RETURN(kwargs, KeywordArguments(kw));
  }
  DT_ASSIGN_OR_RETURN(Sym r, CallSym(callable, std::move(positional), std::move(kwargs)));
  f.stack.push_back(r);
  return absl::OkStatus();
}

absl::Status Tracer::DoMakeFunction(TFrame& f, const Instr& in) {
  // A made function is rebuilt from code, defaults, kw-defaults and closure at a break; its
  // annotations would be lost, so CPython makes functions that have any.
  if (in.arg & 0x04) return Unsupported("MAKE_FUNCTION of a function with annotations");
  DT_RETURN_IF_ERROR(f.Need(1 + std::popcount(static_cast<unsigned>(in.arg & 0x0f)), in));
  Sym code = f.Pop();
  if (code->kind != SymKind::kConst || !PyCode_Check(code->obj.get())) {
    return Unsupported("MAKE_FUNCTION without a code object");
  }
  Sym fn = MakeSym(SymKind::kFunction);
  fn->obj = code->obj;
  fn->globals = f.globals;
  fn->source = nullptr;
  if (in.arg & 0x08) fn->closure = f.Pop();
  if (in.arg & 0x02) fn->kwdefaults = f.Pop();
  if (in.arg & 0x01) fn->defaults = f.Pop();
  f.stack.push_back(fn);
  return absl::OkStatus();
}

}  // namespace dt::interpreter::trace
