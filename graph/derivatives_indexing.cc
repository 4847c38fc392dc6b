// Derivatives of gathers, scatters, advanced indexing, sorts and scans: a gather's gradient is
// the matching scatter-add into zeros, and the reverse.
#include "graph/grad_formulas.h"
#include "runtime/errors.h"
#include "runtime/indexing.h"

namespace dt {
namespace {

using grad::FirstGrad;
using grad::Op;

absl::StatusOr<Tensor> ScatterAddIntoZeros(const Tensor& like, const ArgValue& dim, const Tensor& index,
                                           const Tensor& g) {
  DT_ASSIGN_OR_RETURN(Tensor zeros, grad::ZerosFor(like, g));
  return Op("scatter_add", {zeros, dim, index, g});
}

absl::StatusOr<ArgGrads> GatherGrad(const GradContext& c) {
  return FirstGrad(c, ScatterAddIntoZeros(c.input(0), c.args[1], c.input(2), c.grad()));
}

Dims TensorAt(int64_t dim) {
  std::vector<IndexItem> items(dim, IndexItem{.kind = IndexItem::Kind::kSlice});
  items.push_back(IndexItem{.kind = IndexItem::Kind::kTensor, .index = 0});
  return EncodeIndex(items);
}

absl::StatusOr<ArgGrads> IndexSelectGrad(const GradContext& c) {
  const Tensor& input = c.input(0);
  DT_ASSIGN_OR_RETURN(int64_t dim, NormalizeDim(c.args.int_(1), input.ndim()));
  DT_ASSIGN_OR_RETURN(Tensor zeros, grad::ZerosFor(input, c.grad()));
  DT_ASSIGN_OR_RETURN(Tensor index, Op("reshape", {c.input(2), Dims{-1}}));
  Tensor g = c.grad();
  if (input.ndim() == 0) {
    DT_ASSIGN_OR_RETURN(g, Op("reshape", {g, Dims{-1}}));
  }
  if (input.ndim() == 0) {
    DT_ASSIGN_OR_RETURN(zeros, Op("reshape", {zeros, Dims{1}}));
  }
  DT_ASSIGN_OR_RETURN(Tensor out, Op("_index_put", {zeros, TensorAt(dim), std::vector<Tensor>{index}, g,
                                                    Scalar::Bool(true)}));
  return FirstGrad(c, Op("reshape", {out, input.sizes()}));
}

absl::StatusOr<ArgGrads> TakeAlongDimGrad(const GradContext& c) {
  const Tensor& input = c.input(0);
  const Tensor& indices = c.input(1);
  if (c.args.is_none(2)) {
    DT_ASSIGN_OR_RETURN(Tensor flat_index, Op("reshape", {indices, Dims{-1}}));
    DT_ASSIGN_OR_RETURN(Tensor flat_g, Op("reshape", {c.grad(), Dims{-1}}));
    const Tensor flat_like = Tensor::Empty({input.numel()}, input.dtype(), Device::Meta());
    DT_ASSIGN_OR_RETURN(Tensor flat, ScatterAddIntoZeros(flat_like, Scalar::Int(0), flat_index, flat_g));
    return FirstGrad(c, Op("reshape", {flat, input.sizes()}));
  }
  // The result has the broadcast shape; scatter into the input broadcast the same way (the
  // engine then sums the broadcast dims away).
  DT_ASSIGN_OR_RETURN(int64_t dim, NormalizeDim(c.args.int_(2), input.ndim()));
  Dims spread = c.grad().sizes();
  spread[dim] = input.size(dim);
  DT_ASSIGN_OR_RETURN(Tensor index, Op("broadcast_to", {indices, c.grad().sizes()}));
  const Tensor like = Tensor::Empty(spread, input.dtype(), Device::Meta());
  return FirstGrad(c, ScatterAddIntoZeros(like, Scalar::Int(dim), index, c.grad()));
}

absl::StatusOr<ArgGrads> ScatterGrad(const GradContext& c) {
  ArgGrads grads = grad::NoGrads(c);
  const bool adds = c.op.name() == "scatter_add";
  if (c.needs(0)) {
    if (adds) {
      grads[0] = c.grad();
    } else {
      DT_ASSIGN_OR_RETURN(grads[0], Op("scatter.value", {c.grad(), c.args[1], c.args[2], Scalar::Int(0)}));
    }
  }
  if (c.needs(3)) {
    DT_ASSIGN_OR_RETURN(grads[3], Op("gather", {c.grad(), c.args[1], c.args[2]}));
  }
  return grads;
}

// x[tensors] (the tensor-index subscript): the gradient accumulated back at the indexed places.
absl::StatusOr<ArgGrads> IndexGrad(const GradContext& c) {
  DT_ASSIGN_OR_RETURN(Tensor zeros, grad::ZerosFor(c.input(0), c.grad()));
  return FirstGrad(c, Op("_index_put", {zeros, c.args[1], c.args[2], c.grad(), Scalar::Bool(true)}));
}

absl::StatusOr<ArgGrads> IndexPutSubscriptGrad(const GradContext& c) {
  ArgGrads grads = grad::NoGrads(c);
  if (c.needs(0)) {
    if (c.args.bool_(4)) {
      grads[0] = c.grad();
    } else {
      // _index_put writes into its input: zero a copy, not the gradient other slots share.
      DT_ASSIGN_OR_RETURN(Tensor g, Op("clone", {c.grad()}));
      DT_ASSIGN_OR_RETURN(grads[0], Op("_index_put", {g, c.args[1], c.args[2], Scalar::Int(0), Scalar::Bool(false)}));
    }
  }
  if (c.needs(3)) {
    DT_ASSIGN_OR_RETURN(grads[3], Op("_index", {c.grad(), c.args[1], c.args[2]}));
  }
  return grads;
}

absl::StatusOr<ArgGrads> IndexPutGrad(const GradContext& c) {
  ArgGrads grads = grad::NoGrads(c);
  const std::vector<Tensor>& indices = c.args.tensors(1);
  std::vector<IndexItem> items;
  for (size_t i = 0; i < indices.size(); ++i) {
    items.push_back(IndexItem{.kind = IndexItem::Kind::kTensor, .index = static_cast<int64_t>(i)});
  }
  const Dims encoded = EncodeIndex(items);
  if (c.needs(0)) {
    if (c.args.bool_(3)) {
      grads[0] = c.grad();
    } else {
      DT_ASSIGN_OR_RETURN(Tensor g, Op("clone", {c.grad()}));
      DT_ASSIGN_OR_RETURN(grads[0], Op("_index_put", {g, encoded, indices, Scalar::Int(0), Scalar::Bool(false)}));
    }
  }
  if (c.needs(2)) {
    DT_ASSIGN_OR_RETURN(grads[2], Op("_index", {c.grad(), encoded, indices}));
  }
  return grads;
}

absl::StatusOr<ArgGrads> EmbeddingGrad(const GradContext& c) {
  ArgGrads grads = grad::NoGrads(c);
  const Tensor& weight = c.input(1);
  DT_ASSIGN_OR_RETURN(Tensor zeros, grad::ZerosFor(weight, c.grad()));
  DT_ASSIGN_OR_RETURN(Tensor rows, Op("reshape", {c.input(0), Dims{-1}}));
  DT_ASSIGN_OR_RETURN(Tensor g, Op("reshape", {c.grad(), Dims{-1, weight.size(1)}}));
  DT_ASSIGN_OR_RETURN(Tensor w, Op("_index_put", {zeros, TensorAt(0), std::vector<Tensor>{rows}, g,
                                                  Scalar::Bool(true)}));
  if (!c.args.is_none(2)) {  // the padding row is never trained
    std::vector<IndexItem> row{IndexItem{.kind = IndexItem::Kind::kInt, .index = c.args.int_(2)}};
    DT_ASSIGN_OR_RETURN(w, Op("_setitem", {w, EncodeIndex(row), Scalar::Int(0)}));
  }
  grads[1] = std::move(w);
  return grads;
}

// sort/topk: the values' gradient goes back to where each value came from.
absl::StatusOr<ArgGrads> SortGrad(const GradContext& c) {
  const int dim_param = c.op.schema.IndexOf("dim");
  return FirstGrad(c, [&]() -> absl::StatusOr<Tensor> {
    DT_ASSIGN_OR_RETURN(Tensor zeros, grad::ZerosFor(c.input(0), c.grad()));
    return Op("scatter", {zeros, c.args[dim_param], c.output(1), c.grad(0)});
  }());
}

absl::StatusOr<ArgGrads> CumsumGrad(const GradContext& c) {  // a reversed cumulative sum
  const Dims dim{c.args.int_(1)};
  DT_ASSIGN_OR_RETURN(Tensor g, Op("flip", {c.grad(), dim}));
  DT_ASSIGN_OR_RETURN(g, Op("cumsum", {g, c.args[1], None{}}));
  return FirstGrad(c, Op("flip", {g, dim}));
}

// x[mask] as masked_select: the gradient written back at the selected places (in the broadcast
// shape of x and mask; the engine sums a broadcast x back).
absl::StatusOr<ArgGrads> MaskedSelectGrad(const GradContext& c) {
  DT_ASSIGN_OR_RETURN(Dims both, BroadcastShapes(c.input(0).sizes(), c.input(1).sizes()));
  DT_ASSIGN_OR_RETURN(Tensor mask, Op("broadcast_to", {c.input(1), both}));
  DT_ASSIGN_OR_RETURN(Tensor zeros, Op("full", {both, Scalar::Int(0), c.grad().dtype(), c.grad().device()}));
  return FirstGrad(c, Op("_index_put", {zeros, TensorAt(0), std::vector<Tensor>{mask}, c.grad(),
                                        Scalar::Bool(false)}));
}

// cumprod without dividing by the input (which may hold zeros): with y the result, the gradient
// at i is y[i-1] * r[i], where r[i] = g[i] + x[i+1] * r[i+1] runs from the end of the dim.
absl::StatusOr<ArgGrads> CumprodGrad(const GradContext& c) {
  const Tensor& x = c.input(0);
  if (x.ndim() == 0 || x.numel() == 0) return FirstGrad(c, c.grad());
  DT_ASSIGN_OR_RETURN(int64_t dim, NormalizeDim(c.args.int_(1), x.ndim()));
  const int64_t n = x.size(dim);
  auto at = [&](const Tensor& t, int64_t i) { return Op("select", {t, Scalar::Int(dim), Scalar::Int(i)}); };
  std::vector<Tensor> grads(n);
  DT_ASSIGN_OR_RETURN(Tensor r, at(c.grad(), n - 1));
  for (int64_t i = n - 1; i >= 0; --i) {
    if (i < n - 1) {
      DT_ASSIGN_OR_RETURN(Tensor next_x, at(x, i + 1));
      DT_ASSIGN_OR_RETURN(Tensor g, at(c.grad(), i));
      DT_ASSIGN_OR_RETURN(r, Op("mul", {r, next_x}));
      DT_ASSIGN_OR_RETURN(r, Op("add", {r, g}));
    }
    if (i == 0) {
      grads[i] = r;
    } else {
      DT_ASSIGN_OR_RETURN(Tensor before, at(c.output(), i - 1));
      DT_ASSIGN_OR_RETURN(grads[i], Op("mul", {r, before}));
    }
  }
  return FirstGrad(c, Op("stack", {std::move(grads), Scalar::Int(dim)}));
}

// _im2col copies input elements (or padding zeros) to new places: its adjoint adds each
// gradient back at its source. The sources come from running _im2col itself on the positions
// 1..n (in float64, exact up to 2^53; padding reads 0), so the formula follows the op's own
// layout rules instead of restating them.
absl::StatusOr<ArgGrads> Im2colGrad(const GradContext& c) {
  const Tensor& input = c.input(0);
  const int64_t n = input.numel();
  DT_ASSIGN_OR_RETURN(Tensor positions, Op("arange", {Scalar::Int(1), Scalar::Int(n + 1), Scalar::Int(1),
                                                      DType::kFloat64, c.grad().device()}));
  DT_ASSIGN_OR_RETURN(positions, Op("reshape", {positions, input.sizes()}));
  std::vector<ArgValue> args{positions};
  for (size_t i = 1; i + 1 < c.args.size(); ++i) args.push_back(c.args[i]);
  args.push_back(Scalar::Int(0));  // padding reads 0: no source
  DT_ASSIGN_OR_RETURN(Tensor sources, Op("_im2col", std::move(args)));
  DT_ASSIGN_OR_RETURN(sources, Op("reshape", {sources, Dims{-1}}));
  DT_ASSIGN_OR_RETURN(Tensor real, Op("gt", {sources, Scalar::Int(0)}));
  DT_ASSIGN_OR_RETURN(Tensor index, Op("sub", {sources, Scalar::Int(1)}));
  DT_ASSIGN_OR_RETURN(index, Op("where", {real, index, Scalar::Int(0)}));
  DT_ASSIGN_OR_RETURN(index, Op("_to", {index, DType::kInt64}));
  DT_ASSIGN_OR_RETURN(Tensor g, Op("reshape", {c.grad(), Dims{-1}}));
  DT_ASSIGN_OR_RETURN(g, Op("where", {real, g, Scalar::Int(0)}));
  const Tensor flat_like = Tensor::Empty({n}, input.dtype(), Device::Meta());
  DT_ASSIGN_OR_RETURN(Tensor flat, ScatterAddIntoZeros(flat_like, Scalar::Int(0), index, g));
  return FirstGrad(c, Op("reshape", {flat, input.sizes()}));
}

}  // namespace

void RegisterIndexingDerivatives(OpRegistry& registry) {
  constexpr bool kInputs = true, kNoInputs = false, kOutputs = true, kNoOutputs = false;
  registry.Mutable("gather").derivative = {&GatherGrad, kInputs, kNoOutputs};
  registry.Mutable("index_select").derivative = {&IndexSelectGrad, kInputs, kNoOutputs};
  registry.Mutable("take_along_dim").derivative = {&TakeAlongDimGrad, kInputs, kNoOutputs};
  for (const char* name : {"scatter", "scatter.value", "scatter_add"}) {
    registry.Mutable(name).derivative = {&ScatterGrad, kInputs, kNoOutputs};
  }
  registry.Mutable("_index").derivative = {&IndexGrad, kInputs, kNoOutputs};
  registry.Mutable("_index_put").derivative = {&IndexPutSubscriptGrad, kInputs, kNoOutputs};
  registry.Mutable("index_put").derivative = {&IndexPutGrad, kInputs, kNoOutputs};
  registry.Mutable("embedding").derivative = {&EmbeddingGrad, kInputs, kNoOutputs};
  registry.Mutable("sort").derivative = {&SortGrad, kNoInputs, kOutputs};
  registry.Mutable("topk").derivative = {&SortGrad, kNoInputs, kOutputs};
  registry.Mutable("cumsum").derivative = {&CumsumGrad, kNoInputs, kNoOutputs};
  registry.Mutable("cumprod").derivative = {&CumprodGrad, kInputs, kOutputs};
  registry.Mutable("_im2col").derivative = {&Im2colGrad, kNoInputs, kNoOutputs};
  registry.Mutable("masked_select").derivative = {&MaskedSelectGrad, kInputs, kNoOutputs};
}

void RegisterDerivatives(OpRegistry& registry) {
  RegisterPointwiseDerivatives(registry);
  RegisterShapeDerivatives(registry);
  RegisterReductionDerivatives(registry);
  RegisterIndexingDerivatives(registry);
}

}  // namespace dt
