// graph/pointwise.h: the one eager implementation shared by every pointwise op.
//
// Given a pointwise OpDef, RunPointwise promotes the operand dtypes (PyTorch rules), broadcasts
// the operands, picks the op's loop for the compute dtype and writes a new tensor, or `out` for
// in-place forms. Meta operands produce a correctly-shaped meta result without running a loop.
#ifndef DYNTRACE_GRAPH_POINTWISE_H_
#define DYNTRACE_GRAPH_POINTWISE_H_

#include "absl/status/statusor.h"
#include "graph/op_registry.h"

namespace dt {

// The result dtype and shape of a pointwise op on `args`, without computing anything.
struct PointwiseSignature {
  DType compute_dtype;
  DType result_dtype;
  Dims shape;
  Device device;
};
[[nodiscard]] absl::StatusOr<PointwiseSignature> InferPointwise(const OpDef& op,
                                                                const OpArgs& args);

// REQUIRES: op.kind == kPointwise. `out`, when given, receives the result (in-place ops); its
// shape must equal the broadcast shape and the result dtype must be castable to its dtype.
[[nodiscard]] absl::StatusOr<Tensor> RunPointwise(const OpDef& op, const OpArgs& args,
                                                  const Tensor* out);

}  // namespace dt

#endif  // DYNTRACE_GRAPH_POINTWISE_H_
