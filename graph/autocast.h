// graph/autocast.h: torch.autocast's state and policy.
//
// Inside an autocast region for a device type (dyntrace.autocast("cuda") / ("cpu")), a call of an
// op whose policy for that device is kLowerPrecision runs with its floating tensor arguments on
// that device (float64 excepted) cast to the region's dtype (matmul, linear, conv, attention:
// tensor-core work), and one whose policy is kFloat32 with them cast to float32 (softmax, norms,
// losses, exp/log/pow, sums: range and accuracy). The casts are `_to` calls, so autograd carries
// gradients back to the float32 parameters. The policies are PyTorch's lists (CUDA's and CPU's
// differ), limited to ops dyntrace has; they amend the registry's entries
// (RegisterAutocastPolicies), so eager dispatch (interpreter/py_ops.cc) and the tracer
// (interpreter/trace_calls.cc) read the same table. Only calls from Python cast: ops a composite
// calls inside its body run as the composite hands them their arguments.
#ifndef DYNTRACE_GRAPH_AUTOCAST_H_
#define DYNTRACE_GRAPH_AUTOCAST_H_

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "graph/op_schema.h"
#include "runtime/dtype.h"
#include "runtime/device.h"

namespace dt {

class OpDef;
class OpRegistry;

enum class AutocastPolicy : uint8_t { kNone, kLowerPrecision, kFloat32 };

struct AutocastPolicies {
  AutocastPolicy cpu = AutocastPolicy::kNone;
  AutocastPolicy cuda = AutocastPolicy::kNone;
};

struct AutocastState {
  bool enabled = false;
  DType dtype = DType::kFloat16;
  bool operator==(const AutocastState& o) const { return enabled == o.enabled && (!enabled || dtype == o.dtype); }
};

// One state per device type that has autocast.
struct AutocastStates {
  AutocastState cpu{false, DType::kBFloat16};
  AutocastState cuda{false, DType::kFloat16};
  bool any() const { return cpu.enabled || cuda.enabled; }
  bool operator==(const AutocastStates& o) const { return cpu == o.cpu && cuda == o.cuda; }
};

// This thread's states (what dyntrace.autocast sets).
AutocastStates& ThreadAutocast();

// What a tensor argument of dtype `dtype` on a `device` device is cast to when `op` is called in
// `states`; nullopt when it stays as it is.
std::optional<DType> AutocastTarget(const OpDef& op, DType dtype, DeviceType device, const AutocastStates& states);

// `args` (of a call of `op` from Python) with the casts the thread's states ask for made eagerly.
[[nodiscard]] absl::StatusOr<OpArgs> AutocastArgs(const OpDef& op, OpArgs args);

// Sets each listed op's policies (called once, by OpRegistry::Get).
void RegisterAutocastPolicies(OpRegistry& registry);

}  // namespace dt

#endif  // DYNTRACE_GRAPH_AUTOCAST_H_
