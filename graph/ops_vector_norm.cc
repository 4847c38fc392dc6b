// Norms: torch.norm / Tensor.norm, torch.linalg.vector_norm and torch.linalg.norm (vector
// norms of any order; matrix norms 'fro', 1, -1, inf, -inf). Orders needing singular values
// (2, -2, 'nuc' of a matrix) raise NotImplementedError. All are sums, maxima and powers of
// registry ops (graph/nn_common.h VectorNorm), so they decompose.
#include <cmath>
#include <limits>

#include "absl/strings/str_format.h"
#include "graph/nn_common.h"
#include "graph/op_registry.h"
#include "runtime/errors.h"

namespace dt {
namespace {

// The input converted to `dtype=` when given; a floating input required (as PyTorch).
absl::StatusOr<Tensor> NormInput(const OpArgs& args, size_t dtype_index, absl::string_view op) {
  Tensor x = args.tensor(0);
  if (auto dtype = args.dtype(dtype_index)) {
    DT_ASSIGN_OR_RETURN(x, Call("_to", {x, *dtype}));
  }
  DT_RETURN_IF_ERROR(RequireFloatingInput(x, op));
  return x;
}

ArgValue DimsArg(const OpArgs& args, size_t i) {
  return args.is_none(i) ? ArgValue(None{}) : ArgValue(args.ints(i));
}

// torch.norm and linalg.vector_norm: (input, p/ord, dim, keepdim, *, dtype); a string p is
// 'fro' (the 2-norm of the elements) or 'nuc'.
absl::StatusOr<OpResult> VectorNormEager(const OpDef& op, const OpArgs& args) {
  const std::string name = op.name().substr(0, op.name().find('.'));
  DT_ASSIGN_OR_RETURN(Tensor x, NormInput(args, 4, name));
  double p = 2.0;
  if (std::holds_alternative<std::string>(args[1])) {
    if (args.string(1) != "fro") {
      return Error(ErrorKind::kNotImplemented, absl::StrFormat("%s(): p='%s' is not supported (it needs singular "
                                                               "values); use 'fro' or a number",
                                                               name, args.string(1)));
    }
  } else if (!args.is_none(1)) {
    p = args.float_(1);
  }
  DT_ASSIGN_OR_RETURN(Tensor y, VectorNorm(x, p, DimsArg(args, 2), args.bool_(3)));
  return OneResult(y);
}

absl::StatusOr<std::pair<int64_t, int64_t>> MatrixDims(const Tensor& x, const OpArgs& args) {
  Dims dims = args.is_none(2) ? Dims{0, 1} : args.ints(2);
  if (dims.size() != 2) {
    return Error(ErrorKind::kRuntime, absl::StrFormat("linalg.norm(): a matrix norm needs 2 dims, got %s",
                                                      DimsToString(dims)));
  }
  for (int64_t& d : dims) {
    if (d < -x.ndim() || d >= x.ndim()) {
      return Error(ErrorKind::kIndex, absl::StrFormat("linalg.norm(): dim %d out of range for input %s", d,
                                                      x.ShapeString()));
    }
    if (d < 0) d += x.ndim();
  }
  return std::make_pair(dims[0], dims[1]);
}

// Matrix norms over (rows, cols): max (or min) over one dim of the sum of |x| over the other.
absl::StatusOr<Tensor> MatrixNorm(const Tensor& x, double ord, int64_t rows, int64_t cols, bool keepdim) {
  if (std::abs(ord) != 1.0 && !std::isinf(ord)) {
    return Error(ErrorKind::kNotImplemented, absl::StrFormat("linalg.norm(): matrix ord %g needs singular values "
                                                             "and is not supported (use 'fro', 1, -1, inf, -inf)",
                                                             ord));
  }
  const int64_t summed = std::isinf(ord) ? cols : rows, extreme = std::isinf(ord) ? rows : cols;
  DT_ASSIGN_OR_RETURN(Tensor a, Call("abs", {x}));
  DT_ASSIGN_OR_RETURN(Tensor s, Call("sum", {a, Dims{summed}, Scalar::Bool(true)}));
  DT_ASSIGN_OR_RETURN(Tensor m, Call(ord > 0 ? "amax" : "amin", {s, Dims{extreme}, Scalar::Bool(true)}));
  if (keepdim) return m;
  return Call("squeeze", {m, Dims{rows, cols}});
}

// linalg.norm(A, ord=None, dim=None, keepdim=False, *, dtype=None).
absl::StatusOr<OpResult> LinalgNormEager(const OpDef&, const OpArgs& args) {
  DT_ASSIGN_OR_RETURN(Tensor x, NormInput(args, 4, "linalg.norm"));
  const bool keepdim = args.bool_(3);
  const bool text = std::holds_alternative<std::string>(args[1]);
  const bool matrix = text || (!args.is_none(1) && (args.is_none(2) ? x.ndim() == 2 : args.ints(2).size() == 2));
  if (!args.is_none(1) && !matrix && args.is_none(2) && x.ndim() != 1) {
    return Error(ErrorKind::kRuntime, absl::StrFormat("linalg.norm(): input must be 1-D or 2-D when dim is None "
                                                      "and ord is not None, got %s", x.ShapeString()));
  }
  if (args.is_none(1) || (!matrix)) {
    DT_ASSIGN_OR_RETURN(Tensor y, VectorNorm(x, args.is_none(1) ? 2.0 : args.float_(1), DimsArg(args, 2), keepdim));
    return OneResult(y);
  }
  DT_ASSIGN_OR_RETURN(auto dims, MatrixDims(x, args));
  if (text) {
    if (args.string(1) != "fro") {
      return Error(ErrorKind::kNotImplemented, absl::StrFormat("linalg.norm(): ord='%s' needs singular values and "
                                                               "is not supported", args.string(1)));
    }
    DT_ASSIGN_OR_RETURN(Tensor y, VectorNorm(x, 2.0, Dims{dims.first, dims.second}, keepdim));
    return OneResult(y);
  }
  DT_ASSIGN_OR_RETURN(Tensor y, MatrixNorm(x, args.float_(1), dims.first, dims.second, keepdim));
  return OneResult(y);
}

}  // namespace

void RegisterNormReductionOps(OpRegistry& registry) {
  constexpr uint32_t kBoth = kMethod | kFunction | kDecomposable;
  registry.Add("norm(Tensor input, Scalar? p=2, int[]? dim=None, bool keepdim=False, *, DType? dtype=None) "
               "-> Tensor",
               OpKind::kComposite, kBoth, &VectorNormEager);
  registry.Add("norm.str(Tensor input, str p, int[]? dim=None, bool keepdim=False, *, DType? dtype=None) -> Tensor",
               OpKind::kComposite, kBoth, &VectorNormEager);
  registry.Add("linalg_vector_norm(Tensor input, Scalar ord=2, int[]? dim=None, bool keepdim=False, *, "
               "DType? dtype=None) -> Tensor",
               OpKind::kComposite, kLinalg | kDecomposable, &VectorNormEager);
  registry.Add("linalg_norm(Tensor input, Scalar? ord=None, int[]? dim=None, bool keepdim=False, *, "
               "DType? dtype=None) -> Tensor",
               OpKind::kComposite, kLinalg | kDecomposable, &LinalgNormEager);
  registry.Add("linalg_norm.str(Tensor input, str ord, int[]? dim=None, bool keepdim=False, *, "
               "DType? dtype=None) -> Tensor",
               OpKind::kComposite, kLinalg | kDecomposable, &LinalgNormEager);
}

}  // namespace dt
