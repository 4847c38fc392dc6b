#include "graph/autocast.h"

#include "graph/op_registry.h"

namespace dt {
namespace {

// PyTorch's CUDA autocast lists (aten/src/ATen/autocast_mode.cpp), for the ops dyntrace has.
constexpr const char* kCudaLowerPrecision[] = {
    "matmul", "mm", "bmm", "baddbmm", "addmm", "linear", "conv1d", "conv1d.padding", "conv2d", "conv2d.padding",
    "scaled_dot_product_attention", "einsum", "dot", "outer"};
constexpr const char* kCudaFloat32[] = {
    "exp", "expm1", "log", "log2", "log1p", "reciprocal", "rsqrt", "tan", "pow", "softplus", "layer_norm",
    "group_norm", "rms_norm", "norm", "linalg_vector_norm", "nll_loss", "cross_entropy", "kl_div", "l1_loss",
    "smooth_l1_loss", "mse_loss", "binary_cross_entropy_with_logits", "logsumexp", "prod", "cumprod", "cumsum",
    "sum", "softmax", "log_softmax"};
// PyTorch's CPU lists: the same lower-precision work; float32 for losses and a few others only
// (softmax, norms and exp stay in bfloat16 on the CPU).
constexpr const char* kCpuLowerPrecision[] = {
    "matmul", "mm", "bmm", "baddbmm", "addmm", "linear", "conv1d", "conv1d.padding", "conv2d", "conv2d.padding",
    "scaled_dot_product_attention"};
constexpr const char* kCpuFloat32[] = {"prod", "mse_loss", "nll_loss", "smooth_l1_loss", "cross_entropy", "l1_loss",
                                       "kl_div", "binary_cross_entropy_with_logits"};

AutocastPolicy PolicyFor(const OpDef& op, DeviceType device) {
  if (device == DeviceType::kCuda) return op.autocast.cuda;
  if (device == DeviceType::kCpu) return op.autocast.cpu;
  return AutocastPolicy::kNone;
}

}  // namespace

AutocastStates& ThreadAutocast() {
  thread_local AutocastStates states;
  return states;
}

std::optional<DType> AutocastTarget(const OpDef& op, DType dtype, DeviceType device, const AutocastStates& states) {
  const AutocastState* state = device == DeviceType::kCuda ? &states.cuda
                               : device == DeviceType::kCpu ? &states.cpu
                                                            : nullptr;
  if (state == nullptr || !state->enabled || !IsFloating(dtype) || dtype == DType::kFloat64) return std::nullopt;
  switch (PolicyFor(op, device)) {
    case AutocastPolicy::kLowerPrecision:
      return dtype == state->dtype ? std::nullopt : std::optional<DType>(state->dtype);
    case AutocastPolicy::kFloat32:
      return dtype == DType::kFloat32 ? std::nullopt : std::optional<DType>(DType::kFloat32);
    case AutocastPolicy::kNone:
      break;
  }
  return std::nullopt;
}

absl::StatusOr<OpArgs> AutocastArgs(const OpDef& op, OpArgs args) {
  const AutocastStates& states = ThreadAutocast();
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args.is_tensor(i)) continue;
    const Tensor& t = args.tensor(i);
    if (std::optional<DType> target = AutocastTarget(op, t.dtype(), t.device().type, states)) {
      DT_ASSIGN_OR_RETURN(Tensor cast, Call("_to", {t, *target}));
      args[i] = std::move(cast);
    }
  }
  return args;
}

void RegisterAutocastPolicies(OpRegistry& registry) {
  for (const char* name : kCudaLowerPrecision) registry.Mutable(name).autocast.cuda = AutocastPolicy::kLowerPrecision;
  for (const char* name : kCudaFloat32) registry.Mutable(name).autocast.cuda = AutocastPolicy::kFloat32;
  for (const char* name : kCpuLowerPrecision) registry.Mutable(name).autocast.cpu = AutocastPolicy::kLowerPrecision;
  for (const char* name : kCpuFloat32) registry.Mutable(name).autocast.cpu = AutocastPolicy::kFloat32;
}

}  // namespace dt
