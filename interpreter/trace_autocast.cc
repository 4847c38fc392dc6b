// interpreter/trace_autocast.cc: autocast inside a trace.
//
// A compiled function called inside `with dyntrace.autocast(...)` is traced under that region's
// states: a call of an op with an autocast policy (graph/autocast.h) gets the casts eager
// dispatch would make, as `_to` nodes ahead of it, and the states the trace ran under are guarded,
// so a call outside the region (or in another one) traces anew. A region entered or left inside
// the traced code (`with torch.autocast("cuda", dtype=torch.bfloat16):` around a model's forward
// in a compiled training step) is followed as grad mode is: autocast's __enter__ and __exit__ are
// inlined, their two builtins change the traced states, ops in between get the region's casts,
// and a segment that ends with other states than it began with sets them on the way out.
#include <Python.h>

#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "interpreter/py_types.h"
#include "interpreter/tracer_internal.h"

namespace dt::interpreter::trace {

const AutocastStates& Tracer::TracedAutocast() {
  if (!autocast_.has_value()) {
    const AutocastStates at_entry = ThreadAutocast();
    autocast_ = at_entry;
    auto same_states = std::make_shared<const LeafGuard::RelationFn>(
        [at_entry](const guards::FrameInputs&) -> std::optional<bool> { return ThreadAutocast() == at_entry; });
    guards_.Add(LeafGuard::Relation(guards::SysModuleSource("dyntrace"), "dyntrace autocast states", true,
                                    std::move(same_states), Here()));
  }
  return *autocast_;
}

absl::Status Tracer::AutocastArguments(const OpDef& op, std::vector<ArgValue>& metas, std::vector<GraphArg>& args) {
  if (op.autocast.cpu == AutocastPolicy::kNone && op.autocast.cuda == AutocastPolicy::kNone) {
    return absl::OkStatus();
  }
  const AutocastStates& states = TracedAutocast();
  if (!states.any()) return absl::OkStatus();
  const OpDef* to = OpRegistry::Get().Find("_to");
  for (size_t i = 0; i < metas.size() && i < args.size(); ++i) {
    const ValueId* value = std::get_if<ValueId>(&args[i].content);
    const Tensor* meta = std::get_if<Tensor>(&metas[i]);
    if (value == nullptr || meta == nullptr) continue;
    auto device = value_device_.find(*value);
    if (device == value_device_.end()) continue;
    const std::optional<DType> target = AutocastTarget(op, meta->dtype(), device->second.type, states);
    if (!target.has_value()) continue;
    DT_ASSIGN_OR_RETURN(std::vector<Sym> cast,
                        Emit(to, {*meta, *target}, {GraphArg::Value(*value), GraphArg{ArgValue(*target)}}, false));
    metas[i] = cast[0]->meta;
    args[i] = GraphArg::Value(cast[0]->value);
  }
  return absl::OkStatus();
}

absl::StatusOr<Sym> Tracer::CallAutocastBuiltin(PyObject* fn, const std::vector<Sym>& args, const Kwargs& kwargs) {
  const bool reads = IsDyntraceFunction(fn, "_autocast_state");
  if (!reads && !IsDyntraceFunction(fn, "_set_autocast")) return Sym();
  if (!kwargs.empty() || args.size() != (reads ? 1u : 3u)) {
    return Unsupported(absl::StrCat(reads ? "_autocast_state" : "_set_autocast", "() with unexpected arguments"));
  }
  DT_ASSIGN_OR_RETURN(PyRef device, ConstValue(args[0]));
  AutocastStates states = TracedAutocast();
  AutocastState* state = nullptr;
  if (PyUnicode_Check(device.get()) && PyUnicode_CompareWithASCIIString(device.get(), "cuda") == 0) state = &states.cuda;
  if (PyUnicode_Check(device.get()) && PyUnicode_CompareWithASCIIString(device.get(), "cpu") == 0) state = &states.cpu;
  if (state == nullptr) return Unsupported("autocast of a device type other than 'cpu' or 'cuda' (CPython raises)");
  if (reads) {
    PyRef dtype = PyRef::Steal(py::WrapDType(state->dtype));
    PyRef pair = PyRef::Steal(Py_BuildValue("(OO)", state->enabled ? Py_True : Py_False, dtype.get()));
    if (!pair) {
      PyErr_Clear();
      return Unsupported("_autocast_state() could not make its result");
    }
    return ConstSym(std::move(pair));
  }
  DT_ASSIGN_OR_RETURN(PyRef enabled, ConstValue(args[1]));
  DT_ASSIGN_OR_RETURN(PyRef dtype_obj, ConstValue(args[2]));
  absl::StatusOr<DType> dtype = py::ToDType(dtype_obj.get(), "autocast dtype");
  if (!dtype.ok()) PyErr_Clear();
  if (!PyBool_Check(enabled.get()) || !dtype.ok() || !IsFloating(*dtype)) {
    return Unsupported("_set_autocast() with arguments CPython would refuse");
  }
  *state = AutocastState{enabled.get() == Py_True, *dtype};
  // The real states are not changed while tracing: ThreadAutocast() is the states at entry.
  autocast_ = states;
  autocast_changed_ = true;
  return ConstSym(PyRef::Borrow(Py_None));
}

}  // namespace dt::interpreter::trace
