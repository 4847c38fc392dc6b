// Derivatives of the view, shape and data-movement ops: each moves the gradient back the way
// the op moved the values. Most only need the input's sizes, so they keep no input data.
#include <numeric>

#include "graph/grad_formulas.h"
#include "runtime/errors.h"
#include "runtime/indexing.h"

namespace dt {
namespace {

using grad::FirstGrad;
using grad::Op;

absl::StatusOr<ArgGrads> ReshapeGrad(const GradContext& c) {
  return FirstGrad(c, Op("reshape", {c.grad(), c.input(0).sizes()}));
}

absl::StatusOr<ArgGrads> PassGrad(const GradContext& c) { return FirstGrad(c, c.grad()); }

absl::StatusOr<ArgGrads> PermuteGrad(const GradContext& c) {
  const Dims& order = c.args.ints(1);
  const int64_t ndim = static_cast<int64_t>(order.size());
  Dims inverse(ndim);
  for (int64_t i = 0; i < ndim; ++i) {
    DT_ASSIGN_OR_RETURN(int64_t d, NormalizeDim(order[i], ndim));
    inverse[d] = i;
  }
  return FirstGrad(c, Op("permute", {c.grad(), inverse}));
}

absl::StatusOr<ArgGrads> TransposeGrad(const GradContext& c) {
  return FirstGrad(c, Op("transpose", {c.grad(), c.args[1], c.args[2]}));
}

absl::StatusOr<ArgGrads> UnsqueezeGrad(const GradContext& c) {
  return FirstGrad(c, Op("squeeze", {c.grad(), Dims{c.args.int_(1)}}));
}

// A view of part of the input (narrow, select, basic subscripts): the gradient written into
// zeros at the same place.
absl::StatusOr<ArgGrads> ScatterIntoZeros(const GradContext& c, Dims index) {
  DT_ASSIGN_OR_RETURN(Tensor zeros, grad::ZerosFor(c.input(0), c.grad()));
  return FirstGrad(c, Op("_setitem", {zeros, std::move(index), c.grad()}));
}

absl::StatusOr<ArgGrads> NarrowGrad(const GradContext& c) {
  DT_ASSIGN_OR_RETURN(int64_t dim, NormalizeDim(c.args.int_(1), c.input(0).ndim()));
  int64_t start = c.args.int_(2);
  if (start < 0) start += c.input(0).size(dim);
  return ScatterIntoZeros(c, grad::EncodedSlice(dim, start, start + c.args.int_(3)));
}

absl::StatusOr<ArgGrads> SelectGrad(const GradContext& c) {
  DT_ASSIGN_OR_RETURN(int64_t dim, NormalizeDim(c.args.int_(1), c.input(0).ndim()));
  std::vector<IndexItem> items(dim, IndexItem{.kind = IndexItem::Kind::kSlice});
  items.push_back(IndexItem{.kind = IndexItem::Kind::kInt, .index = c.args.int_(2)});
  return ScatterIntoZeros(c, EncodeIndex(items));
}

absl::StatusOr<ArgGrads> GetItemGrad(const GradContext& c) { return ScatterIntoZeros(c, c.args.ints(1)); }

// x[index] = value: the overwritten part of x gets no gradient; value gets what flowed there.
absl::StatusOr<ArgGrads> SetItemGrad(const GradContext& c) {
  ArgGrads grads = grad::NoGrads(c);
  if (c.needs(0)) {
    DT_ASSIGN_OR_RETURN(Tensor g, Op("clone", {c.grad()}));
    DT_ASSIGN_OR_RETURN(grads[0], Op("_setitem", {g, c.args[1], Scalar::Int(0)}));
  }
  if (c.needs(2)) {
    DT_ASSIGN_OR_RETURN(grads[2], Op("_getitem", {c.grad(), c.args[1]}));
  }
  return grads;
}

absl::StatusOr<ArgGrads> CatGrad(const GradContext& c) {
  const std::vector<Tensor>& parts = c.args.tensors(0);
  std::vector<Tensor> grads(parts.size());
  DT_ASSIGN_OR_RETURN(int64_t dim, NormalizeDim(c.args.int_(1), c.grad().ndim()));
  int64_t offset = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    // cat skips 1-d empty tensors whatever the dim; they take no part of the result.
    if (parts[i].ndim() == 1 && parts[i].size(0) == 0 && c.grad().ndim() != 1) continue;
    const int64_t size = parts[i].size(dim);
    DT_ASSIGN_OR_RETURN(grads[i], Op("narrow", {c.grad(), Scalar::Int(dim), Scalar::Int(offset), Scalar::Int(size)}));
    offset += size;
  }
  ArgGrads result = grad::NoGrads(c);
  result[0] = std::move(grads);
  return result;
}

absl::StatusOr<ArgGrads> StackGrad(const GradContext& c) {
  const size_t n = c.args.tensors(0).size();
  std::vector<Tensor> grads(n);
  for (size_t i = 0; i < n; ++i) {
    DT_ASSIGN_OR_RETURN(grads[i], Op("select", {c.grad(), c.args[1], Scalar::Int(static_cast<int64_t>(i))}));
  }
  ArgGrads result = grad::NoGrads(c);
  result[0] = std::move(grads);
  return result;
}

// split/chunk: the pieces' gradients laid back side by side.
absl::StatusOr<ArgGrads> SplitGrad(const GradContext& c) {
  const int dim_param = c.op.schema.IndexOf("dim");
  std::vector<Tensor> grads(c.grads.begin(), c.grads.end());
  return FirstGrad(c, Op("cat", {std::move(grads), c.args[dim_param]}));
}

absl::StatusOr<ArgGrads> UnbindGrad(const GradContext& c) {
  std::vector<Tensor> grads(c.grads.begin(), c.grads.end());
  return FirstGrad(c, Op("stack", {std::move(grads), c.args[1]}));
}

absl::StatusOr<ArgGrads> FlipGrad(const GradContext& c) { return FirstGrad(c, Op("flip", {c.grad(), c.args[1]})); }

absl::StatusOr<ArgGrads> RollGrad(const GradContext& c) {
  Dims back = c.args.ints(1);
  for (int64_t& s : back) s = -s;
  return FirstGrad(c, Op("roll", {c.grad(), back, c.args[2]}));
}

absl::StatusOr<ArgGrads> TriangleGrad(const GradContext& c) {
  return FirstGrad(c, Op(c.op.name(), {c.grad(), c.args[1]}));
}

// repeat: each input element was copied once per tile; its gradient sums the tiles.
absl::StatusOr<ArgGrads> RepeatGrad(const GradContext& c) {
  const Dims& repeats = c.args.ints(1);
  const Tensor& input = c.input(0);
  const int64_t lead = static_cast<int64_t>(repeats.size()) - input.ndim();
  Dims tiled, tile_dims;
  for (int64_t i = 0; i < static_cast<int64_t>(repeats.size()); ++i) {
    tile_dims.push_back(static_cast<int64_t>(tiled.size()));
    tiled.push_back(repeats[i]);
    tiled.push_back(i < lead ? 1 : input.size(i - lead));
  }
  DT_ASSIGN_OR_RETURN(Tensor g, Op("reshape", {c.grad(), tiled}));
  DT_ASSIGN_OR_RETURN(g, Op("sum", {g, tile_dims, Scalar::Bool(false), None{}}));
  return FirstGrad(c, Op("reshape", {g, input.sizes()}));
}

// fill/zero/copy overwrite every element: nothing flows to the old values; copy's source (and a
// tensor fill value) gets the whole gradient (the engine sums it to its shape).
absl::StatusOr<ArgGrads> OverwriteGrad(const GradContext& c) {
  ArgGrads grads = grad::NoGrads(c);
  if (c.needs(0)) {
    DT_ASSIGN_OR_RETURN(grads[0], Op("full_like", {c.grad(), Scalar::Int(0), None{}, None{}}));
  }
  if (c.needs(1)) grads[1] = c.grad();
  return grads;
}

}  // namespace

void RegisterShapeDerivatives(OpRegistry& registry) {
  struct Entry {
    const char* op;
    DerivativeFn fn;
    bool uses_inputs = false;
  };
  const Entry entries[] = {
      {"reshape", &ReshapeGrad},   {"view", &ReshapeGrad},       {"flatten", &ReshapeGrad},
      {"squeeze", &ReshapeGrad},   {"permute", &PermuteGrad},    {"transpose", &TransposeGrad},
      {"swapaxes", &TransposeGrad}, {"unsqueeze", &UnsqueezeGrad}, {"expand", &PassGrad},
      {"broadcast_to", &PassGrad}, {"contiguous", &PassGrad},    {"clone", &PassGrad},
      {"_to", &PassGrad},          {"_to_device", &PassGrad},          {"narrow", &NarrowGrad},      {"select", &SelectGrad},
      {"_getitem", &GetItemGrad},  {"_setitem", &SetItemGrad},   {"cat", &CatGrad},
      {"concat", &CatGrad},        {"stack", &StackGrad},        {"split", &SplitGrad},
      {"split.sizes", &SplitGrad}, {"chunk", &SplitGrad},        {"unbind", &UnbindGrad},
      {"flip", &FlipGrad},         {"roll", &RollGrad},          {"tril", &TriangleGrad},
      {"triu", &TriangleGrad},     {"repeat", &RepeatGrad},      {"copy", &OverwriteGrad},
      {"fill", &OverwriteGrad},    {"zero", &OverwriteGrad},
  };
  for (const Entry& e : entries) {
    registry.Mutable(e.op).derivative = Derivative{e.fn, e.uses_inputs, /*uses_outputs=*/false};
  }
}

}  // namespace dt
