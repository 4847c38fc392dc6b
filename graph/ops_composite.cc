// Composite ops, written in terms of registry primitives so that tracing records (and the code
// generators fuse) the primitives: mean/var/std/logsumexp, softmax/log_softmax, layer_norm,
// rms_norm, gelu, clamp.
#include <cmath>
#include <limits>

#include "absl/strings/str_format.h"
#include "graph/grad_formulas.h"
#include "graph/op_registry.h"
#include "graph/reduction.h"
#include "runtime/errors.h"

namespace dt {
namespace {

OpResult One(Tensor t) { return OpResult{std::move(t)}; }

ArgValue DimsOrNone(const OpArgs& args, size_t i) {
  return args.is_none(i) ? ArgValue(None{}) : ArgValue(args.ints(i));
}

// Number of elements each output of a reduction over `dims` folds.
absl::StatusOr<int64_t> ReducedCount(const Tensor& t, const ArgValue& dims) {
  std::optional<Dims> d;
  if (std::holds_alternative<Dims>(dims)) d = std::get<Dims>(dims);
  DT_ASSIGN_OR_RETURN(Dims normal, NormalizeReductionDims(d, t.ndim()));
  int64_t count = 1;
  for (int64_t i : normal) count *= t.size(i);
  return count;
}

absl::Status RequireFloating(const Tensor& t, absl::string_view op) {
  if (IsFloating(t.dtype())) return absl::OkStatus();
  return Error(ErrorKind::kType,
               absl::StrFormat("%s(): could not infer output dtype. Input dtype must be a floating "
                               "point dtype. Got: %s",
                               op, DTypeScalarName(t.dtype())));
}

absl::StatusOr<OpResult> MeanEager(const OpDef&, const OpArgs& args) {
  Tensor input = args.tensor(0);
  const std::optional<DType> dtype = args.dtype(3);
  if (!dtype.has_value()) DT_RETURN_IF_ERROR(RequireFloating(input, "mean"));
  const DType out_dtype = dtype.value_or(input.dtype());
  DT_ASSIGN_OR_RETURN(int64_t count, ReducedCount(input, DimsOrNone(args, 1)));
  DT_ASSIGN_OR_RETURN(Tensor sum, Call("sum", {input, DimsOrNone(args, 1), args[2], out_dtype}));
  DT_ASSIGN_OR_RETURN(Tensor mean, Call("div", {sum, Scalar::Int(count)}));
  return One(mean);
}

// var and std: mean-centred sum of squares over (count - correction).
absl::StatusOr<Tensor> Variance(const OpArgs& args, absl::string_view op) {
  Tensor input = args.tensor(0);
  DT_RETURN_IF_ERROR(RequireFloating(input, op));
  double correction = 1.0;
  if (!args.is_none(4)) correction = args.float_(4);
  else if (!args.is_none(2)) correction = args.bool_(2) ? 1.0 : 0.0;
  const ArgValue dims = DimsOrNone(args, 1);
  DT_ASSIGN_OR_RETURN(int64_t count, ReducedCount(input, dims));
  DT_ASSIGN_OR_RETURN(Tensor mean, Call("mean", {input, dims, Scalar::Bool(true)}));
  DT_ASSIGN_OR_RETURN(Tensor centred, Call("sub", {input, mean}));
  DT_ASSIGN_OR_RETURN(Tensor squares, Call("square", {centred}));
  DT_ASSIGN_OR_RETURN(Tensor total, Call("sum", {squares, dims, args[3]}));
  const double divisor = std::max(0.0, static_cast<double>(count) - correction);
  return Call("div", {total, Scalar::Float(divisor)});
}

absl::StatusOr<OpResult> VarEager(const OpDef&, const OpArgs& args) {
  DT_ASSIGN_OR_RETURN(Tensor v, Variance(args, "var"));
  return One(v);
}

absl::StatusOr<OpResult> StdEager(const OpDef&, const OpArgs& args) {
  DT_ASSIGN_OR_RETURN(Tensor v, Variance(args, "std"));
  DT_ASSIGN_OR_RETURN(Tensor s, Call("sqrt", {v}));
  return One(s);
}

// max over `dims` with infinities replaced by 0, so exp(x - max) is finite for all-inf rows.
absl::StatusOr<Tensor> StableMax(const Tensor& x, const ArgValue& dims) {
  DT_ASSIGN_OR_RETURN(Tensor m, Call("amax", {x, dims, Scalar::Bool(true)}));
  DT_ASSIGN_OR_RETURN(Tensor magnitude, Call("abs", {m}));
  DT_ASSIGN_OR_RETURN(Tensor infinite,
                      Call("eq", {magnitude, Scalar::Float(std::numeric_limits<double>::infinity())}));
  return Call("where", {infinite, Scalar::Int(0), m});
}

absl::StatusOr<OpResult> LogsumexpEager(const OpDef&, const OpArgs& args) {
  Tensor x = args.tensor(0);
  if (!IsFloating(x.dtype())) {
    DT_ASSIGN_OR_RETURN(x, Call("mul", {x, Scalar::Float(1.0)}));
  }
  const ArgValue dims = args[1];
  DT_ASSIGN_OR_RETURN(Tensor m, StableMax(x, dims));
  DT_ASSIGN_OR_RETURN(Tensor shifted, Call("sub", {x, m}));
  DT_ASSIGN_OR_RETURN(Tensor e, Call("exp", {shifted}));
  DT_ASSIGN_OR_RETURN(Tensor s, Call("sum", {e, dims, args[2]}));
  DT_ASSIGN_OR_RETURN(Tensor l, Call("log", {s}));
  Tensor m_out = m;
  if (!args.bool_(2)) {
    DT_ASSIGN_OR_RETURN(m_out, Call("squeeze", {m, dims}));
  }
  DT_ASSIGN_OR_RETURN(Tensor r, Call("add", {l, m_out}));
  return One(r);
}

// The input in the requested dtype (softmax(x, dim, dtype=...) converts first, as PyTorch does).
absl::StatusOr<Tensor> SoftmaxInput(const OpArgs& args) {
  Tensor x = args.tensor(0);
  if (auto dtype = args.dtype(2)) {
    DT_ASSIGN_OR_RETURN(x, Call("_to", {x, *dtype}));
  }
  if (!IsFloating(x.dtype())) {
    return Error(ErrorKind::kType, absl::StrFormat("softmax: expected a floating tensor, got %s",
                                                   DTypeName(x.dtype())));
  }
  return x;
}

absl::StatusOr<OpResult> SoftmaxEager(const OpDef& op, const OpArgs& args) {
  DT_ASSIGN_OR_RETURN(Tensor x, SoftmaxInput(args));
  const ArgValue dim = Dims{args.int_(1)};
  DT_ASSIGN_OR_RETURN(Tensor m, StableMax(x, dim));
  DT_ASSIGN_OR_RETURN(Tensor shifted, Call("sub", {x, m}));
  DT_ASSIGN_OR_RETURN(Tensor e, Call("exp", {shifted}));
  DT_ASSIGN_OR_RETURN(Tensor s, Call("sum", {e, dim, Scalar::Bool(true)}));
  if (op.name() == "softmax") {
    // One division per row and a product per element, as PyTorch's CPU kernel does: a division
    // per element was a fifth of the fused kernel's time (one more rounding: within 1.5 ulp).
    DT_ASSIGN_OR_RETURN(Tensor inverse, Call("reciprocal", {s}));
    DT_ASSIGN_OR_RETURN(Tensor r, Call("mul", {e, inverse}));
    return One(r);
  }
  DT_ASSIGN_OR_RETURN(Tensor l, Call("log", {s}));
  DT_ASSIGN_OR_RETURN(Tensor r, Call("sub", {shifted, l}));
  return One(r);
}

absl::StatusOr<Dims> NormalizedDims(const Tensor& x, const Dims& normalized_shape,
                                    absl::string_view op) {
  const int64_t k = static_cast<int64_t>(normalized_shape.size());
  bool ok = k >= 1 && k <= x.ndim();
  for (int64_t i = 0; ok && i < k; ++i) ok = x.size(x.ndim() - k + i) == normalized_shape[i];
  if (!ok) {
    return Error(ErrorKind::kShape,
                 absl::StrFormat("%s: given normalized_shape=%s, expected input with shape "
                                 "[*, %s], but got input of size %s",
                                 op, DimsToString(normalized_shape),
                                 DimsToString(normalized_shape).substr(1), x.ShapeString()));
  }
  Dims dims;
  for (int64_t i = x.ndim() - k; i < x.ndim(); ++i) dims.push_back(i);
  return dims;
}

absl::Status CheckAffine(const OpArgs& args, size_t i, const Dims& normalized_shape,
                         absl::string_view op, absl::string_view what) {
  if (args.is_none(i)) return absl::OkStatus();
  if (Dims(args.tensor(i).sizes()) != normalized_shape) {
    return Error(ErrorKind::kShape, absl::StrFormat("%s: expected %s of shape %s, got %s", op, what,
                                                    DimsToString(normalized_shape),
                                                    args.tensor(i).ShapeString()));
  }
  return absl::OkStatus();
}

absl::StatusOr<OpResult> LayerNormEager(const OpDef&, const OpArgs& args) {
  const Tensor& x = args.tensor(0);
  DT_RETURN_IF_ERROR(RequireFloating(x, "layer_norm"));
  const Dims& shape = args.ints(1);
  DT_ASSIGN_OR_RETURN(Dims dims, NormalizedDims(x, shape, "layer_norm"));
  DT_RETURN_IF_ERROR(CheckAffine(args, 2, shape, "layer_norm", "weight"));
  DT_RETURN_IF_ERROR(CheckAffine(args, 3, shape, "layer_norm", "bias"));
  DT_ASSIGN_OR_RETURN(Tensor mean, Call("mean", {x, dims, Scalar::Bool(true)}));
  DT_ASSIGN_OR_RETURN(Tensor centred, Call("sub", {x, mean}));
  DT_ASSIGN_OR_RETURN(Tensor sq, Call("square", {centred}));
  DT_ASSIGN_OR_RETURN(Tensor var, Call("mean", {sq, dims, Scalar::Bool(true)}));
  DT_ASSIGN_OR_RETURN(Tensor shifted, Call("add", {var, args.scalar(4)}));
  DT_ASSIGN_OR_RETURN(Tensor inv, Call("rsqrt", {shifted}));
  DT_ASSIGN_OR_RETURN(Tensor y, Call("mul", {centred, inv}));
  if (!args.is_none(2)) {
    DT_ASSIGN_OR_RETURN(y, Call("mul", {y, args.tensor(2)}));
  }
  if (!args.is_none(3)) {
    DT_ASSIGN_OR_RETURN(y, Call("add", {y, args.tensor(3)}));
  }
  return One(y);
}

absl::StatusOr<OpResult> RmsNormEager(const OpDef&, const OpArgs& args) {
  const Tensor& x = args.tensor(0);
  DT_RETURN_IF_ERROR(RequireFloating(x, "rms_norm"));
  const Dims& shape = args.ints(1);
  DT_ASSIGN_OR_RETURN(Dims dims, NormalizedDims(x, shape, "rms_norm"));
  DT_RETURN_IF_ERROR(CheckAffine(args, 2, shape, "rms_norm", "weight"));
  const double eps = args.is_none(3) ? grad::RmsNormDefaultEps(x.dtype()) : args.float_(3);
  DT_ASSIGN_OR_RETURN(Tensor sq, Call("square", {x}));
  DT_ASSIGN_OR_RETURN(Tensor ms, Call("mean", {sq, dims, Scalar::Bool(true)}));
  DT_ASSIGN_OR_RETURN(Tensor shifted, Call("add", {ms, Scalar::Float(eps)}));
  DT_ASSIGN_OR_RETURN(Tensor inv, Call("rsqrt", {shifted}));
  DT_ASSIGN_OR_RETURN(Tensor y, Call("mul", {x, inv}));
  if (!args.is_none(2)) {
    DT_ASSIGN_OR_RETURN(y, Call("mul", {y, args.tensor(2)}));
  }
  return One(y);
}

absl::StatusOr<OpResult> GeluEager(const OpDef&, const OpArgs& args) {
  const std::string& approximate = args.string(1);
  if (approximate != "none" && approximate != "tanh") {
    return Error(ErrorKind::kValue, absl::StrFormat("gelu: approximate must be 'none' or 'tanh', got '%s'",
                                                    approximate));
  }
  DT_ASSIGN_OR_RETURN(Tensor y, Call(approximate == "tanh" ? "_gelu_tanh" : "_gelu_erf",
                                     {args.tensor(0)}));
  return One(y);
}

absl::StatusOr<OpResult> ClampEager(const OpDef& op, const OpArgs& args) {
  if (args.is_none(1) && args.is_none(2)) {
    return Error(ErrorKind::kValue,
                 absl::StrCat(op.name(), ": at least one of 'min' or 'max' must not be None"));
  }
  Tensor y = args.tensor(0);
  if (!args.is_none(1)) {
    DT_ASSIGN_OR_RETURN(y, Call("maximum", {y, args[1]}));
  }
  if (!args.is_none(2)) {
    DT_ASSIGN_OR_RETURN(y, Call("minimum", {y, args[2]}));
  }
  return One(y);
}

absl::StatusOr<OpResult> ClampOneSideEager(const OpDef& op, const OpArgs& args) {
  DT_ASSIGN_OR_RETURN(Tensor y, Call(op.name() == "clamp_min" ? "maximum" : "minimum", {args.tensor(0), args[1]}));
  return One(y);
}

// add/sub(input, other, alpha=): input +/- other * alpha. PyTorch refuses a float alpha for
// integer results and any alpha other than True/False for bool.
absl::StatusOr<OpResult> AlphaEager(const OpDef& op, const OpArgs& args) {
  const Scalar alpha = args.scalar(2);
  const std::string base = op.name().substr(0, op.name().find('.'));
  const Tensor& input = args.tensor(0);
  const DType other_dtype = args.is_tensor(1) ? args.tensor(1).dtype() : args.scalar(1).NaturalDType();
  if (alpha.is_float() && !IsFloating(input.dtype()) && !IsFloating(other_dtype)) {
    return Error(ErrorKind::kType, absl::StrFormat("%s(): for integral input tensors, alpha must be an integer, "
                                                   "got %s",
                                                   base, alpha.ToString()));
  }
  ArgValue scaled = args[1];
  if (args.is_tensor(1)) {
    DT_ASSIGN_OR_RETURN(Tensor t, Call("mul", {args.tensor(1), alpha}));
    scaled = t;
  } else if (args.scalar(1).is_float() || alpha.is_float()) {
    scaled = Scalar::Float(args.scalar(1).ToDouble() * alpha.ToDouble());
  } else {
    scaled = Scalar::Int(args.scalar(1).ToInt() * alpha.ToInt());
  }
  DT_ASSIGN_OR_RETURN(Tensor y, Call(base, {input, scaled}));
  return One(y);
}

// nan_to_num: NaN, +inf and -inf replaced (by default with 0 and the dtype's largest and lowest
// finite values), as three fused selects; integer and bool tensors come back as a copy.
absl::StatusOr<OpResult> NanToNumEager(const OpDef&, const OpArgs& args) {
  const Tensor& input = args.tensor(0);
  if (!IsFloating(input.dtype())) {
    DT_ASSIGN_OR_RETURN(Tensor copy, Call("clone", {input}));
    return One(copy);
  }
  const double largest = input.dtype() == DType::kFloat16    ? 65504.0
                         : input.dtype() == DType::kBFloat16 ? 3.3895313892515355e+38
                         : input.dtype() == DType::kFloat32  ? std::numeric_limits<float>::max()
                                                             : std::numeric_limits<double>::max();
  const double nan = args.is_none(1) ? 0.0 : args.float_(1);
  const double posinf = args.is_none(2) ? largest : args.float_(2);
  const double neginf = args.is_none(3) ? -largest : args.float_(3);
  const double inf = std::numeric_limits<double>::infinity();
  DT_ASSIGN_OR_RETURN(Tensor is_nan, Call("isnan", {input}));
  DT_ASSIGN_OR_RETURN(Tensor is_pos, Call("eq", {input, Scalar::Float(inf)}));
  DT_ASSIGN_OR_RETURN(Tensor is_neg, Call("eq", {input, Scalar::Float(-inf)}));
  DT_ASSIGN_OR_RETURN(Tensor y, Call("where", {is_nan, Scalar::Float(nan), input}));
  DT_ASSIGN_OR_RETURN(y, Call("where", {is_pos, Scalar::Float(posinf), y}));
  DT_ASSIGN_OR_RETURN(y, Call("where", {is_neg, Scalar::Float(neginf), y}));
  return One(y);
}

}  // namespace

void RegisterCompositeOps(OpRegistry& registry) {
  constexpr uint32_t kBoth = kMethod | kFunction;
  OpDef& mean = registry.Add(
      "mean(Tensor input, int[]? dim=None, bool keepdim=False, *, DType? dtype=None) -> Tensor",
      OpKind::kReduction, kBoth, &MeanEager);
  mean.reduction.combiner = ReductionCombiner::kSum;
  mean.reduction.scalar_fn = "reduce_sum";
  mean.reduction.divides_by_count = true;
  registry.Add("var(Tensor input, int[]? dim=None, bool? unbiased=None, bool keepdim=False, *, "
               "Scalar? correction=None) -> Tensor",
               OpKind::kComposite, kBoth, &VarEager);
  registry.Add("std(Tensor input, int[]? dim=None, bool? unbiased=None, bool keepdim=False, *, "
               "Scalar? correction=None) -> Tensor",
               OpKind::kComposite, kBoth, &StdEager);
  // var/std divide by a count fixed when recorded, so they stay whole; the rest decompose.
  registry.Add("logsumexp(Tensor input, int[] dim, bool keepdim=False) -> Tensor", OpKind::kComposite,
               kBoth | kDecomposable, &LogsumexpEager);
  registry.Add("softmax(Tensor input, int dim, DType? dtype=None) -> Tensor", OpKind::kComposite,
               kBoth | kNNFunctional | kDecomposable, &SoftmaxEager).shape_rule = ShapeRule::kSameAsFirst;
  registry.Add("log_softmax(Tensor input, int dim, DType? dtype=None) -> Tensor",
               OpKind::kComposite, kBoth | kNNFunctional | kDecomposable, &SoftmaxEager).shape_rule = ShapeRule::kSameAsFirst;
  registry.Add("layer_norm(Tensor input, int[] normalized_shape, Tensor? weight=None, "
               "Tensor? bias=None, float eps=1e-05) -> Tensor",
               OpKind::kComposite, kFunction | kNNFunctional | kDecomposable, &LayerNormEager).shape_rule = ShapeRule::kSameAsFirst;
  registry.Add("rms_norm(Tensor input, int[] normalized_shape, Tensor? weight=None, "
               "float? eps=None) -> Tensor",
               OpKind::kComposite, kFunction | kNNFunctional | kDecomposable, &RmsNormEager).shape_rule = ShapeRule::kSameAsFirst;
  registry.Add("gelu(Tensor input, *, str approximate='none') -> Tensor", OpKind::kComposite,
               kBoth | kNNFunctional | kDecomposable, &GeluEager).shape_rule = ShapeRule::kSameAsFirst;
  // clamp/clip broadcast a tensor min or max: not the first operand's shape in general.
  registry.Add("clamp(Tensor input, Operand? min=None, Operand? max=None) -> Tensor",
               OpKind::kComposite, kBoth | kInplaceVariant | kDecomposable, &ClampEager);
  registry.Add("clip(Tensor input, Operand? min=None, Operand? max=None) -> Tensor",
               OpKind::kComposite, kBoth | kInplaceVariant | kDecomposable, &ClampEager);
  registry.Add("clamp_min(Tensor input, Operand min) -> Tensor", OpKind::kComposite,
               kBoth | kInplaceVariant | kDecomposable, &ClampOneSideEager);
  registry.Add("clamp_max(Tensor input, Operand max) -> Tensor", OpKind::kComposite,
               kBoth | kInplaceVariant | kDecomposable, &ClampOneSideEager);
  // Overloads of the pointwise add and sub (registered first), taken when `alpha=` is given.
  registry.Add("add.alpha(Tensor input, Operand other, *, Scalar alpha) -> Tensor", OpKind::kComposite,
               kBoth | kInplaceVariant | kDecomposable, &AlphaEager);
  registry.Add("sub.alpha(Tensor input, Operand other, *, Scalar alpha) -> Tensor", OpKind::kComposite,
               kBoth | kInplaceVariant | kDecomposable, &AlphaEager);
  registry.Add("nan_to_num(Tensor input, float? nan=0.0, float? posinf=None, float? neginf=None) -> Tensor",
               OpKind::kComposite, kBoth | kInplaceVariant | kDecomposable, &NanToNumEager);
}

}  // namespace dt
