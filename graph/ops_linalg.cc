// matmul / mm / bmm / dot: shape rules here, the multiply in runtime/blas.cc.
#include "absl/strings/str_format.h"
#include "graph/op_registry.h"
#include "runtime/blas.h"
#include "runtime/copy.h"
#include "runtime/cuda_blas.h"
#include "runtime/cuda_tensor.h"
#include "runtime/errors.h"

namespace dt {
namespace {

absl::Status CheckOperands(const Tensor& a, const Tensor& b, absl::string_view op) {
  if (a.dtype() != b.dtype()) {
    return Error(ErrorKind::kType,
                 absl::StrFormat("%s: expected both operands to have the same dtype, but got %s "
                                 "and %s",
                                 op, DTypeName(a.dtype()), DTypeName(b.dtype())));
  }
  if (a.device() != b.device()) {
    return Error(ErrorKind::kValue, absl::StrFormat("%s: operands are on %s and %s", op,
                                                    a.device().ToString(), b.device().ToString()));
  }
  return absl::OkStatus();
}

absl::Status ShapeMismatch(absl::string_view op, const Tensor& a, const Tensor& b) {
  return Error(ErrorKind::kShape,
               absl::StrFormat("%s: shapes %s and %s cannot be multiplied (inner sizes %d and %d "
                               "differ)",
                               op, a.ShapeString(), b.ShapeString(), a.size(a.ndim() - 1),
                               b.size(b.ndim() >= 2 ? b.ndim() - 2 : 0)));
}

// General case: a [..., M, K] @ b [..., K, N] with broadcast batch dims.
absl::StatusOr<Tensor> BatchedMatmul(const Tensor& a, const Tensor& b, absl::string_view op) {
  const int64_t m = a.size(a.ndim() - 2), k = a.size(a.ndim() - 1);
  const int64_t k2 = b.size(b.ndim() - 2), n = b.size(b.ndim() - 1);
  if (k != k2) return ShapeMismatch(op, a, b);
  DimsView a_batch(a.sizes().data(), a.ndim() - 2), b_batch(b.sizes().data(), b.ndim() - 2);
  auto batch = BroadcastShapes(a_batch, b_batch);
  if (!batch.ok()) {
    return Error(ErrorKind::kShape, absl::StrFormat("%s: batch dims of %s and %s: %s", op,
                                                    a.ShapeString(), b.ShapeString(),
                                                    batch.status().message()));
  }
  const int64_t batches = NumelOf(*batch);
  auto expand = [&](const Tensor& t, int64_t rows, int64_t cols) -> absl::StatusOr<Tensor> {
    Dims full = *batch;
    full.push_back(rows);
    full.push_back(cols);
    DT_ASSIGN_OR_RETURN(Dims strides, BroadcastStrides(t, full));
    Tensor view = t.AsStrided(full, strides, t.offset());
    // Collapse batch dims into one; needs a uniform batch stride, else copy.
    Dims flat_strides(3);
    if (batch->empty()) {
      flat_strides = {rows * cols, strides[0], strides[1]};
      return t.AsStrided({1, rows, cols}, flat_strides, t.offset());
    }
    auto collapsed = ViewStrides(full, strides, {batches, rows, cols});
    if (collapsed.has_value()) return t.AsStrided({batches, rows, cols}, *collapsed, t.offset());
    Tensor copy = Contiguous(view);
    return copy.AsStrided({batches, rows, cols}, {rows * cols, cols, 1}, copy.offset());
  };
  DT_ASSIGN_OR_RETURN(Tensor a3, expand(a, m, k));
  DT_ASSIGN_OR_RETURN(Tensor b3, expand(b, k, n));
  Tensor out3 = Tensor::Empty({batches, m, n}, a.dtype(), a.device());
  if (IsCuda(out3)) {
    DT_RETURN_IF_ERROR(CudaBatchedGemm(a3, b3, out3));
  } else {
    BatchedGemm(a3, b3, out3);
  }
  Dims out_shape = *batch;
  out_shape.push_back(m);
  out_shape.push_back(n);
  return out3.AsStrided(out_shape, ContiguousStrides(out_shape), out3.offset());
}

absl::StatusOr<Tensor> Matmul(const Tensor& a, const Tensor& b) {
  DT_RETURN_IF_ERROR(CheckOperands(a, b, "matmul"));
  if (a.ndim() == 0 || b.ndim() == 0) {
    return Error(ErrorKind::kValue,
                 absl::StrFormat("matmul: both arguments need at least 1 dimension, got shapes %s "
                                 "and %s",
                                 a.ShapeString(), b.ShapeString()));
  }
  // 1-d operands become matrices, and the added dim is dropped from the result.
  Tensor a2 = a.ndim() == 1 ? a.AsStrided({1, a.size(0)}, {0, a.stride(0)}, a.offset()) : a;
  Tensor b2 = b.ndim() == 1 ? b.AsStrided({b.size(0), 1}, {b.stride(0), 0}, b.offset()) : b;
  if (a2.size(a2.ndim() - 1) != b2.size(b2.ndim() - 2)) return ShapeMismatch("matmul", a, b);
  DT_ASSIGN_OR_RETURN(Tensor out, BatchedMatmul(a2, b2, "matmul"));
  Dims shape = out.sizes();
  if (b.ndim() == 1) shape.erase(shape.end() - 1);
  if (a.ndim() == 1) shape.erase(shape.end() - (b.ndim() == 1 ? 1 : 2));
  return out.AsStrided(shape, ContiguousStrides(shape), out.offset());
}

absl::StatusOr<OpResult> MatmulEager(const OpDef&, const OpArgs& args) {
  DT_ASSIGN_OR_RETURN(Tensor out, Matmul(args.tensor(0), args.tensor(1)));
  return OpResult{out};
}

absl::StatusOr<OpResult> FixedRankEager(const OpDef& op, const OpArgs& args) {
  const Tensor& a = args.tensor(0);
  const Tensor& b = args.tensor(1);
  const int64_t rank = op.name() == "mm" ? 2 : op.name() == "bmm" ? 3 : 1;
  if (a.ndim() != rank || b.ndim() != rank) {
    return Error(ErrorKind::kShape,
                 absl::StrFormat("%s: expected %d-D tensors, got shapes %s and %s", op.name(), rank,
                                 a.ShapeString(), b.ShapeString()));
  }
  if (rank == 3 && a.size(0) != b.size(0)) {
    return Error(ErrorKind::kShape, absl::StrFormat("bmm: batch sizes differ: %s and %s",
                                                    a.ShapeString(), b.ShapeString()));
  }
  if (rank == 1 && a.size(0) != b.size(0)) {
    return Error(ErrorKind::kShape,
                 absl::StrFormat("dot: inconsistent tensor size, expected tensor %s and src %s to "
                                 "have the same number of elements",
                                 a.ShapeString(), b.ShapeString()));
  }
  DT_ASSIGN_OR_RETURN(Tensor out, Matmul(a, b));
  return OpResult{out};
}

}  // namespace

void RegisterLinalgOps(OpRegistry& registry) {
  constexpr uint32_t kBoth = kMethod | kFunction | kCudaNative;
  registry.Add("matmul(Tensor input, Tensor other) -> Tensor", OpKind::kExtern, kBoth, &MatmulEager).shape_rule =
      ShapeRule::kMatmul;
  registry.Add("mm(Tensor input, Tensor mat2) -> Tensor", OpKind::kExtern, kBoth, &FixedRankEager);
  registry.Add("bmm(Tensor input, Tensor mat2) -> Tensor", OpKind::kExtern, kBoth, &FixedRankEager);
  registry.Add("dot(Tensor input, Tensor other) -> Tensor", OpKind::kExtern, kBoth, &FixedRankEager);
}

}  // namespace dt
