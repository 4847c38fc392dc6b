#include "autograd/record.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "autograd/op_node.h"
#include "runtime/autograd_meta.h"
#include "runtime/errors.h"

namespace dt {
namespace {

bool AnyFloating(const OpResult& outputs) {
  for (const Tensor& t : outputs) {
    if (IsFloating(t.dtype())) return true;
  }
  return false;
}

std::string PythonName(const OpDef& op) {
  const std::string& name = op.name();
  return name.substr(0, name.find('.'));
}

absl::Status NoDerivative(const OpDef& op) {
  return Error(ErrorKind::kNotImplemented,
               absl::StrFormat("the derivative of dyntrace.%s is not implemented: an argument requires grad. "
                               "Call it under dyntrace.no_grad() or on .detach()ed tensors",
                               PythonName(op)));
}

// A composite differentiated through its body: every call it makes is recorded. A floating
// result that came out without a history means the body computed outside the registry.
absl::StatusOr<OpResult> RecordThroughBody(const OpDef& op, const OpArgs& args) {
  DT_ASSIGN_OR_RETURN(OpResult outputs, CallOpBody(op, args));
  for (const Tensor& t : outputs) {
    if (IsFloating(t.dtype()) && !RequiresGrad(t)) return NoDerivative(op);
  }
  return outputs;
}

}  // namespace

bool HasDerivative(const OpDef& op) { return op.derivative.fn != nullptr || op.kind == OpKind::kComposite; }

absl::StatusOr<OpResult> RecordCall(const OpDef& op, const OpArgs& args) {
  if (op.kind == OpKind::kCreation) return CallOpUnrecorded(op, args);  // zeros_like(x) has no history
  if (op.has(kEagerUpdate)) {
    return Error(ErrorKind::kRuntime, absl::StrCat(op.name(), "(): tensors that require grad would be changed in "
                                                              "place, which autograd cannot record; call it under "
                                                              "dyntrace.no_grad()"));
  }
  if (op.derivative.fn == nullptr && op.kind == OpKind::kComposite) return RecordThroughBody(op, args);
  absl::StatusOr<OpResult> outputs;
  {
    GradModeGuard off(false);
    outputs = CallOpUnrecorded(op, args);
  }
  if (!outputs.ok() || !AnyFloating(*outputs)) return outputs;
  if (op.derivative.fn == nullptr) return NoDerivative(op);
  DT_RETURN_IF_ERROR(OpNode::Record(op, args, *outputs));
  return outputs;
}

void InstallAutograd() { InstallGradRecorder(&RecordCall); }

}  // namespace dt
