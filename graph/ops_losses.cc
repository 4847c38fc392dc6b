// Losses of torch.nn.functional (cross_entropy, nll_loss, mse_loss, l1_loss, smooth_l1_loss,
// binary_cross_entropy_with_logits, kl_div), written in registry ops so that tracing records
// and the code generators fuse their primitives. Means divide by counts computed when they run
// (`mean`, or a sum of per-element weights), so every body is decomposable: none bakes a size.
#include <optional>

#include "absl/strings/str_format.h"
#include "graph/nn_common.h"
#include "graph/op_registry.h"
#include "runtime/errors.h"

namespace dt {
namespace {

std::optional<Tensor> OptionalTensor(const OpDef& op, const OpArgs& args, absl::string_view name) {
  const ArgValue& v = NamedArg(op, args, name);
  if (std::holds_alternative<None>(v)) return std::nullopt;
  return std::get<Tensor>(v);
}

// The class dim of nll_loss / cross_entropy inputs: (C), (N, C) or (N, C, d1, ...).
int64_t ClassDim(const Tensor& input) { return input.ndim() == 1 ? 0 : 1; }

// PyTorch's checks of class-index targets, with its exception types.
absl::Status CheckClassTarget(const Tensor& input, const Tensor& target,
                              const std::optional<Tensor>& weight, absl::string_view op) {
  if (input.ndim() < 1) {
    return Error(ErrorKind::kValue, absl::StrFormat("%s(): expected 1 or more dimensions (got 0)", op));
  }
  if (target.dtype() != DType::kInt64) {
    return Error(ErrorKind::kRuntime,
                 absl::StrFormat("%s(): expected target of dtype int64 (class indices) or a floating "
                                 "target of the input's shape, got %s of shape %s",
                                 op, DTypeName(target.dtype()), target.ShapeString()));
  }
  Dims expected(input.sizes().begin(), input.sizes().end());
  expected.erase(expected.begin() + ClassDim(input));
  if (input.ndim() >= 2 && target.ndim() >= 1 && target.size(0) != input.size(0)) {
    return Error(ErrorKind::kValue,
                 absl::StrFormat("%s(): expected input batch_size (%d) to match target batch_size (%d)",
                                 op, input.size(0), target.size(0)));
  }
  if (Dims(target.sizes()) != expected) {
    return Error(ErrorKind::kShape,
                 absl::StrFormat("%s(): expected target of shape %s for input of shape %s, got %s", op,
                                 DimsToString(expected), input.ShapeString(), target.ShapeString()));
  }
  const int64_t classes = input.size(ClassDim(input));
  if (weight.has_value() && (weight->ndim() != 1 || weight->size(0) != classes)) {
    return Error(ErrorKind::kShape,
                 absl::StrFormat("%s(): weight tensor should be defined either for all %d classes or "
                                 "no classes but got weight tensor of shape: %s",
                                 op, classes, weight->ShapeString()));
  }
  return absl::OkStatus();
}

// Per-element pieces of a class-index loss: the target with ignored entries pointed at class 0
// (so every gather is in range), and each element's weight w[target] (1 without weights), zero
// where target == ignore_index.
struct ClassTerms {
  Tensor safe_target;
  Tensor element_weight;
};

absl::StatusOr<ClassTerms> MakeClassTerms(const Tensor& input, const Tensor& target,
                                          const std::optional<Tensor>& weight, int64_t ignore_index) {
  DT_ASSIGN_OR_RETURN(Tensor valid, Call("ne", {target, Scalar::Int(ignore_index)}));
  DT_ASSIGN_OR_RETURN(Tensor safe, Call("where", {valid, target, Scalar::Int(0)}));
  if (!weight.has_value()) {
    DT_ASSIGN_OR_RETURN(Tensor w, Call("_to", {valid, input.dtype()}));
    return ClassTerms{safe, w};
  }
  DT_ASSIGN_OR_RETURN(Tensor column, Call("unsqueeze", {*weight, Scalar::Int(1)}));
  DT_ASSIGN_OR_RETURN(Tensor picked, Call("embedding", {safe, column}));
  DT_ASSIGN_OR_RETURN(picked, Call("squeeze", {picked, Dims{-1}}));
  DT_ASSIGN_OR_RETURN(Tensor w, Call("where", {valid, picked, Scalar::Float(0.0)}));
  return ClassTerms{safe, w};
}

// -w[t] * logp[t] per element.
absl::StatusOr<Tensor> PickedNll(const Tensor& logp, const ClassTerms& terms) {
  const int64_t dim = ClassDim(logp);
  DT_ASSIGN_OR_RETURN(Tensor index, Call("unsqueeze", {terms.safe_target, Scalar::Int(dim)}));
  DT_ASSIGN_OR_RETURN(Tensor picked, Call("gather", {logp, Scalar::Int(dim), index}));
  DT_ASSIGN_OR_RETURN(picked, Call("squeeze", {picked, Dims{dim}}));
  DT_ASSIGN_OR_RETURN(Tensor weighted, Call("mul", {picked, terms.element_weight}));
  return Call("neg", {weighted});
}

// PyTorch's weighted mean: the sum of the losses over the sum of the weights of the elements
// not ignored (NaN when every element is ignored, as PyTorch).
absl::StatusOr<Tensor> ReduceClassLoss(const Tensor& loss, const ClassTerms& terms, LossReduction r) {
  if (r != LossReduction::kMean) return Reduce(loss, r);
  DT_ASSIGN_OR_RETURN(Tensor total, Call("sum", {loss}));
  DT_ASSIGN_OR_RETURN(Tensor weight_total, Call("sum", {terms.element_weight}));
  return Call("div", {total, weight_total});
}

absl::StatusOr<OpResult> NllLossEager(const OpDef& op, const OpArgs& args) {
  const Tensor& input = args.tensor(0);
  const Tensor& target = args.tensor(1);
  const std::optional<Tensor> weight = OptionalTensor(op, args, "weight");
  DT_RETURN_IF_ERROR(RequireFloatingInput(input, op.name()));
  DT_RETURN_IF_ERROR(CheckClassTarget(input, target, weight, op.name()));
  DT_ASSIGN_OR_RETURN(LossReduction reduction, ReductionArg(op, args));
  const int64_t ignore = std::get<Scalar>(NamedArg(op, args, "ignore_index")).ToInt();
  DT_ASSIGN_OR_RETURN(ClassTerms terms, MakeClassTerms(input, target, weight, ignore));
  DT_ASSIGN_OR_RETURN(Tensor loss, PickedNll(input, terms));
  DT_ASSIGN_OR_RETURN(Tensor r, ReduceClassLoss(loss, terms, reduction));
  return OneResult(r);
}

// -mean over classes of w_c * logp_c: the uniform part of label smoothing (PyTorch's
// smooth_loss / n_classes, with the count taken when it runs).
absl::StatusOr<Tensor> UniformTerm(const Tensor& logp, const std::optional<Tensor>& weight) {
  const int64_t dim = ClassDim(logp);
  Tensor weighted = logp;
  if (weight.has_value()) {
    DT_ASSIGN_OR_RETURN(Tensor w, AlongDim(*weight, dim, logp.ndim()));
    DT_ASSIGN_OR_RETURN(weighted, Call("mul", {logp, w}));
  }
  DT_ASSIGN_OR_RETURN(Tensor m, Call("mean", {weighted, Dims{dim}}));
  return Call("neg", {m});
}

// (1 - eps) * loss + eps * uniform.
absl::StatusOr<Tensor> Smoothed(const Tensor& loss, const Tensor& uniform, double eps) {
  DT_ASSIGN_OR_RETURN(Tensor a, Call("mul", {loss, Scalar::Float(1.0 - eps)}));
  DT_ASSIGN_OR_RETURN(Tensor b, Call("mul", {uniform, Scalar::Float(eps)}));
  return Call("add", {a, b});
}

absl::StatusOr<Tensor> CrossEntropyIndices(const OpDef& op, const OpArgs& args, const Tensor& logp,
                                           const std::optional<Tensor>& weight, double eps,
                                           LossReduction reduction) {
  const Tensor& target = args.tensor(1);
  DT_RETURN_IF_ERROR(CheckClassTarget(logp, target, weight, op.name()));
  const int64_t ignore = std::get<Scalar>(NamedArg(op, args, "ignore_index")).ToInt();
  DT_ASSIGN_OR_RETURN(ClassTerms terms, MakeClassTerms(logp, target, weight, ignore));
  DT_ASSIGN_OR_RETURN(Tensor loss, PickedNll(logp, terms));
  if (eps > 0.0) {
    DT_ASSIGN_OR_RETURN(Tensor uniform, UniformTerm(logp, weight));
    DT_ASSIGN_OR_RETURN(Tensor valid, Call("ne", {target, Scalar::Int(ignore)}));
    DT_ASSIGN_OR_RETURN(uniform, Call("where", {valid, uniform, Scalar::Float(0.0)}));
    DT_ASSIGN_OR_RETURN(loss, Smoothed(loss, uniform, eps));
  }
  return ReduceClassLoss(loss, terms, reduction);
}

// Class probabilities: -sum_c w_c * p_c * logp_c; a mean is over the non-class elements.
absl::StatusOr<Tensor> CrossEntropyProbabilities(const OpDef& op, const OpArgs& args, const Tensor& logp,
                                                 const std::optional<Tensor>& weight, double eps,
                                                 LossReduction reduction) {
  const Tensor& target = args.tensor(1);
  if (std::get<Scalar>(NamedArg(op, args, "ignore_index")).ToInt() >= 0) {
    return Error(ErrorKind::kValue, "cross_entropy(): ignore_index is not supported for floating point target");
  }
  const int64_t dim = ClassDim(logp);
  if (weight.has_value() && (weight->ndim() != 1 || weight->size(0) != logp.size(dim))) {
    return Error(ErrorKind::kShape, absl::StrFormat("cross_entropy(): expected weight of shape [%d], got %s",
                                                    logp.size(dim), weight->ShapeString()));
  }
  DT_ASSIGN_OR_RETURN(Tensor terms, Call("mul", {logp, target}));
  if (weight.has_value()) {
    DT_ASSIGN_OR_RETURN(Tensor w, AlongDim(*weight, dim, logp.ndim()));
    DT_ASSIGN_OR_RETURN(terms, Call("mul", {terms, w}));
  }
  DT_ASSIGN_OR_RETURN(Tensor s, Call("sum", {terms, Dims{dim}}));
  DT_ASSIGN_OR_RETURN(Tensor loss, Call("neg", {s}));
  if (eps > 0.0) {
    DT_ASSIGN_OR_RETURN(Tensor uniform, UniformTerm(logp, weight));
    DT_ASSIGN_OR_RETURN(loss, Smoothed(loss, uniform, eps));
  }
  return Reduce(loss, reduction);
}

absl::StatusOr<OpResult> CrossEntropyEager(const OpDef& op, const OpArgs& args) {
  const Tensor& input = args.tensor(0);
  const Tensor& target = args.tensor(1);
  DT_RETURN_IF_ERROR(RequireFloatingInput(input, op.name()));
  if (input.ndim() < 1) {
    return Error(ErrorKind::kValue, "cross_entropy(): expected 1 or more dimensions (got 0)");
  }
  const double eps = std::get<Scalar>(NamedArg(op, args, "label_smoothing")).ToDouble();
  if (!(eps >= 0.0 && eps <= 1.0)) {
    return Error(ErrorKind::kValue,
                 absl::StrFormat("cross_entropy(): label_smoothing must be between 0.0 and 1.0. Got: %g", eps));
  }
  DT_ASSIGN_OR_RETURN(LossReduction reduction, ReductionArg(op, args));
  const std::optional<Tensor> weight = OptionalTensor(op, args, "weight");
  DT_ASSIGN_OR_RETURN(Tensor logp, Call("log_softmax", {input, Scalar::Int(ClassDim(input))}));
  const bool probabilities = IsFloating(target.dtype());
  if (probabilities && Dims(target.sizes()) != Dims(input.sizes())) {
    return Error(ErrorKind::kShape,
                 absl::StrFormat("cross_entropy(): a floating target holds class probabilities and must "
                                 "have the input's shape %s, got %s",
                                 input.ShapeString(), target.ShapeString()));
  }
  DT_ASSIGN_OR_RETURN(Tensor r, probabilities
                                    ? CrossEntropyProbabilities(op, args, logp, weight, eps, reduction)
                                    : CrossEntropyIndices(op, args, logp, weight, eps, reduction));
  return OneResult(r);
}

// The elementwise losses of two same-shaped (broadcastable) tensors.
absl::StatusOr<Tensor> Difference(const OpDef& op, const OpArgs& args) {
  DT_RETURN_IF_ERROR(RequireFloatingInput(args.tensor(0), op.name()));
  return Call("sub", {args.tensor(0), args.tensor(1)});
}

// mse_loss: (input - target)^2; l1_loss: |input - target|.
absl::StatusOr<OpResult> DistanceLossEager(const OpDef& op, const OpArgs& args) {
  DT_ASSIGN_OR_RETURN(LossReduction reduction, ReductionArg(op, args));
  DT_ASSIGN_OR_RETURN(Tensor d, Difference(op, args));
  DT_ASSIGN_OR_RETURN(Tensor loss, Call(op.name() == "mse_loss" ? "square" : "abs", {d}));
  DT_ASSIGN_OR_RETURN(Tensor r, Reduce(loss, reduction));
  return OneResult(r);
}

// |d| < beta: 0.5 d^2 / beta, else |d| - 0.5 beta (beta 0 is the L1 loss, as PyTorch).
absl::StatusOr<OpResult> SmoothL1LossEager(const OpDef& op, const OpArgs& args) {
  DT_ASSIGN_OR_RETURN(LossReduction reduction, ReductionArg(op, args));
  const double beta = std::get<Scalar>(NamedArg(op, args, "beta")).ToDouble();
  if (beta < 0) {
    return Error(ErrorKind::kValue, "smooth_l1_loss(): smooth_l1_loss does not support negative values for beta.");
  }
  DT_ASSIGN_OR_RETURN(Tensor d, Difference(op, args));
  DT_ASSIGN_OR_RETURN(Tensor a, Call("abs", {d}));
  Tensor loss = a;
  if (beta > 0) {
    DT_ASSIGN_OR_RETURN(Tensor sq, Call("square", {a}));
    DT_ASSIGN_OR_RETURN(Tensor quadratic, Call("mul", {sq, Scalar::Float(0.5 / beta)}));
    DT_ASSIGN_OR_RETURN(Tensor linear, Call("sub", {a, Scalar::Float(0.5 * beta)}));
    DT_ASSIGN_OR_RETURN(Tensor small, Call("lt", {a, Scalar::Float(beta)}));
    DT_ASSIGN_OR_RETURN(loss, Call("where", {small, quadratic, linear}));
  }
  DT_ASSIGN_OR_RETURN(Tensor r, Reduce(loss, reduction));
  return OneResult(r);
}

// (1 - t) x + lw * (log1p(exp(-|x|)) + relu(-x)), lw = 1 + (pos_weight - 1) t: stable for
// every x (the exp never overflows).
absl::StatusOr<OpResult> BceWithLogitsEager(const OpDef& op, const OpArgs& args) {
  const Tensor& x = args.tensor(0);
  const Tensor& t = args.tensor(1);
  DT_RETURN_IF_ERROR(RequireFloatingInput(x, op.name()));
  if (Dims(t.sizes()) != Dims(x.sizes())) {
    return Error(ErrorKind::kValue, absl::StrFormat("%s(): Target size (%s) must be the same as input size (%s)",
                                                    op.name(), t.ShapeString(), x.ShapeString()));
  }
  DT_ASSIGN_OR_RETURN(LossReduction reduction, ReductionArg(op, args));
  DT_ASSIGN_OR_RETURN(Tensor neg_t, Call("neg", {t}));
  DT_ASSIGN_OR_RETURN(Tensor one_minus_t, Call("add", {neg_t, Scalar::Int(1)}));
  DT_ASSIGN_OR_RETURN(Tensor linear, Call("mul", {one_minus_t, x}));
  DT_ASSIGN_OR_RETURN(Tensor magnitude, Call("abs", {x}));
  DT_ASSIGN_OR_RETURN(Tensor neg_magnitude, Call("neg", {magnitude}));
  DT_ASSIGN_OR_RETURN(Tensor e, Call("exp", {neg_magnitude}));
  DT_ASSIGN_OR_RETURN(Tensor softplus_part, Call("log1p", {e}));
  DT_ASSIGN_OR_RETURN(Tensor neg_x, Call("neg", {x}));
  DT_ASSIGN_OR_RETURN(Tensor hinge, Call("relu", {neg_x}));
  DT_ASSIGN_OR_RETURN(Tensor log_term, Call("add", {softplus_part, hinge}));
  if (auto pos_weight = OptionalTensor(op, args, "pos_weight")) {
    DT_ASSIGN_OR_RETURN(Tensor pw_minus_one, Call("sub", {*pos_weight, Scalar::Int(1)}));
    DT_ASSIGN_OR_RETURN(Tensor scaled, Call("mul", {pw_minus_one, t}));
    DT_ASSIGN_OR_RETURN(Tensor log_weight, Call("add", {scaled, Scalar::Int(1)}));
    DT_ASSIGN_OR_RETURN(log_term, Call("mul", {log_term, log_weight}));
  }
  DT_ASSIGN_OR_RETURN(Tensor loss, Call("add", {linear, log_term}));
  if (auto weight = OptionalTensor(op, args, "weight")) {
    DT_ASSIGN_OR_RETURN(loss, Call("mul", {loss, *weight}));
  }
  DT_ASSIGN_OR_RETURN(Tensor r, Reduce(loss, reduction));
  return OneResult(r);
}

// Pointwise t * (log t - input) (0 where t is 0), or exp(t) * (t - input) for log targets;
// 'batchmean' divides the sum by the batch size, counted when it runs (a mean over dim 0 of the
// per-sample sums).
absl::StatusOr<OpResult> KlDivEager(const OpDef& op, const OpArgs& args) {
  const Tensor& input = args.tensor(0);
  const Tensor& t = args.tensor(1);
  DT_RETURN_IF_ERROR(RequireFloatingInput(input, op.name()));
  const bool log_target = std::get<Scalar>(NamedArg(op, args, "log_target")).ToBool();
  Tensor loss;
  if (log_target) {
    DT_ASSIGN_OR_RETURN(Tensor e, Call("exp", {t}));
    DT_ASSIGN_OR_RETURN(Tensor d, Call("sub", {t, input}));
    DT_ASSIGN_OR_RETURN(loss, Call("mul", {e, d}));
  } else {
    DT_ASSIGN_OR_RETURN(Tensor log_t, Call("log", {t}));
    DT_ASSIGN_OR_RETURN(Tensor d, Call("sub", {log_t, input}));
    DT_ASSIGN_OR_RETURN(Tensor product, Call("mul", {t, d}));
    DT_ASSIGN_OR_RETURN(Tensor zero, Call("eq", {t, Scalar::Int(0)}));
    DT_ASSIGN_OR_RETURN(loss, Call("where", {zero, Scalar::Float(0.0), product}));
  }
  const std::string& text = std::get<std::string>(NamedArg(op, args, "reduction"));
  if (text == "batchmean" && NamedIsNone(op, args, "size_average") && NamedIsNone(op, args, "reduce")) {
    if (loss.ndim() == 0) return OneResult(loss);
    Dims rest;
    for (int64_t d = 1; d < loss.ndim(); ++d) rest.push_back(d);
    if (!rest.empty()) {
      DT_ASSIGN_OR_RETURN(loss, Call("sum", {loss, rest}));
    }
    DT_ASSIGN_OR_RETURN(Tensor r, Call("mean", {loss}));
    return OneResult(r);
  }
  DT_ASSIGN_OR_RETURN(LossReduction reduction, ReductionArg(op, args));
  DT_ASSIGN_OR_RETURN(Tensor r, Reduce(loss, reduction));
  return OneResult(r);
}

}  // namespace

void RegisterLossOps(OpRegistry& registry) {
  // torch.nn.functional only: torch's own names for these take other arguments (an int reduction).
  constexpr uint32_t kLoss = kNNFunctional | kDecomposable;
  registry.Add("cross_entropy(Tensor input, Tensor target, Tensor? weight=None, bool? size_average=None, "
               "int ignore_index=-100, bool? reduce=None, str reduction='mean', float label_smoothing=0.0) "
               "-> Tensor",
               OpKind::kComposite, kLoss | kChecksIndices, &CrossEntropyEager);
  registry.Add("nll_loss(Tensor input, Tensor target, Tensor? weight=None, bool? size_average=None, "
               "int ignore_index=-100, bool? reduce=None, str reduction='mean') -> Tensor",
               OpKind::kComposite, kLoss | kChecksIndices, &NllLossEager);
  registry.Add("mse_loss(Tensor input, Tensor target, bool? size_average=None, bool? reduce=None, "
               "str reduction='mean') -> Tensor",
               OpKind::kComposite, kLoss, &DistanceLossEager);
  registry.Add("l1_loss(Tensor input, Tensor target, bool? size_average=None, bool? reduce=None, "
               "str reduction='mean') -> Tensor",
               OpKind::kComposite, kLoss, &DistanceLossEager);
  registry.Add("smooth_l1_loss(Tensor input, Tensor target, bool? size_average=None, bool? reduce=None, "
               "str reduction='mean', float beta=1.0) -> Tensor",
               OpKind::kComposite, kLoss, &SmoothL1LossEager);
  registry.Add("binary_cross_entropy_with_logits(Tensor input, Tensor target, Tensor? weight=None, "
               "bool? size_average=None, bool? reduce=None, str reduction='mean', Tensor? pos_weight=None) "
               "-> Tensor",
               OpKind::kComposite, kLoss, &BceWithLogitsEager);
  registry.Add("kl_div(Tensor input, Tensor target, bool? size_average=None, bool? reduce=None, "
               "str reduction='mean', bool log_target=False) -> Tensor",
               OpKind::kComposite, kLoss, &KlDivEager);
}

}  // namespace dt
