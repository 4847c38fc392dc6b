// interpreter/trace_grad_mode.cc: grad mode inside a trace (`with dt.no_grad():`,
// dt.set_grad_enabled, dt.is_grad_enabled()).
//
// The grad-mode managers are Python classes (python/dyntrace/autograd.py) whose __enter__ and
// __exit__ call two builtins; the tracer inlines them and follows the mode here. The mode decides
// what is_grad_enabled() answers and which mode the segment leaves behind. A trace whose inputs
// autograd follows (trace_autograd.cc) differentiates every node of its graph, so a change of
// mode there is a graph break: the nodes before and after it are split separately (TraceResult::grad_mode_at_exit, set by ApplySideEffects, also
// at a graph break inside the block, where CPython then runs the manager's own __exit__).
#include <Python.h>

#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "interpreter/tracer_internal.h"
#include "runtime/autograd_meta.h"

namespace dt::interpreter::trace {

bool Tracer::TracedGradMode() {
  if (!grad_mode_.has_value()) {
    const bool at_entry = GradEnabled();
    grad_mode_ = at_entry;
    auto same_mode = std::make_shared<const LeafGuard::RelationFn>(
        [at_entry](const guards::FrameInputs&) -> std::optional<bool> { return GradEnabled() == at_entry; });
    guards_.Add(LeafGuard::Relation(guards::SysModuleSource("dyntrace"), "dyntrace.is_grad_enabled()", at_entry,
                                    std::move(same_mode), Here()));
  }
  return *grad_mode_;
}

// Null when `fn` is neither builtin.
absl::StatusOr<Sym> Tracer::CallGradModeBuiltin(PyObject* fn, const std::vector<Sym>& args, const Kwargs& kwargs) {
  const bool reads = IsDyntraceFunction(fn, "is_grad_enabled");
  if (!reads && !IsDyntraceFunction(fn, "_set_grad_enabled")) return Sym();
  if (!kwargs.empty() || args.size() != (reads ? 0u : 1u)) {
    return Unsupported(absl::StrCat(reads ? "is_grad_enabled" : "_set_grad_enabled", "() with unexpected arguments"));
  }
  const bool at_entry_or_now = TracedGradMode();
  if (reads) return ConstSym(PyRef::Borrow(at_entry_or_now ? Py_True : Py_False));
  DT_ASSIGN_OR_RETURN(PyRef mode, ConstValue(args[0]));
  if (!PyBool_Check(mode.get())) return Unsupported("_set_grad_enabled() of a value that is not a bool");
  const bool enable = mode.get() == Py_True;
  // The real mode is not changed while tracing: GradEnabled() is the mode at entry.
  if (enable && !GradEnabled()) {
    // Tensors that require grad may have entered while the mode was off (not guarded against,
    // since autograd did not follow them then): ops after this point would have to record.
    return Unsupported("turning grad mode on inside a trace that started with it off (autograd must record "
                       "what follows)");
  }
  // After backward() the graph is not split (trace_autograd.cc): values made with the mode on
  // are followed value by value (grad_values_).
  if (enable != at_entry_or_now && !grad_inputs_.empty() && !backward_at_node_.has_value()) {
    return Unsupported("a change of grad mode in a graph whose inputs require grad (each side is compiled "
                       "apart)");
  }
  grad_mode_ = enable;
  grad_mode_changed_ = true;
  return ConstSym(PyRef::Borrow(Py_None));
}

}  // namespace dt::interpreter::trace
