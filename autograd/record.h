// autograd/record.h: recording calls whose arguments require grad.
//
// graph/CallOp hands such calls to RecordCall (installed by InstallAutograd()). A call with a
// declared derivative runs with grad mode off and becomes one node; a composite without one runs
// its eager body with grad mode on, so the calls it makes are recorded instead.
#ifndef DYNTRACE_AUTOGRAD_RECORD_H_
#define DYNTRACE_AUTOGRAD_RECORD_H_

#include "absl/status/statusor.h"
#include "graph/op_registry.h"

namespace dt {

// Installs RecordCall as graph's grad recorder; idempotent.
void InstallAutograd();

[[nodiscard]] absl::StatusOr<OpResult> RecordCall(const OpDef& op, const OpArgs& args);

// Whether `op` is differentiated by autograd at all: a declared derivative, or a composite
// differentiated through its body. (Ops with no floating result need neither.)
bool HasDerivative(const OpDef& op);

}  // namespace dt

#endif  // DYNTRACE_AUTOGRAD_RECORD_H_
