// Derivatives of reductions, softmax-like composites (which declare a cheaper formula than their
// decomposition) and matrix products.
#include <algorithm>

#include "graph/grad_formulas.h"
#include "runtime/errors.h"

namespace dt {
namespace {

using grad::FirstGrad;
using grad::Op;

// sum and mean: the output gradient spread over every folded element (divided by their count).
absl::StatusOr<ArgGrads> SumGrad(const GradContext& c) {
  const Tensor& input = c.input(0);
  DT_ASSIGN_OR_RETURN(Dims dims, grad::ReducedDims(c.args[1], input.ndim()));
  DT_ASSIGN_OR_RETURN(Tensor g, grad::UnsqueezeReduced(c.grad(), dims, c.args.bool_(2)));
  if (c.op.name() == "mean") {
    int64_t count = 1;
    for (int64_t d : dims) count *= input.size(d);
    DT_ASSIGN_OR_RETURN(g, Op("div", {g, Scalar::Int(count)}));
  }
  return FirstGrad(c, Op("broadcast_to", {g, input.sizes()}));
}

// amax/amin: the gradient shared evenly among the elements equal to the extreme.
absl::StatusOr<ArgGrads> ExtremeGrad(const GradContext& c) {
  const Tensor& input = c.input(0);
  DT_ASSIGN_OR_RETURN(Dims dims, grad::ReducedDims(c.args[1], input.ndim()));
  const bool keepdim = c.args.bool_(2);
  DT_ASSIGN_OR_RETURN(Tensor extreme, grad::UnsqueezeReduced(c.output(), dims, keepdim));
  DT_ASSIGN_OR_RETURN(Tensor hits, Op("eq", {input, extreme}));
  DT_ASSIGN_OR_RETURN(Tensor count, Op("sum", {hits, dims, Scalar::Bool(true), c.grad().dtype()}));
  DT_ASSIGN_OR_RETURN(Tensor g, grad::UnsqueezeReduced(c.grad(), dims, keepdim));
  DT_ASSIGN_OR_RETURN(g, Op("div", {g, count}));
  return FirstGrad(c, Op("where", {hits, g, Scalar::Int(0)}));
}

// For rows of `x` along its last dim: each element's product of the row's other elements,
// without dividing (so zeros are handled), from exclusive products taken from both ends.
absl::StatusOr<Tensor> ProductOfOthers(const Tensor& x) {
  const int64_t last = x.ndim() - 1, n = x.size(last);
  Dims one_sizes = x.sizes();
  one_sizes[last] = 1;
  DT_ASSIGN_OR_RETURN(Tensor ones, Op("full", {one_sizes, Scalar::Int(1), x.dtype(), x.device()}));
  DT_ASSIGN_OR_RETURN(Tensor head, Op("narrow", {x, Scalar::Int(last), Scalar::Int(0), Scalar::Int(n - 1)}));
  DT_ASSIGN_OR_RETURN(Tensor tail, Op("narrow", {x, Scalar::Int(last), Scalar::Int(1), Scalar::Int(n - 1)}));
  DT_ASSIGN_OR_RETURN(Tensor before, Op("cumprod", {head, Scalar::Int(last), None{}}));
  DT_ASSIGN_OR_RETURN(before, Op("cat", {std::vector<Tensor>{ones, before}, Scalar::Int(last)}));
  DT_ASSIGN_OR_RETURN(Tensor after, Op("flip", {tail, Dims{last}}));
  DT_ASSIGN_OR_RETURN(after, Op("cumprod", {after, Scalar::Int(last), None{}}));
  DT_ASSIGN_OR_RETURN(after, Op("flip", {after, Dims{last}}));
  DT_ASSIGN_OR_RETURN(after, Op("cat", {std::vector<Tensor>{after, ones}, Scalar::Int(last)}));
  return Op("mul", {before, after});
}

// prod: the folded dims are laid out last as one row, whose products of others are laid back.
absl::StatusOr<ArgGrads> ProdGrad(const GradContext& c) {
  const Tensor& input = c.input(0);
  DT_ASSIGN_OR_RETURN(Dims dims, grad::ReducedDims(c.args[1], input.ndim()));
  DT_ASSIGN_OR_RETURN(Tensor g, grad::UnsqueezeReduced(c.grad(), dims, c.args.bool_(2)));
  if (input.numel() == 0) return FirstGrad(c, Op("broadcast_to", {g, input.sizes()}));
  Dims order, rows, permuted_sizes;
  for (int64_t d = 0; d < input.ndim(); ++d) {
    if (std::find(dims.begin(), dims.end(), d) != dims.end()) continue;
    order.push_back(d);
    rows.push_back(input.size(d));
  }
  permuted_sizes = rows;
  int64_t folded = 1;
  for (int64_t d : dims) {
    order.push_back(d);
    permuted_sizes.push_back(input.size(d));
    folded *= input.size(d);
  }
  rows.push_back(folded);
  DT_ASSIGN_OR_RETURN(Tensor x, Op("permute", {input, order}));
  DT_ASSIGN_OR_RETURN(x, Op("reshape", {x, rows}));
  DT_ASSIGN_OR_RETURN(Tensor others, ProductOfOthers(x));
  DT_ASSIGN_OR_RETURN(others, Op("reshape", {others, permuted_sizes}));
  Dims inverse(order.size());
  for (size_t i = 0; i < order.size(); ++i) inverse[order[i]] = static_cast<int64_t>(i);
  DT_ASSIGN_OR_RETURN(others, Op("permute", {others, inverse}));
  return FirstGrad(c, Op("mul", {g, others}));
}

absl::StatusOr<ArgGrads> SoftmaxGrad(const GradContext& c) {  // y (g - sum(g y))
  const Tensor& y = c.output();
  DT_ASSIGN_OR_RETURN(Tensor gy, Op("mul", {c.grad(), y}));
  DT_ASSIGN_OR_RETURN(Tensor total, Op("sum", {gy, Dims{c.args.int_(1)}, Scalar::Bool(true), None{}}));
  DT_ASSIGN_OR_RETURN(Tensor centred, Op("sub", {c.grad(), total}));
  return FirstGrad(c, Op("mul", {y, centred}));
}

absl::StatusOr<ArgGrads> LogSoftmaxGrad(const GradContext& c) {  // g - exp(y) sum(g)
  DT_ASSIGN_OR_RETURN(Tensor p, Op("exp", {c.output()}));
  DT_ASSIGN_OR_RETURN(Tensor total, Op("sum", {c.grad(), Dims{c.args.int_(1)}, Scalar::Bool(true), None{}}));
  DT_ASSIGN_OR_RETURN(Tensor spread, Op("mul", {p, total}));
  return FirstGrad(c, Op("sub", {c.grad(), spread}));
}

// The normalized dims of layer_norm/rms_norm: the last len(normalized_shape) of the input.
Dims NormalizedDims(const GradContext& c) {
  Dims dims;
  const int64_t k = static_cast<int64_t>(c.args.ints(1).size());
  for (int64_t d = c.input(0).ndim() - k; d < c.input(0).ndim(); ++d) dims.push_back(d);
  return dims;
}

absl::StatusOr<Tensor> MeanOver(const Tensor& t, const Dims& dims) {
  return Op("mean", {t, dims, Scalar::Bool(true), None{}});
}

// Given x̂ (normalized input), its inverse scale r and the output gradient g of y = x̂ w + b:
// w's gradient g x̂ and b's g (the engine sums the leading dims), and the input's
// r (ĝ - mean(ĝ) - x̂ mean(ĝ x̂)) with ĝ = g w; rms_norm has no centring, so no mean(ĝ) term.
absl::StatusOr<ArgGrads> NormGrads(const GradContext& c, const Tensor& xhat, const Tensor& r, bool centred) {
  const Dims dims = NormalizedDims(c);
  ArgGrads grads = grad::NoGrads(c);
  if (c.needs(2)) {
    DT_ASSIGN_OR_RETURN(grads[2], Op("mul", {c.grad(), xhat}));
  }
  if (centred && c.needs(3)) grads[3] = c.grad();
  if (!c.needs(0)) return grads;
  Tensor g = c.grad();
  if (!c.args.is_none(2)) {
    DT_ASSIGN_OR_RETURN(g, Op("mul", {g, c.args[2]}));
  }
  DT_ASSIGN_OR_RETURN(Tensor gx, Op("mul", {g, xhat}));
  DT_ASSIGN_OR_RETURN(Tensor projection, MeanOver(gx, dims));
  DT_ASSIGN_OR_RETURN(projection, Op("mul", {xhat, projection}));
  DT_ASSIGN_OR_RETURN(Tensor dx, Op("sub", {g, projection}));
  if (centred) {
    DT_ASSIGN_OR_RETURN(Tensor mean_g, MeanOver(g, dims));
    DT_ASSIGN_OR_RETURN(dx, Op("sub", {dx, mean_g}));
  }
  DT_ASSIGN_OR_RETURN(grads[0], Op("mul", {dx, r}));
  return grads;
}

absl::StatusOr<ArgGrads> LayerNormGrad(const GradContext& c) {
  const Dims dims = NormalizedDims(c);
  DT_ASSIGN_OR_RETURN(Tensor mean, MeanOver(c.input(0), dims));
  DT_ASSIGN_OR_RETURN(Tensor centred, Op("sub", {c.input(0), mean}));
  DT_ASSIGN_OR_RETURN(Tensor sq, Op("square", {centred}));
  DT_ASSIGN_OR_RETURN(Tensor var, MeanOver(sq, dims));
  DT_ASSIGN_OR_RETURN(var, Op("add", {var, c.args[4]}));
  DT_ASSIGN_OR_RETURN(Tensor r, Op("rsqrt", {var}));
  DT_ASSIGN_OR_RETURN(Tensor xhat, Op("mul", {centred, r}));
  return NormGrads(c, xhat, r, /*centred=*/true);
}

absl::StatusOr<ArgGrads> RmsNormGrad(const GradContext& c) {
  const Tensor& x = c.input(0);
  DT_ASSIGN_OR_RETURN(Tensor sq, Op("square", {x}));
  DT_ASSIGN_OR_RETURN(Tensor ms, MeanOver(sq, NormalizedDims(c)));
  const double eps = c.args.is_none(3) ? grad::RmsNormDefaultEps(x.dtype()) : c.args.float_(3);
  DT_ASSIGN_OR_RETURN(ms, Op("add", {ms, Scalar::Float(eps)}));
  DT_ASSIGN_OR_RETURN(Tensor r, Op("rsqrt", {ms}));
  DT_ASSIGN_OR_RETURN(Tensor xhat, Op("mul", {x, r}));
  return NormGrads(c, xhat, r, /*centred=*/false);
}

// `t` with its last two dims swapped (a view). REQUIRES: t.ndim() >= 2.
absl::StatusOr<Tensor> Transposed(const Tensor& t) { return Op("transpose", {t, Scalar::Int(-1), Scalar::Int(-2)}); }

// A matrix stored transposed: nn.Linear's `x @ w.T` multiplies by such a view of the weight.
bool TransposedDense(const Tensor& t) {
  return t.ndim() == 2 && t.size(0) > 1 && t.size(1) > 1 && t.stride(0) == 1 && t.stride(1) == t.size(0);
}

// (p q)ᵀ, a transposed view of a fresh product. The gradient of an operand stored transposed is
// computed this way so that it is laid out as the operand is (PyTorch's mm_mat2_backward does
// the same): nn.Linear's weight gradient comes out of the GEMM in the weight's own layout,
// where a transposing copy into .grad took as long as a GEMM.
absl::StatusOr<Tensor> TransposeOfProduct(const Tensor& p, const Tensor& q) {
  DT_ASSIGN_OR_RETURN(Tensor product, Op("matmul", {p, q}));
  return Transposed(product);
}

// x @ yᵀ and xᵀ @ y.
absl::StatusOr<Tensor> TimesTransposed(const Tensor& x, const Tensor& y) {
  DT_ASSIGN_OR_RETURN(Tensor yt, Transposed(y));
  return Op("matmul", {x, yt});
}
absl::StatusOr<Tensor> TransposedTimes(const Tensor& x, const Tensor& y) {
  DT_ASSIGN_OR_RETURN(Tensor xt, Transposed(x));
  return Op("matmul", {xt, y});
}

// matmul with PyTorch's rank rules: a 1-d operand takes part as a row (left) or column (right)
// that the result then drops; batch dims broadcast (the engine sums them back).
absl::StatusOr<ArgGrads> MatmulGrad(const GradContext& c) {
  Tensor a = c.input(0), b = c.input(1), g = c.grad();
  const bool a_vector = a.ndim() == 1, b_vector = b.ndim() == 1;
  if (a_vector) {
    DT_ASSIGN_OR_RETURN(a, Op("unsqueeze", {a, Scalar::Int(0)}));
  }
  if (b_vector) {
    DT_ASSIGN_OR_RETURN(b, Op("unsqueeze", {b, Scalar::Int(1)}));
  }
  if (a_vector && b_vector) {
    DT_ASSIGN_OR_RETURN(g, Op("reshape", {g, Dims{1, 1}}));
  }
  if (a_vector && !b_vector) {
    DT_ASSIGN_OR_RETURN(g, Op("unsqueeze", {g, Scalar::Int(-2)}));
  }
  if (b_vector && !a_vector) {
    DT_ASSIGN_OR_RETURN(g, Op("unsqueeze", {g, Scalar::Int(-1)}));
  }
  ArgGrads grads = grad::NoGrads(c);
  if (c.needs(0)) {
    Tensor ga;
    if (TransposedDense(a)) {  // g bᵀ = (b gᵀ)ᵀ
      DT_ASSIGN_OR_RETURN(Tensor gt, Transposed(g));
      DT_ASSIGN_OR_RETURN(ga, TransposeOfProduct(b, gt));
    } else {
      DT_ASSIGN_OR_RETURN(ga, TimesTransposed(g, b));
    }
    if (a_vector) {
      DT_ASSIGN_OR_RETURN(ga, Op("squeeze", {ga, Dims{-2}}));
    }
    grads[0] = std::move(ga);
  }
  if (c.needs(1)) {
    Tensor left = a, right = g;
    if (b.ndim() == 2 && a.ndim() > 2) {
      // A matrix applied to a batch (nn.Linear on [B, T, D]): one GEMM over all B*T rows, as
      // PyTorch's linear does, instead of B products the engine then sums over the batch.
      DT_ASSIGN_OR_RETURN(left, Op("reshape", {a, Dims{-1, a.size(a.ndim() - 1)}}));
      DT_ASSIGN_OR_RETURN(right, Op("reshape", {g, Dims{-1, g.size(g.ndim() - 1)}}));
    }
    Tensor gb;
    if (TransposedDense(b)) {  // aᵀ g = (gᵀ a)ᵀ
      DT_ASSIGN_OR_RETURN(Tensor gt, Transposed(right));
      DT_ASSIGN_OR_RETURN(gb, TransposeOfProduct(gt, left));
    } else {
      DT_ASSIGN_OR_RETURN(gb, TransposedTimes(left, right));
    }
    if (b_vector) {
      DT_ASSIGN_OR_RETURN(gb, Op("squeeze", {gb, Dims{-1}}));
    }
    grads[1] = std::move(gb);
  }
  return grads;
}

}  // namespace

void RegisterReductionDerivatives(OpRegistry& registry) {
  registry.Mutable("sum").derivative = {&SumGrad, /*uses_inputs=*/false, /*uses_outputs=*/false};
  registry.Mutable("mean").derivative = {&SumGrad, false, false};
  registry.Mutable("prod").derivative = {&ProdGrad, true, false};
  registry.Mutable("amax").derivative = {&ExtremeGrad, true, true};
  registry.Mutable("amin").derivative = {&ExtremeGrad, true, true};
  registry.Mutable("softmax").derivative = {&SoftmaxGrad, false, true};
  registry.Mutable("log_softmax").derivative = {&LogSoftmaxGrad, false, true};
  registry.Mutable("layer_norm").derivative = {&LayerNormGrad, true, false};
  registry.Mutable("rms_norm").derivative = {&RmsNormGrad, true, false};
  for (const char* name : {"matmul", "mm", "bmm"}) registry.Mutable(name).derivative = {&MatmulGrad, true, false};
  registry.Mutable("dot").derivative = {&grad::ProductGrad, true, false};
}

}  // namespace dt
