// interpreter/trace_autocast.cc: autocast inside a trace.
//
// A compiled function called inside `with dyntrace.autocast(...)` is traced under that region's
// states: a call of an op with an autocast policy (graph/autocast.h) gets the casts eager
// dispatch would make, as `_to` nodes ahead of it, and the states the trace ran under are guarded,
// so a call outside the region (or in another one) traces anew. Entering or leaving a region
// inside the traced code calls dyntrace._set_autocast, which the tracer does not follow: a graph
// break, after which the next segment traces under the new states.
#include <Python.h>

#include <memory>
#include <optional>

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

}  // namespace dt::interpreter::trace
