// Math composites of torch: isclose/allclose/equal, addmm/baddbmm, addcmul/addcdiv, count_nonzero,
// diff, lerp, hypot, logaddexp,
// outer, cross, diag, trace. allclose and equal return 0-d bool tensors (PyTorch returns a
// Python bool): `if dt.allclose(a, b):` reads the value, which under dt.jit is a data-dependent
// branch, as any tensor condition.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "graph/nn_common.h"
#include "graph/op_registry.h"
#include "runtime/errors.h"

namespace dt {
namespace {

absl::StatusOr<Tensor> IsClose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  if (a.dtype() != b.dtype()) {
    return Error(ErrorKind::kRuntime, absl::StrFormat("isclose(): expected both inputs to have same dtype, but "
                                                      "got %s and %s",
                                                      DTypeName(a.dtype()), DTypeName(b.dtype())));
  }
  DT_ASSIGN_OR_RETURN(Tensor close, Call("eq", {a, b}));
  if (a.dtype() == DType::kBool) return close;
  if (equal_nan) {
    DT_ASSIGN_OR_RETURN(Tensor nan_a, Call("isnan", {a}));
    DT_ASSIGN_OR_RETURN(Tensor nan_b, Call("isnan", {b}));
    DT_ASSIGN_OR_RETURN(Tensor both, Call("logical_and", {nan_a, nan_b}));
    DT_ASSIGN_OR_RETURN(close, Call("logical_or", {close, both}));
  }
  // Integers compare in float64 (|a - b| of int64 may overflow).
  Tensor fa = a, fb = b;
  if (!IsFloating(a.dtype())) {
    DT_ASSIGN_OR_RETURN(fa, Call("_to", {a, DType::kFloat64}));
    DT_ASSIGN_OR_RETURN(fb, Call("_to", {b, DType::kFloat64}));
  }
  DT_ASSIGN_OR_RETURN(Tensor diff, Call("sub", {fa, fb}));
  DT_ASSIGN_OR_RETURN(Tensor actual, Call("abs", {diff}));
  DT_ASSIGN_OR_RETURN(Tensor magnitude, Call("abs", {fb}));
  DT_ASSIGN_OR_RETURN(Tensor allowed, Call("mul", {magnitude, Scalar::Float(rtol)}));
  DT_ASSIGN_OR_RETURN(allowed, Call("add", {allowed, Scalar::Float(atol)}));
  DT_ASSIGN_OR_RETURN(Tensor within, Call("le", {actual, allowed}));
  DT_ASSIGN_OR_RETURN(Tensor finite, Call("isfinite", {actual}));
  DT_ASSIGN_OR_RETURN(within, Call("logical_and", {within, finite}));
  return Call("logical_or", {close, within});
}

absl::StatusOr<OpResult> IsCloseEager(const OpDef& op, const OpArgs& args) {
  DT_ASSIGN_OR_RETURN(Tensor close, IsClose(args.tensor(0), args.tensor(1), args.float_(2), args.float_(3),
                                            args.bool_(4)));
  if (op.name() == "isclose") return OneResult(close);
  DT_ASSIGN_OR_RETURN(Tensor all, Call("all", {close}));
  return OneResult(all);
}

// Same shape and every element equal; different shapes are simply not equal.
absl::StatusOr<OpResult> EqualEager(const OpDef&, const OpArgs& args) {
  const Tensor& a = args.tensor(0);
  const Tensor& b = args.tensor(1);
  if (Dims(a.sizes()) != Dims(b.sizes())) {
    DT_ASSIGN_OR_RETURN(Tensor no, Call("full", {Dims{}, Scalar::Bool(false), DType::kBool, a.device()}));
    return OneResult(no);
  }
  DT_ASSIGN_OR_RETURN(Tensor eq, Call("eq", {a, b}));
  DT_ASSIGN_OR_RETURN(Tensor all, Call("all", {eq}));
  return OneResult(all);
}

// beta * input + alpha * (m1 @ m2); beta 0 ignores input (NaN in it does not propagate).
absl::StatusOr<OpResult> AddmmEager(const OpDef& op, const OpArgs& args) {
  const bool batched = op.name() == "baddbmm";
  DT_ASSIGN_OR_RETURN(Tensor product, Call(batched ? "bmm" : "mm", {args.tensor(1), args.tensor(2)}));
  const Scalar beta = args.scalar(3), alpha = args.scalar(4);
  if (alpha.ToDouble() != 1.0) {
    DT_ASSIGN_OR_RETURN(product, Call("mul", {product, alpha}));
  }
  if (beta.ToDouble() == 0.0) return OneResult(product);
  Tensor input = args.tensor(0);
  if (beta.ToDouble() != 1.0) {
    DT_ASSIGN_OR_RETURN(input, Call("mul", {input, beta}));
  }
  DT_ASSIGN_OR_RETURN(Tensor y, Call("add", {input, product}));
  if (Dims(y.sizes()) != Dims(product.sizes())) {
    return Error(ErrorKind::kShape, absl::StrFormat("%s(): input of shape %s does not broadcast to the product's "
                                                    "shape %s",
                                                    op.name(), args.tensor(0).ShapeString(), product.ShapeString()));
  }
  return OneResult(y);
}

// start + w * (end - start) for w < 0.5, else end + (w - 1) * (end - start): exact at both ends,
// as PyTorch computes it.
absl::StatusOr<OpResult> LerpEager(const OpDef&, const OpArgs& args) {
  const Tensor& start = args.tensor(0);
  const Tensor& end = args.tensor(1);
  DT_RETURN_IF_ERROR(RequireFloatingInput(start, "lerp"));
  DT_ASSIGN_OR_RETURN(Tensor diff, Call("sub", {end, start}));
  if (!args.is_tensor(2)) {
    const double w = args.float_(2);
    DT_ASSIGN_OR_RETURN(Tensor step, Call("mul", {diff, Scalar::Float(w < 0.5 ? w : w - 1.0)}));
    DT_ASSIGN_OR_RETURN(Tensor y, Call("add", {w < 0.5 ? start : end, step}));
    return OneResult(y);
  }
  const Tensor& w = args.tensor(2);
  DT_ASSIGN_OR_RETURN(Tensor low_step, Call("mul", {diff, w}));
  DT_ASSIGN_OR_RETURN(Tensor low, Call("add", {start, low_step}));
  DT_ASSIGN_OR_RETURN(Tensor w_minus_one, Call("sub", {w, Scalar::Int(1)}));
  DT_ASSIGN_OR_RETURN(Tensor high_step, Call("mul", {diff, w_minus_one}));
  DT_ASSIGN_OR_RETURN(Tensor high, Call("add", {end, high_step}));
  DT_ASSIGN_OR_RETURN(Tensor small, Call("lt", {w, Scalar::Float(0.5)}));
  DT_ASSIGN_OR_RETURN(Tensor y, Call("where", {small, low, high}));
  return OneResult(y);
}

absl::StatusOr<OpResult> HypotEager(const OpDef&, const OpArgs& args) {
  DT_ASSIGN_OR_RETURN(Tensor a2, Call("square", {args.tensor(0)}));
  DT_ASSIGN_OR_RETURN(Tensor b2, Call("square", {args.tensor(1)}));
  DT_ASSIGN_OR_RETURN(Tensor s, Call("add", {a2, b2}));
  DT_RETURN_IF_ERROR(RequireFloatingInput(s, "hypot"));
  DT_ASSIGN_OR_RETURN(Tensor y, Call("sqrt", {s}));
  return OneResult(y);
}

// max(a, b) + log1p(exp(-|a - b|)); equal infinities give themselves (their difference is NaN).
absl::StatusOr<OpResult> LogaddexpEager(const OpDef&, const OpArgs& args) {
  const Tensor& a = args.tensor(0);
  const Tensor& b = args.tensor(1);
  DT_ASSIGN_OR_RETURN(Tensor m, Call("maximum", {a, b}));
  DT_RETURN_IF_ERROR(RequireFloatingInput(m, "logaddexp"));
  DT_ASSIGN_OR_RETURN(Tensor d, Call("sub", {a, b}));
  DT_ASSIGN_OR_RETURN(Tensor ad, Call("abs", {d}));
  DT_ASSIGN_OR_RETURN(Tensor nad, Call("neg", {ad}));
  DT_ASSIGN_OR_RETURN(Tensor e, Call("exp", {nad}));
  DT_ASSIGN_OR_RETURN(Tensor l, Call("log1p", {e}));
  DT_ASSIGN_OR_RETURN(Tensor y, Call("add", {m, l}));
  DT_ASSIGN_OR_RETURN(Tensor same, Call("eq", {a, b}));
  DT_ASSIGN_OR_RETURN(Tensor inf, Call("isinf", {a}));
  DT_ASSIGN_OR_RETURN(Tensor same_inf, Call("logical_and", {same, inf}));
  DT_ASSIGN_OR_RETURN(y, Call("where", {same_inf, m, y}));
  return OneResult(y);
}

absl::StatusOr<OpResult> OuterEager(const OpDef&, const OpArgs& args) {
  const Tensor& a = args.tensor(0);
  const Tensor& b = args.tensor(1);
  if (a.ndim() != 1 || b.ndim() != 1) {
    return Error(ErrorKind::kRuntime, absl::StrFormat("outer(): expected 1-D vectors, got %s and %s",
                                                      a.ShapeString(), b.ShapeString()));
  }
  DT_ASSIGN_OR_RETURN(Tensor column, Call("unsqueeze", {a, Scalar::Int(1)}));
  DT_ASSIGN_OR_RETURN(Tensor y, Call("mul", {column, b}));
  return OneResult(y);
}

// input + value * tensor1 * tensor2 (addcmul), input + value * tensor1 / tensor2 (addcdiv), in
// PyTorch's kernel's order: value times tensor1 first. What custom optimizers write
// (`exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)`).
absl::StatusOr<OpResult> AddcEager(const OpDef& op, const OpArgs& args) {
  const bool divide = op.name() == "addcdiv";
  if (divide && !IsFloating(args.tensor(1).dtype()) && !IsFloating(args.tensor(2).dtype())) {
    return Error(ErrorKind::kRuntime,
                 absl::StrFormat("Integer division with addcdiv is no longer supported, and in a future release "
                                 "addcdiv will perform a true division of tensor1 and tensor2. (tensor1 %s, "
                                 "tensor2 %s)", DTypeName(args.tensor(1).dtype()), DTypeName(args.tensor(2).dtype())));
  }
  DT_ASSIGN_OR_RETURN(Tensor scaled, Call("mul", {args.tensor(1), args.scalar(3)}));
  DT_ASSIGN_OR_RETURN(Tensor term, Call(divide ? "div" : "mul", {scaled, args.tensor(2)}));
  DT_ASSIGN_OR_RETURN(Tensor y, Call("add", {args.tensor(0), term}));
  return OneResult(y);
}

// The number of nonzero elements (over `dim`), as int64.
absl::StatusOr<OpResult> CountNonzeroEager(const OpDef&, const OpArgs& args) {
  DT_ASSIGN_OR_RETURN(Tensor nonzero, Call("ne", {args.tensor(0), Scalar::Int(0)}));
  ArgValue dims = args.is_none(1) ? ArgValue(None{}) : ArgValue(args.ints(1));
  DT_ASSIGN_OR_RETURN(Tensor count, Call("sum", {nonzero, dims, Scalar::Bool(false), DType::kInt64}));
  return OneResult(count);
}

// The n-th forward difference along `dim` (prepend/append joined first); bool inputs differ by
// xor (`ne`), as PyTorch's.
absl::StatusOr<OpResult> DiffEager(const OpDef&, const OpArgs& args) {
  Tensor x = args.tensor(0);
  const int64_t n = args.int_(1);
  if (x.ndim() == 0) return Error(ErrorKind::kRuntime, "diff expects input to be at least one-dimensional");
  if (n < 0) return Error(ErrorKind::kRuntime, absl::StrFormat("order must be non-negative but got %d", n));
  int64_t dim = args.int_(2);
  if (dim < -x.ndim() || dim >= x.ndim()) {
    return Error(ErrorKind::kIndex, absl::StrFormat("diff(): Dimension out of range (expected to be in range of "
                                                    "[%d, %d], but got %d)", -x.ndim(), x.ndim() - 1, dim));
  }
  if (dim < 0) dim += x.ndim();
  std::vector<Tensor> parts;
  if (!args.is_none(3)) parts.push_back(args.tensor(3));
  parts.push_back(x);
  if (!args.is_none(4)) parts.push_back(args.tensor(4));
  if (parts.size() > 1) {
    DT_ASSIGN_OR_RETURN(x, Call("cat", {parts, Scalar::Int(dim)}));
  }
  for (int64_t k = 0; k < n && x.size(dim) > 0; ++k) {
    const int64_t length = x.size(dim) - 1;
    DT_ASSIGN_OR_RETURN(Tensor later, Call("narrow", {x, Scalar::Int(dim), Scalar::Int(1), Scalar::Int(length)}));
    DT_ASSIGN_OR_RETURN(Tensor earlier, Call("narrow", {x, Scalar::Int(dim), Scalar::Int(0), Scalar::Int(length)}));
    DT_ASSIGN_OR_RETURN(x, Call(x.dtype() == DType::kBool ? "ne" : "sub", {later, earlier}));
  }
  return OneResult(x);
}

}  // namespace

void RegisterMathOps(OpRegistry& registry) {
  constexpr uint32_t kBoth = kMethod | kFunction;
  registry.Add("isclose(Tensor input, Tensor other, float rtol=1e-05, float atol=1e-08, bool equal_nan=False) "
               "-> Tensor",
               OpKind::kComposite, kBoth | kDecomposable, &IsCloseEager);
  registry.Add("allclose(Tensor input, Tensor other, float rtol=1e-05, float atol=1e-08, bool equal_nan=False) "
               "-> Tensor",
               OpKind::kComposite, kBoth | kDecomposable, &IsCloseEager);
  registry.Add("equal(Tensor input, Tensor other) -> Tensor", OpKind::kComposite, kBoth, &EqualEager);
  registry.Add("addmm(Tensor input, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor",
               OpKind::kComposite, kBoth | kInplaceVariant | kDecomposable, &AddmmEager);
  registry.Add("baddbmm(Tensor input, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1) -> Tensor",
               OpKind::kComposite, kBoth | kInplaceVariant | kDecomposable, &AddmmEager);
  registry.Add("lerp(Tensor input, Tensor end, Operand weight) -> Tensor", OpKind::kComposite,
               kBoth | kInplaceVariant | kDecomposable, &LerpEager);
  for (const char* name : {"addcmul", "addcdiv"}) {
    registry.Add(absl::StrCat(name, "(Tensor input, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor"),
                 OpKind::kComposite, kBoth | kInplaceVariant | kDecomposable, &AddcEager);
  }
  registry.Add("count_nonzero(Tensor input, int[]? dim=None) -> Tensor", OpKind::kComposite, kBoth | kDecomposable,
               &CountNonzeroEager);
  // narrow by sizes: whole in graphs.
  registry.Add("diff(Tensor input, int n=1, int dim=-1, Tensor? prepend=None, Tensor? append=None) -> Tensor",
               OpKind::kComposite, kBoth, &DiffEager);
  registry.Add("hypot(Tensor input, Tensor other) -> Tensor", OpKind::kComposite,
               kBoth | kInplaceVariant | kDecomposable, &HypotEager);
  registry.Add("logaddexp(Tensor input, Tensor other) -> Tensor", OpKind::kComposite, kBoth | kDecomposable,
               &LogaddexpEager);
  registry.Add("outer(Tensor input, Tensor vec2) -> Tensor", OpKind::kComposite, kBoth | kDecomposable, &OuterEager);
}

}  // namespace dt
