// interpreter/trace_with.cc: `with` blocks: BEFORE_WITH, and which context managers the tracer
// follows.
//
// A block compiles when its manager's __enter__ and __exit__ are Python functions (a user class,
// contextlib.nullcontext; @contextlib.contextmanager generators are trace_contextmanager.cc's):
// BEFORE_WITH inlines __enter__ and pushes the bound __exit__, and the
// `__exit__(None, None, None)` CALL that ends the block inlines like any other method call. Only
// the path where the block finishes is traced. The exception path (PUSH_EXC_INFO,
// WITH_EXCEPT_START) is reached only through a raise, and a raise stops the trace: CPython runs
// the raising instruction, and its own exception table calls __exit__ with the exception, whatever
// __exit__ then returns. A graph break inside the block leaves the bound __exit__ on the stack the
// frame gets back, as CPython's BEFORE_WITH would have.
//
// A manager implemented in C runs code the tracer cannot see. KnownContextManagers is the one
// place that teaches the tracer such a type: without a row there, BEFORE_WITH breaks with a reason
// that names the type. (dyntrace's grad-mode managers are Python classes, inlined like any other;
// the builtins they call are trace_grad_mode.cc's.)
#include <Python.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "interpreter/cpython_frame.h"
#include "interpreter/tracer_internal.h"

namespace dt::interpreter::trace {
namespace {

Sym Bound(PyObject* function, const Sym& self) {
  Sym s = MakeSym(SymKind::kBoundMethod);
  s->obj = PyRef::Borrow(function);
  s->items.push_back(self);
  return s;
}

// The special method as CPython's BEFORE_WITH finds it: on the type, never the instance.
PyObject* SpecialMethod(PyTypeObject* type, const char* name) {
  PyRef key = PyRef::Steal(PyUnicode_FromString(name));
  return key ? cpython::LookupOnType(type, key.get()) : nullptr;
}

}  // namespace

const absl::flat_hash_map<PyTypeObject*, Tracer::ContextManagerRule>& Tracer::KnownContextManagers() {
  // Keyed by the exact type. Empty for now: no C-implemented manager has a rule yet.
  static const auto* known = new absl::flat_hash_map<PyTypeObject*, ContextManagerRule>();
  return *known;
}

absl::Status Tracer::DoBeforeWith(TFrame& f, const Instr& in) {
  DT_RETURN_IF_ERROR(f.Need(1, in));
  const Sym manager = f.stack.back();
  if (manager->kind != SymKind::kObject && manager->kind != SymKind::kConst && manager->kind != SymKind::kGenManager) {
    return Unsupported(absl::StrCat("a with block over a ", Describe(manager)));
  }
  PyTypeObject* type = Py_TYPE(manager->obj.get());
  Sym exit, entered;
  if (manager->kind == SymKind::kGenManager) {  // @contextlib.contextmanager (trace_contextmanager.cc)
    DT_ASSIGN_OR_RETURN(entered, EnterGeneratorManager(manager));
    exit = Bound(manager->obj.get(), manager);
  } else if (auto known = KnownContextManagers().find(type); known != KnownContextManagers().end()) {
    DT_ASSIGN_OR_RETURN(entered, (this->*known->second.enter)(manager));
    exit = Bound(SpecialMethod(type, "__exit__"), manager);
  } else {
    PyObject* enter_fn = SpecialMethod(type, "__enter__");
    PyObject* exit_fn = SpecialMethod(type, "__exit__");
    if (enter_fn == nullptr || exit_fn == nullptr) {
      return Raises(absl::StrCat("the traced code raises TypeError: '", type->tp_name,
                                 "' object does not support the context manager protocol"));
    }
    if (!PyFunction_Check(enter_fn) || !PyFunction_Check(exit_fn)) {
      return Unsupported(absl::StrCat("a with block over a ", type->tp_name,
                                      ": its __enter__/__exit__ are not Python functions, and the tracer has "
                                      "no rule for it (trace_with.cc KnownContextManagers)"));
    }
    DT_ASSIGN_OR_RETURN(entered, CallSym(Bound(enter_fn, manager), {}, {}));
    exit = Bound(exit_fn, manager);
  }
  f.Pop();
  f.stack.push_back(std::move(exit));
  f.stack.push_back(std::move(entered));
  return absl::OkStatus();
}

// The CALL at the end of a block over a manager with a row in KnownContextManagers: its bound
// __exit__ is a C method, so the row says what it does. Null when `method` is no such __exit__.
absl::StatusOr<Sym> Tracer::CallKnownExit(const Sym& method, const std::vector<Sym>& args) {
  const Sym& manager = method->items[0];
  if (manager->kind != SymKind::kObject && manager->kind != SymKind::kConst) return Sym();
  auto known = KnownContextManagers().find(Py_TYPE(manager->obj.get()));
  if (known == KnownContextManagers().end()) return Sym();
  for (const Sym& a : args) {
    if (a->kind != SymKind::kConst || a->obj.get() != Py_None) {
      return Unsupported("__exit__ of a known context manager called with an exception");
    }
  }
  return (this->*known->second.exit)(manager);
}

}  // namespace dt::interpreter::trace
