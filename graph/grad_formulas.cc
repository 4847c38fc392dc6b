#include "graph/grad_formulas.h"

#include <algorithm>
#include <limits>

#include "runtime/errors.h"
#include "runtime/indexing.h"

namespace dt::grad {

absl::StatusOr<Tensor> OneMinus(const Tensor& x) {
  DT_ASSIGN_OR_RETURN(Tensor t, Op("sub", {x, Scalar::Int(1)}));
  return Op("neg", {t});
}

absl::StatusOr<ArgGrads> ProductGrad(const GradContext& c) {
  ArgGrads grads = NoGrads(c);
  if (c.needs(0)) {
    DT_ASSIGN_OR_RETURN(grads[0], Op("mul", {c.grad(), c.args[1]}));
  }
  if (c.needs(1)) {
    DT_ASSIGN_OR_RETURN(grads[1], Op("mul", {c.grad(), c.args[0]}));
  }
  return grads;
}

absl::StatusOr<Tensor> ZerosFor(const Tensor& like, const Tensor& grad) {
  return Op("full", {like.sizes(), Scalar::Int(0), grad.dtype(), grad.device()});
}

absl::StatusOr<Dims> ReducedDims(const ArgValue& dim, int64_t ndim) {
  Dims dims;
  if (std::holds_alternative<None>(dim)) {
    for (int64_t d = 0; d < ndim; ++d) dims.push_back(d);
    return dims;
  }
  for (int64_t d : std::get<Dims>(dim)) {
    DT_ASSIGN_OR_RETURN(int64_t wrapped, NormalizeDim(d, ndim));
    dims.push_back(wrapped);
  }
  std::sort(dims.begin(), dims.end());
  return dims;
}

absl::StatusOr<Tensor> UnsqueezeReduced(const Tensor& grad, DimsView dims, bool keepdim) {
  Tensor g = grad;
  if (keepdim) return g;
  for (int64_t d : dims) {  // ascending, so each dim lands where the input had it
    DT_ASSIGN_OR_RETURN(g, Op("unsqueeze", {g, Scalar::Int(d)}));
  }
  return g;
}

double RmsNormDefaultEps(DType dtype) {
  if (dtype == DType::kFloat64) return std::numeric_limits<double>::epsilon();
  if (dtype == DType::kFloat16) return 0.0009765625;
  if (dtype == DType::kBFloat16) return 0.0078125;
  return std::numeric_limits<float>::epsilon();
}

Dims EncodedSlice(int64_t dim, int64_t start, int64_t stop) {
  std::vector<IndexItem> items(dim, IndexItem{.kind = IndexItem::Kind::kSlice});
  items.push_back(IndexItem{.kind = IndexItem::Kind::kSlice, .start = start, .stop = stop});
  return EncodeIndex(items);
}

}  // namespace dt::grad
