// graph/reduction.h: the eager implementation shared by the folding reductions.
#ifndef DYNTRACE_GRAPH_REDUCTION_H_
#define DYNTRACE_GRAPH_REDUCTION_H_

#include <optional>

#include "absl/status/statusor.h"
#include "graph/op_registry.h"

namespace dt {

// Normalises `dims` (None or empty: all dims), rejecting out-of-range and repeated dims.
[[nodiscard]] absl::StatusOr<Dims> NormalizeReductionDims(const std::optional<Dims>& dims,
                                                          int64_t ndim);

// The accumulator dtype: wide for sums and products, the value type for min/max (float for
// float16), bool for any/all.
DType AccumulatorDType(ReductionCombiner c, DType input);
// The value an accumulator starts from.
Scalar ReductionIdentity(ReductionCombiner c, DType accumulator);

// REQUIRES: op.kind == kReduction with a combiner. `dtype` converts the input first (sum/prod).
[[nodiscard]] absl::StatusOr<Tensor> RunReduction(const OpDef& op, const Tensor& input,
                                                  const std::optional<Dims>& dims, bool keepdim,
                                                  std::optional<DType> dtype);

}  // namespace dt

#endif  // DYNTRACE_GRAPH_REDUCTION_H_
