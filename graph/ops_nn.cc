// Neural-network functions of torch.nn.functional that are not losses, normalisations or
// convolutions: dropout, linear and the activations softplus, elu,
// leaky_relu, hardswish, mish, glu, hardtanh, relu6 (and relu/silu with `inplace=`). Each is a
// composite of registry ops; those whose body bakes no size into a constant are decomposable
// (the fuser sees their primitives).
//
// `inplace=True` writes the input. Eagerly that is a copy into it after the computation; the
// tracer cannot express a write into an argument of a composite, so such a call breaks the graph
// (the DataDependence hook, with a reason saying why) and runs eagerly, never silently unwritten.
#include <cmath>
#include <optional>

#include "absl/strings/str_format.h"
#include "graph/nn_common.h"
#include "graph/op_registry.h"
#include "runtime/copy.h"
#include "runtime/errors.h"

namespace dt {
namespace {

std::optional<Tensor> OptionalTensorArg(const OpArgs& args, size_t i) {
  if (args.is_none(i)) return std::nullopt;
  return args.tensor(i);
}

// The result, or (inplace=True at argument `i`) the input with the result copied into it.
absl::StatusOr<OpResult> MaybeInplace(const OpArgs& args, size_t i, const Tensor& result) {
  if (!args.bool_(i)) return OneResult(result);
  const Tensor& input = args.tensor(0);
  if (!input.is_meta()) {
    DT_RETURN_IF_ERROR(CopyInto(input, result));
  }
  return OneResult(input);
}

template <size_t I>
std::optional<std::string> InplaceBreaks(const OpArgs& args) {
  if (!args.bool_(I)) return std::nullopt;
  return "inplace=True writes its input, which a traced composite cannot express: it runs eagerly";
}

// ---- dropout ----

absl::StatusOr<OpResult> DropoutEager(const OpDef&, const OpArgs& args) {
  const Tensor& x = args.tensor(0);
  const double p = args.float_(1);
  if (!(p >= 0.0 && p <= 1.0)) {
    return Error(ErrorKind::kValue,
                 absl::StrFormat("dropout probability has to be between 0 and 1, but got %g", p));
  }
  DT_RETURN_IF_ERROR(RequireFloatingInput(x, "dropout"));
  if (!args.bool_(2) || p == 0.0) {
    DT_ASSIGN_OR_RETURN(Tensor same, Call("clone", {x}));
    return MaybeInplace(args, 3, same);
  }
  if (p == 1.0) {  // every element dropped (x * 0 keeps NaN, as PyTorch)
    DT_ASSIGN_OR_RETURN(Tensor zeros, Call("mul", {x, Scalar::Int(0)}));
    return MaybeInplace(args, 3, zeros);
  }
  DT_ASSIGN_OR_RETURN(Tensor u, Call("rand_like", {x}));
  DT_ASSIGN_OR_RETURN(Tensor keep, Call("ge", {u, Scalar::Float(p)}));
  DT_ASSIGN_OR_RETURN(Tensor kept, Call("mul", {x, keep}));
  DT_ASSIGN_OR_RETURN(Tensor y, Call("mul", {kept, Scalar::Float(1.0 / (1.0 - p))}));
  return MaybeInplace(args, 3, y);
}

// ---- linear and attention ----

absl::StatusOr<OpResult> LinearEager(const OpDef&, const OpArgs& args) {
  const Tensor& x = args.tensor(0);
  const Tensor& w = args.tensor(1);
  if (w.ndim() < 1 || w.ndim() > 2 || x.ndim() < 1 || x.size(x.ndim() - 1) != w.size(w.ndim() - 1)) {
    return Error(ErrorKind::kShape,
                 absl::StrFormat("linear(): input of shape %s and weight of shape %s cannot be "
                                 "multiplied (weight must be [out_features, %d] or [%d])",
                                 x.ShapeString(), w.ShapeString(), x.ndim() ? x.size(x.ndim() - 1) : 0,
                                 x.ndim() ? x.size(x.ndim() - 1) : 0));
  }
  Tensor wt = w;
  if (w.ndim() == 2) {
    DT_ASSIGN_OR_RETURN(wt, Call("transpose", {w, Scalar::Int(0), Scalar::Int(1)}));
  }
  DT_ASSIGN_OR_RETURN(Tensor y, Call("matmul", {x, wt}));
  if (!args.is_none(2)) {
    DT_ASSIGN_OR_RETURN(y, Call("add", {y, args.tensor(2)}));
  }
  return OneResult(y);
}

// ---- activations ----

absl::StatusOr<OpResult> SoftplusEager(const OpDef&, const OpArgs& args) {
  const Tensor& x = args.tensor(0);
  const double beta = args.float_(1);
  DT_ASSIGN_OR_RETURN(Tensor bx, Call("mul", {x, Scalar::Float(beta)}));
  DT_ASSIGN_OR_RETURN(Tensor e, Call("exp", {bx}));
  DT_ASSIGN_OR_RETURN(Tensor l, Call("log1p", {e}));
  DT_ASSIGN_OR_RETURN(Tensor soft, Call("div", {l, Scalar::Float(beta)}));
  // Above the threshold the function is x to within rounding (and exp would overflow).
  DT_ASSIGN_OR_RETURN(Tensor linear, Call("gt", {bx, args.scalar(2)}));
  DT_ASSIGN_OR_RETURN(Tensor y, Call("where", {linear, x, soft}));
  return OneResult(y);
}

// x where x > 0, else elu's alpha * expm1(x) or leaky_relu's negative_slope * x.
absl::StatusOr<OpResult> PiecewiseLinearEager(const OpDef& op, const OpArgs& args) {
  const Tensor& x = args.tensor(0);
  DT_RETURN_IF_ERROR(RequireFloatingInput(x, op.name()));
  Tensor below = x;
  if (op.name() == "elu") {
    DT_ASSIGN_OR_RETURN(below, Call("expm1", {x}));
  }
  DT_ASSIGN_OR_RETURN(Tensor negative, Call("mul", {below, args.scalar(1)}));
  DT_ASSIGN_OR_RETURN(Tensor positive, Call("gt", {x, Scalar::Int(0)}));
  DT_ASSIGN_OR_RETURN(Tensor y, Call("where", {positive, x, negative}));
  return MaybeInplace(args, 2, y);
}

// F.relu/F.silu with `inplace=` (overloads of the pointwise ops, taken when it is given).
absl::StatusOr<OpResult> ActivationInplaceEager(const OpDef& op, const OpArgs& args) {
  DT_ASSIGN_OR_RETURN(Tensor y, Call(op.name().substr(0, op.name().find('.')), {args.tensor(0)}));
  return MaybeInplace(args, 1, y);
}

// hardtanh: x clamped to [min_val, max_val]; relu6 is hardtanh(0, 6).
absl::StatusOr<OpResult> HardtanhEager(const OpDef& op, const OpArgs& args) {
  const bool relu6 = op.name() == "relu6";
  const Scalar low = relu6 ? Scalar::Int(0) : args.scalar(1), high = relu6 ? Scalar::Int(6) : args.scalar(2);
  if (low.ToDouble() > high.ToDouble()) {
    return Error(ErrorKind::kValue, "hardtanh(): min_val cannot be greater than max_val");
  }
  DT_ASSIGN_OR_RETURN(Tensor y, Call("clamp", {args.tensor(0), low, high}));
  return MaybeInplace(args, relu6 ? 1 : 3, y);
}

// x * relu6(x + 3) / 6.
absl::StatusOr<OpResult> HardswishEager(const OpDef&, const OpArgs& args) {
  const Tensor& x = args.tensor(0);
  DT_RETURN_IF_ERROR(RequireFloatingInput(x, "hardswish"));
  DT_ASSIGN_OR_RETURN(Tensor shifted, Call("add", {x, Scalar::Int(3)}));
  DT_ASSIGN_OR_RETURN(Tensor gate, Call("clamp", {shifted, Scalar::Int(0), Scalar::Int(6)}));
  DT_ASSIGN_OR_RETURN(Tensor scaled, Call("mul", {x, gate}));
  DT_ASSIGN_OR_RETURN(Tensor y, Call("div", {scaled, Scalar::Int(6)}));
  return MaybeInplace(args, 1, y);
}

// x * tanh(softplus(x)), softplus with PyTorch's defaults (beta 1, threshold 20).
absl::StatusOr<OpResult> MishEager(const OpDef&, const OpArgs& args) {
  const Tensor& x = args.tensor(0);
  DT_RETURN_IF_ERROR(RequireFloatingInput(x, "mish"));
  DT_ASSIGN_OR_RETURN(Tensor sp, Call("softplus", {x}));
  DT_ASSIGN_OR_RETURN(Tensor t, Call("tanh", {sp}));
  DT_ASSIGN_OR_RETURN(Tensor y, Call("mul", {x, t}));
  return MaybeInplace(args, 1, y);
}

// First half times sigmoid of the second half along `dim` (whose halves are sizes: not
// decomposable).
absl::StatusOr<OpResult> GluEager(const OpDef&, const OpArgs& args) {
  const Tensor& x = args.tensor(0);
  DT_RETURN_IF_ERROR(RequireFloatingInput(x, "glu"));
  if (x.ndim() == 0) return Error(ErrorKind::kValue, "glu(): glu does not support scalars because halving size must be even");
  int64_t dim = args.int_(1);
  if (dim < -x.ndim() || dim >= x.ndim()) {
    return Error(ErrorKind::kIndex, absl::StrFormat("glu(): dim %d out of range for a tensor of %d dims", dim, x.ndim()));
  }
  if (dim < 0) dim += x.ndim();
  const int64_t n = x.size(dim);
  if (n % 2 != 0) {
    return Error(ErrorKind::kRuntime,
                 absl::StrFormat("glu(): Halving dimension must be even, but dimension %d is size %d", dim, n));
  }
  DT_ASSIGN_OR_RETURN(Tensor a, Call("narrow", {x, Scalar::Int(dim), Scalar::Int(0), Scalar::Int(n / 2)}));
  DT_ASSIGN_OR_RETURN(Tensor b, Call("narrow", {x, Scalar::Int(dim), Scalar::Int(n / 2), Scalar::Int(n / 2)}));
  DT_ASSIGN_OR_RETURN(Tensor gate, Call("sigmoid", {b}));
  DT_ASSIGN_OR_RETURN(Tensor y, Call("mul", {a, gate}));
  return OneResult(y);
}

}  // namespace

void RegisterNNOps(OpRegistry& registry) {
  constexpr uint32_t kNN = kNNFunctional | kDecomposable;
  registry.Add("dropout(Tensor input, float p=0.5, bool training=True, bool inplace=False) -> Tensor",
               OpKind::kComposite, kNN | kRandom, &DropoutEager)
      .data_dependent_shape = &InplaceBreaks<3>;
  registry.Add("linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor", OpKind::kComposite, kNN,
               &LinearEager);
  registry.Add("softplus(Tensor input, Scalar beta=1, Scalar threshold=20) -> Tensor", OpKind::kComposite, kNN,
               &SoftplusEager).shape_rule = ShapeRule::kSameAsFirst;
  registry.Add("elu(Tensor input, Scalar alpha=1.0, bool inplace=False) -> Tensor", OpKind::kComposite, kNN,
               &PiecewiseLinearEager).data_dependent_shape = &InplaceBreaks<2>;
  registry.Add("leaky_relu(Tensor input, Scalar negative_slope=0.01, bool inplace=False) -> Tensor",
               OpKind::kComposite, kNN, &PiecewiseLinearEager).data_dependent_shape = &InplaceBreaks<2>;
  registry.Add("relu.inplace(Tensor input, bool inplace) -> Tensor", OpKind::kComposite, kNN,
               &ActivationInplaceEager).data_dependent_shape = &InplaceBreaks<1>;
  registry.Add("silu.inplace(Tensor input, bool inplace) -> Tensor", OpKind::kComposite, kNN,
               &ActivationInplaceEager).data_dependent_shape = &InplaceBreaks<1>;
  registry.Add("hardtanh(Tensor input, Scalar min_val=-1.0, Scalar max_val=1.0, bool inplace=False) -> Tensor",
               OpKind::kComposite, kNN, &HardtanhEager).data_dependent_shape = &InplaceBreaks<3>;
  registry.Add("relu6(Tensor input, bool inplace=False) -> Tensor", OpKind::kComposite, kNN, &HardtanhEager)
      .data_dependent_shape = &InplaceBreaks<1>;
  registry.Add("hardswish(Tensor input, bool inplace=False) -> Tensor", OpKind::kComposite, kNN,
               &HardswishEager).data_dependent_shape = &InplaceBreaks<1>;
  registry.Add("mish(Tensor input, bool inplace=False) -> Tensor", OpKind::kComposite, kNN, &MishEager)
      .data_dependent_shape = &InplaceBreaks<1>;
  registry.Add("glu(Tensor input, int dim=-1) -> Tensor", OpKind::kComposite, kNNFunctional, &GluEager);
}

}  // namespace dt
