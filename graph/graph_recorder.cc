#include "graph/graph_recorder.h"

#include "runtime/errors.h"

namespace dt {

bool SameMetaTensor(const Tensor& a, const Tensor& b) {
  return a.SharesStorageWith(b) && a.dtype() == b.dtype() && a.offset() == b.offset() && a.sizes() == b.sizes() &&
         a.strides() == b.strides();
}

absl::StatusOr<ValueId> GraphRecorder::Find(const Tensor& meta) {
  for (auto it = known_.rbegin(); it != known_.rend(); ++it) {
    if (SameMetaTensor(it->first, meta)) return it->second;
  }
  return Unknown(meta);
}

absl::StatusOr<ValueId> GraphRecorder::Unknown(const Tensor&) {
  return Error(ErrorKind::kRuntime, "a recorded call read a tensor made outside Call()");
}

absl::StatusOr<OpResult> GraphRecorder::Record(const OpDef& op, const OpArgs& args) {
  std::vector<GraphArg> graph_args;
  for (size_t i = 0; i < args.size(); ++i) {
    const ArgValue& a = args[i];
    if (const Tensor* t = std::get_if<Tensor>(&a)) {
      DT_ASSIGN_OR_RETURN(ValueId id, Find(*t));
      graph_args.push_back(GraphArg::Value(id));
    } else if (const auto* list = std::get_if<std::vector<Tensor>>(&a)) {
      std::vector<ValueId> ids;
      for (const Tensor& t : *list) {
        DT_ASSIGN_OR_RETURN(ValueId id, Find(t));
        ids.push_back(id);
      }
      graph_args.push_back(GraphArg{std::move(ids)});
    } else if (const Device* d = std::get_if<Device>(&a);
               d != nullptr && d->type == DeviceType::kMeta && device_.has_value()) {
      graph_args.push_back(GraphArg{ArgValue(*device_)});
    } else {
      graph_args.push_back(GraphArg{a});
    }
  }
  // The op's own body runs unrecorded: it is one node.
  CallRecorder* outer = SetCallRecorder(nullptr);
  absl::StatusOr<OpResult> result = CallOp(op, args);
  SetCallRecorder(outer);
  if (!result.ok()) return result.status();
  std::vector<ValueId> ids = out_.AddNode(&op, std::move(graph_args), *result, false, location_);
  for (size_t i = 0; i < ids.size(); ++i) Know((*result)[i], ids[i]);
  return result;
}

}  // namespace dt
