// Normalisations of torch.nn.functional: normalize, group_norm, batch_norm (inference with
// running statistics, and training statistics that update them in place with momentum).
//
// batch_norm's update of running_mean/running_var is its own op, `_batch_norm_update_stats`,
// flagged kWritesArguments: a decomposed batch_norm records it as one node that writes its first
// two arguments when the graph runs, and which dead-code elimination keeps though nothing reads
// its result.
#include <optional>

#include "absl/strings/str_format.h"
#include "graph/nn_common.h"
#include "graph/op_registry.h"
#include "runtime/autograd_meta.h"
#include "runtime/copy.h"
#include "runtime/errors.h"

namespace dt {
namespace {

absl::StatusOr<OpResult> NormalizeEager(const OpDef&, const OpArgs& args) {
  const Tensor& x = args.tensor(0);
  DT_RETURN_IF_ERROR(RequireFloatingInput(x, "normalize"));
  const int64_t dim = args.int_(2);
  if (x.ndim() == 0 || dim < -x.ndim() || dim >= x.ndim()) {
    return Error(ErrorKind::kIndex, absl::StrFormat("normalize(): dim %d out of range for a tensor of shape %s",
                                                    dim, x.ShapeString()));
  }
  DT_ASSIGN_OR_RETURN(Tensor norm, VectorNorm(x, args.float_(1), Dims{dim}, /*keepdim=*/true));
  DT_ASSIGN_OR_RETURN(Tensor denominator, Call("clamp_min", {norm, args.scalar(3)}));
  DT_ASSIGN_OR_RETURN(Tensor y, Call("div", {x, denominator}));
  return OneResult(y);
}

// y * weight + bias with both (C,) broadcast along dim 1.
absl::StatusOr<Tensor> ChannelAffine(Tensor y, const OpArgs& args, size_t weight, size_t bias) {
  if (!args.is_none(weight)) {
    DT_ASSIGN_OR_RETURN(Tensor w, AlongDim(args.tensor(weight), 1, y.ndim()));
    DT_ASSIGN_OR_RETURN(y, Call("mul", {y, w}));
  }
  if (!args.is_none(bias)) {
    DT_ASSIGN_OR_RETURN(Tensor b, AlongDim(args.tensor(bias), 1, y.ndim()));
    DT_ASSIGN_OR_RETURN(y, Call("add", {y, b}));
  }
  return y;
}

absl::Status CheckChannelVector(const OpArgs& args, size_t i, int64_t channels, absl::string_view op,
                                absl::string_view what) {
  if (args.is_none(i)) return absl::OkStatus();
  const Tensor& t = args.tensor(i);
  if (t.ndim() == 1 && t.size(0) == channels) return absl::OkStatus();
  return Error(ErrorKind::kShape, absl::StrFormat("%s(): expected %s of shape [%d] (one per channel), got %s", op,
                                                  what, channels, t.ShapeString()));
}

// (x - mean) / sqrt(var + eps) over each group of C/G channels and the spatial dims. The
// grouped view's sizes are baked, so group_norm is not decomposable.
absl::StatusOr<OpResult> GroupNormEager(const OpDef&, const OpArgs& args) {
  const Tensor& x = args.tensor(0);
  DT_RETURN_IF_ERROR(RequireFloatingInput(x, "group_norm"));
  const int64_t groups = args.int_(1);
  if (x.ndim() < 2 || groups <= 0 || x.size(1) % groups != 0) {
    return Error(ErrorKind::kShape,
                 absl::StrFormat("group_norm(): Expected number of channels in input to be divisible by "
                                 "num_groups, but got input of shape %s and num_groups=%d",
                                 x.ShapeString(), groups));
  }
  DT_RETURN_IF_ERROR(CheckChannelVector(args, 2, x.size(1), "group_norm", "weight"));
  DT_RETURN_IF_ERROR(CheckChannelVector(args, 3, x.size(1), "group_norm", "bias"));
  DT_ASSIGN_OR_RETURN(Tensor grouped, Call("reshape", {x, Dims{x.size(0), groups, -1}}));
  DT_ASSIGN_OR_RETURN(Tensor mean, Call("mean", {grouped, Dims{-1}, Scalar::Bool(true)}));
  DT_ASSIGN_OR_RETURN(Tensor centred, Call("sub", {grouped, mean}));
  DT_ASSIGN_OR_RETURN(Tensor sq, Call("square", {centred}));
  DT_ASSIGN_OR_RETURN(Tensor var, Call("mean", {sq, Dims{-1}, Scalar::Bool(true)}));
  DT_ASSIGN_OR_RETURN(Tensor shifted, Call("add", {var, args.scalar(4)}));
  DT_ASSIGN_OR_RETURN(Tensor inv, Call("rsqrt", {shifted}));
  DT_ASSIGN_OR_RETURN(Tensor normed, Call("mul", {centred, inv}));
  DT_ASSIGN_OR_RETURN(Tensor y, Call("reshape", {normed, Dims(x.sizes().begin(), x.sizes().end())}));
  DT_ASSIGN_OR_RETURN(y, ChannelAffine(y, args, 2, 3));
  return OneResult(y);
}

// running = (1 - momentum) * running + momentum * batch, written into the running tensors.
absl::StatusOr<OpResult> UpdateStatsEager(const OpDef&, const OpArgs& args) {
  const double momentum = args.float_(4);
  for (size_t i : {size_t{0}, size_t{1}}) {
    DT_ASSIGN_OR_RETURN(Tensor kept, Call("mul", {args.tensor(i), Scalar::Float(1.0 - momentum)}));
    DT_ASSIGN_OR_RETURN(Tensor added, Call("mul", {args.tensor(i + 2), Scalar::Float(momentum)}));
    DT_ASSIGN_OR_RETURN(Tensor updated, Call("add", {kept, added}));
    if (!args.tensor(i).is_meta()) {
      DT_RETURN_IF_ERROR(CopyInto(args.tensor(i), updated));
    }
  }
  DT_ASSIGN_OR_RETURN(Tensor done, Call("clone", {args.tensor(0)}));
  return OneResult(done);
}

// The batch's mean and biased variance per channel (keepdim), updating the running statistics
// (unbiased variance, as PyTorch) when they are given.
absl::StatusOr<std::pair<Tensor, Tensor>> BatchStatistics(const OpArgs& args, const Dims& dims) {
  const Tensor& x = args.tensor(0);
  if (x.numel() / std::max<int64_t>(x.size(1), 1) <= 1) {
    return Error(ErrorKind::kValue, absl::StrFormat("batch_norm(): Expected more than 1 value per channel "
                                                    "when training, got input size %s",
                                                    x.ShapeString()));
  }
  DT_ASSIGN_OR_RETURN(Tensor mean, Call("mean", {x, dims, Scalar::Bool(true)}));
  DT_ASSIGN_OR_RETURN(Tensor centred, Call("sub", {x, mean}));
  DT_ASSIGN_OR_RETURN(Tensor sq, Call("square", {centred}));
  DT_ASSIGN_OR_RETURN(Tensor var, Call("mean", {sq, dims, Scalar::Bool(true)}));
  if (!args.is_none(1) && !args.is_none(2)) {
    // The running statistics are bookkeeping, not part of the result: autograd does not follow
    // them (as PyTorch's update, which runs on the statistics' data).
    GradModeGuard no_grad(false);
    DT_ASSIGN_OR_RETURN(Tensor unbiased, Call("var", {x, dims, None{}, Scalar::Bool(false)}));
    DT_ASSIGN_OR_RETURN(Tensor flat_mean, Call("squeeze", {mean, dims}));
    DT_RETURN_IF_ERROR(Call("_batch_norm_update_stats",
                            {args.tensor(1), args.tensor(2), flat_mean, unbiased, args[6]})
                           .status());
  }
  return std::make_pair(mean, var);
}

absl::StatusOr<OpResult> BatchNormEager(const OpDef&, const OpArgs& args) {
  const Tensor& x = args.tensor(0);
  DT_RETURN_IF_ERROR(RequireFloatingInput(x, "batch_norm"));
  if (x.ndim() < 2) {
    return Error(ErrorKind::kValue, absl::StrFormat("batch_norm(): expected an input of 2 or more dims "
                                                    "[N, C, ...], got %s", x.ShapeString()));
  }
  const int64_t channels = x.size(1);
  for (size_t i : {size_t{1}, size_t{2}, size_t{3}, size_t{4}}) {
    static constexpr const char* kNames[] = {"", "running_mean", "running_var", "weight", "bias"};
    DT_RETURN_IF_ERROR(CheckChannelVector(args, i, channels, "batch_norm", kNames[i]));
  }
  Dims dims{0};
  for (int64_t d = 2; d < x.ndim(); ++d) dims.push_back(d);
  Tensor mean, var;
  if (args.bool_(5)) {
    DT_ASSIGN_OR_RETURN(std::tie(mean, var), BatchStatistics(args, dims));
  } else {
    if (args.is_none(1) || args.is_none(2)) {
      return Error(ErrorKind::kValue, "batch_norm(): running_mean and running_var must be defined in evaluation mode");
    }
    DT_ASSIGN_OR_RETURN(mean, AlongDim(args.tensor(1), 1, x.ndim()));
    DT_ASSIGN_OR_RETURN(var, AlongDim(args.tensor(2), 1, x.ndim()));
  }
  DT_ASSIGN_OR_RETURN(Tensor centred, Call("sub", {x, mean}));
  DT_ASSIGN_OR_RETURN(Tensor shifted, Call("add", {var, args.scalar(7)}));
  DT_ASSIGN_OR_RETURN(Tensor inv, Call("rsqrt", {shifted}));
  DT_ASSIGN_OR_RETURN(Tensor y, Call("mul", {centred, inv}));
  DT_ASSIGN_OR_RETURN(y, ChannelAffine(y, args, 3, 4));
  return OneResult(y);
}

}  // namespace

void RegisterNormOps(OpRegistry& registry) {
  registry.Add("normalize(Tensor input, float p=2.0, int dim=1, Scalar eps=1e-12) -> Tensor", OpKind::kComposite,
               kNNFunctional | kDecomposable, &NormalizeEager).shape_rule = ShapeRule::kSameAsFirst;
  registry.Add("group_norm(Tensor input, int num_groups, Tensor? weight=None, Tensor? bias=None, "
               "Scalar eps=1e-05) -> Tensor",
               OpKind::kComposite, kFunction | kNNFunctional, &GroupNormEager).shape_rule = ShapeRule::kSameAsFirst;
  // torch.batch_norm orders its arguments differently: torch.nn.functional's only.
  registry.Add("batch_norm(Tensor input, Tensor? running_mean, Tensor? running_var, Tensor? weight=None, "
               "Tensor? bias=None, bool training=False, float momentum=0.1, Scalar eps=1e-05) -> Tensor",
               OpKind::kComposite, kNNFunctional | kDecomposable, &BatchNormEager).shape_rule = ShapeRule::kSameAsFirst;
  registry.Add("_batch_norm_update_stats(Tensor running_mean, Tensor running_var, Tensor mean, Tensor var, "
               "float momentum) -> Tensor",
               OpKind::kComposite, kWritesArguments, &UpdateStatsEager);
}

}  // namespace dt
