// graph/grad_formulas.h: small building blocks the derivative formulas share.
//
// Formulas are written with registry ops through Call(), so they run on any device and, under
// create_graph, record their own backward nodes. These helpers only name recurring shapes of
// that code (a scalar operand, the gradient of a reduction spread back over its input).
#ifndef DYNTRACE_GRAPH_GRAD_FORMULAS_H_
#define DYNTRACE_GRAPH_GRAD_FORMULAS_H_

#include <vector>

#include "absl/status/statusor.h"
#include "graph/derivative.h"
#include "graph/op_registry.h"

namespace dt::grad {

inline ArgValue Num(double v) { return Scalar::Float(v); }

// Call() by name; the formulas' one way to compute.
inline absl::StatusOr<Tensor> Op(absl::string_view name, std::vector<ArgValue> args) {
  return Call(name, std::move(args));
}

// ArgGrads for `c` with every entry None.
inline ArgGrads NoGrads(const GradContext& c) { return ArgGrads(c.args.size(), None{}); }

// A result for ops whose only differentiable argument is the first.
inline absl::StatusOr<ArgGrads> FirstGrad(const GradContext& c, absl::StatusOr<Tensor> grad) {
  if (!grad.ok()) return grad.status();
  ArgGrads grads = NoGrads(c);
  grads[0] = *std::move(grad);
  return grads;
}

// 1 - x.
absl::StatusOr<Tensor> OneMinus(const Tensor& x);

// The gradients of a * b (mul, and dot, whose output gradient is 0-d): g b and g a.
absl::StatusOr<ArgGrads> ProductGrad(const GradContext& c);

// Zeros with `like`'s sizes (a meta tensor is fine) and `grad`'s dtype and device.
absl::StatusOr<Tensor> ZerosFor(const Tensor& like, const Tensor& grad);

// The dims a reduction folded: `dim` (None: all) wrapped into [0, ndim).
absl::StatusOr<Dims> ReducedDims(const ArgValue& dim, int64_t ndim);

// A reduction's output gradient viewed with the folded dims put back as size 1 (a no-op when the
// reduction kept them), ready to broadcast against the input.
absl::StatusOr<Tensor> UnsqueezeReduced(const Tensor& grad, DimsView dims, bool keepdim);

// rms_norm's eps when None: the dtype's machine epsilon, as PyTorch.
double RmsNormDefaultEps(DType dtype);

// `items` as _getitem/_setitem's encoded index argument.
Dims EncodedSlice(int64_t dim, int64_t start, int64_t stop);

}  // namespace dt::grad

#endif  // DYNTRACE_GRAPH_GRAD_FORMULAS_H_
