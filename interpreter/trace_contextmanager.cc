// interpreter/trace_contextmanager.cc: `with` over a @contextlib.contextmanager function.
//
// Calling the decorated function makes a kGenManager Sym (the generator function and its
// arguments) instead of contextlib's _GeneratorContextManager. BEFORE_WITH runs the generator's
// frame up to its first yield (what `as` binds) and keeps that frame suspended; the block's
// closing `__exit__(None, None, None)` runs it on from there, and it must then finish, as
// contextlib requires ("generator didn't stop" otherwise). So setup, body and teardown run in
// CPython's order, `try`/`finally` around the yield included. No real generator can be made
// suspended at a yield, so such a manager never crosses a graph break: a break while it is alive
// (in the body, or a raise there) leaves the whole segment to CPython, which runs contextlib's
// own code and the exception path.
#include <Python.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "interpreter/tracer_internal.h"

namespace dt::interpreter::trace {
namespace {

// SymValue::consumed of a kGenManager: how far its with block got.
constexpr size_t kNotEntered = 0;
constexpr size_t kEntered = 1;
constexpr size_t kExited = 2;

}  // namespace

bool IsContextManagerHelper(PyObject* fn) {
  if (!PyFunction_Check(fn)) return false;
  PyObject* contextlib = PyDict_GetItemString(PyImport_GetModuleDict(), "contextlib");
  if (contextlib == nullptr || !PyModule_Check(contextlib) || PyFunction_GET_GLOBALS(fn) != PyModule_GetDict(contextlib)) {
    return false;
  }
  PyObject* closure = PyFunction_GET_CLOSURE(fn);
  auto* code = reinterpret_cast<PyCodeObject*>(PyFunction_GET_CODE(fn));
  return closure != nullptr && PyTuple_GET_SIZE(closure) == 1 &&
         PyUnicode_CompareWithASCIIString(code->co_qualname, "contextmanager.<locals>.helper") == 0;
}

// REQUIRES: IsContextManagerHelper(helper->obj).
absl::StatusOr<Sym> Tracer::MakeGeneratorManager(const Sym& helper, std::vector<Sym> args, Kwargs kwargs) {
  if (helper->source == nullptr) return Unsupported("a contextlib.contextmanager function without a source");
  PyObject* func = PyCell_GET(PyTuple_GET_ITEM(PyFunction_GET_CLOSURE(helper->obj.get()), 0));
  if (func == nullptr || !PyFunction_Check(func) ||
      !(reinterpret_cast<PyCodeObject*>(PyFunction_GET_CODE(func))->co_flags & CO_GENERATOR)) {
    return Unsupported("contextlib.contextmanager of something other than a generator function");
  }
  DT_ASSIGN_OR_RETURN(Sym generator_function, Wrap(func, guards::FuncCellSource(helper->source, 0, "func")));
  // The arguments are bound now, as calling the generator function binds them (a TypeError
  // is raised by the call, not by the with block).
  auto frame = std::make_unique<TFrame>();
  DT_RETURN_IF_ERROR(PrepareFrame(generator_function, std::move(args), std::move(kwargs), *frame));
  frame->suspend_at_yield = true;
  Sym manager = MakeSym(SymKind::kGenManager);
  manager->obj = PyRef::Borrow(func);
  manager->items.push_back(std::move(generator_function));
  manager->position = manager_frames_.size();
  manager->consumed = kNotEntered;
  manager_frames_.push_back(std::move(frame));
  return manager;
}

absl::StatusOr<Sym> Tracer::RunToYield(TFrame& f) {
  TFrame* saved = current_;
  current_ = &f;
  auto result = RunFrame(f);
  current_ = saved;
  return result;
}

// BEFORE_WITH: the generator's frame, run to its first yield.
absl::StatusOr<Sym> Tracer::EnterGeneratorManager(const Sym& manager) {
  if (manager->consumed != kNotEntered) return Unsupported("a contextlib.contextmanager manager entered twice");
  TFrame& f = *manager_frames_.at(manager->position);
  f.caller = current_;
  f.depth = current_ == nullptr ? 0 : current_->depth + 1;
  DT_ASSIGN_OR_RETURN(Sym yielded, RunToYield(f));
  if (!f.suspended) return Raises("the traced code raises RuntimeError: generator didn't yield");
  Mutating(manager);
  manager->consumed = kEntered;
  return yielded;
}

// The block's closing __exit__(None, None, None): the generator runs on from its yield to its end.
absl::StatusOr<Sym> Tracer::ExitGeneratorManager(const Sym& manager, const std::vector<Sym>& args) {
  for (const Sym& a : args) {
    if (a->kind != SymKind::kConst || a->obj.get() != Py_None) {
      return Unsupported("__exit__ of a contextlib.contextmanager manager called with an exception");
    }
  }
  if (manager->consumed != kEntered) return Unsupported("__exit__ of a manager that is not entered");
  TFrame& f = *manager_frames_.at(manager->position);
  f.suspended = false;
  f.resume = true;
  f.caller = current_;  // the frame that made it may have returned since
  f.depth = current_ == nullptr ? 0 : current_->depth + 1;
  DT_RETURN_IF_ERROR(RunToYield(f).status());
  if (f.suspended) return Raises("the traced code raises RuntimeError: generator didn't stop");
  Mutating(manager);
  manager->consumed = kExited;
  return ConstSym(PyRef::Borrow(Py_False));
}

}  // namespace dt::interpreter::trace
