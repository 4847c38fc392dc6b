#include "graph/nn_common.h"

#include <cmath>

#include "absl/strings/str_format.h"
#include "runtime/errors.h"

namespace dt {

const ArgValue& NamedArg(const OpDef& op, const OpArgs& args, absl::string_view name) {
  return args[static_cast<size_t>(op.schema.IndexOf(name))];
}

bool NamedIsNone(const OpDef& op, const OpArgs& args, absl::string_view name) {
  return std::holds_alternative<None>(NamedArg(op, args, name));
}

absl::StatusOr<LossReduction> ReductionArg(const OpDef& op, const OpArgs& args) {
  const bool legacy = op.schema.IndexOf("size_average") >= 0 &&
                      (!NamedIsNone(op, args, "size_average") || !NamedIsNone(op, args, "reduce"));
  if (legacy) {
    // PyTorch's _Reduction.legacy_get_string: each flag defaults to True.
    auto flag = [&](absl::string_view name) {
      const ArgValue& v = NamedArg(op, args, name);
      return std::holds_alternative<None>(v) || std::get<Scalar>(v).ToBool();
    };
    if (!flag("reduce")) return LossReduction::kNone;
    return flag("size_average") ? LossReduction::kMean : LossReduction::kSum;
  }
  const std::string& text = std::get<std::string>(NamedArg(op, args, "reduction"));
  if (text == "none") return LossReduction::kNone;
  if (text == "mean") return LossReduction::kMean;
  if (text == "sum") return LossReduction::kSum;
  return Error(ErrorKind::kValue, absl::StrFormat("%s(): %s is not a valid value for reduction "
                                                  "(expected 'none', 'mean' or 'sum')",
                                                  op.name(), text));
}

absl::StatusOr<Tensor> Reduce(const Tensor& loss, LossReduction reduction) {
  switch (reduction) {
    case LossReduction::kNone: return loss;
    case LossReduction::kMean: return Call("mean", {loss});
    case LossReduction::kSum: return Call("sum", {loss});
  }
  return absl::InternalError("unknown reduction");
}

absl::Status RequireFloatingInput(const Tensor& t, absl::string_view op) {
  if (IsFloating(t.dtype())) return absl::OkStatus();
  return Error(ErrorKind::kType, absl::StrFormat("%s(): expected a floating point input, got %s",
                                                 op, DTypeName(t.dtype())));
}

absl::StatusOr<Tensor> AlongDim(const Tensor& t, int64_t dim, int64_t ndim) {
  Tensor v = t;
  for (int64_t i = dim + 1; i < ndim; ++i) {
    DT_ASSIGN_OR_RETURN(v, Call("unsqueeze", {v, Scalar::Int(-1)}));
  }
  return v;
}

absl::StatusOr<Tensor> VectorNorm(const Tensor& x, double p, const ArgValue& dims, bool keepdim) {
  const Scalar keep = Scalar::Bool(keepdim);
  DT_ASSIGN_OR_RETURN(Tensor a, Call("abs", {x}));
  if (std::isinf(p)) return Call(p > 0 ? "amax" : "amin", {a, dims, keep});
  if (p == 0.0) {
    DT_ASSIGN_OR_RETURN(Tensor nonzero, Call("ne", {x, Scalar::Int(0)}));
    return Call("sum", {nonzero, dims, keep, x.dtype()});
  }
  if (p == 1.0) return Call("sum", {a, dims, keep});
  if (p == 2.0) {
    DT_ASSIGN_OR_RETURN(Tensor sq, Call("square", {x}));
    DT_ASSIGN_OR_RETURN(Tensor s, Call("sum", {sq, dims, keep}));
    return Call("sqrt", {s});
  }
  DT_ASSIGN_OR_RETURN(Tensor powered, Call("pow", {a, Scalar::Float(p)}));
  DT_ASSIGN_OR_RETURN(Tensor s, Call("sum", {powered, dims, keep}));
  return Call("pow", {s, Scalar::Float(1.0 / p)});
}

}  // namespace dt
