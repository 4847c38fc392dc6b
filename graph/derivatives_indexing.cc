// Derivatives of gathers, scatters, advanced indexing, sorts and scans: a gather's gradient is
// the matching scatter-add into zeros, and the reverse.
#include <array>
#include <limits>
#include <string>

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

// index_add: the input's gradient passes through; source's is alpha times the slices it was added to.
absl::StatusOr<ArgGrads> IndexAddGrad(const GradContext& c) {
  ArgGrads grads = grad::NoGrads(c);
  if (c.needs(0)) grads[0] = c.grad();
  if (c.needs(3)) {
    DT_ASSIGN_OR_RETURN(Tensor picked, Op("index_select", {c.grad(), c.args[1], c.args[2]}));
    DT_ASSIGN_OR_RETURN(grads[3], Op("mul", {picked, c.args[4]}));
  }
  return grads;
}

// index_copy: the overwritten slices of the input get no gradient; source's comes from them.
absl::StatusOr<ArgGrads> IndexCopyGrad(const GradContext& c) {
  ArgGrads grads = grad::NoGrads(c);
  if (c.needs(0)) {
    DT_ASSIGN_OR_RETURN(Tensor zeros, grad::ZerosFor(c.input(3), c.grad()));
    DT_ASSIGN_OR_RETURN(grads[0], Op("index_copy", {c.grad(), c.args[1], c.args[2], zeros}));
  }
  if (c.needs(3)) {
    DT_ASSIGN_OR_RETURN(grads[3], Op("index_select", {c.grad(), c.args[1], c.args[2]}));
  }
  return grads;
}

// The pieces of a scatter_reduce's gradient.
struct ScatterParts {
  const GradContext& c;
  absl::StatusOr<Tensor> Gather(const Tensor& t) const { return Op("gather", {t, c.args[1], c.args[2]}); }
  // Folds `self_part` and `src_part` (the input's and src's shapes) like the op did, by `reduce`.
  absl::StatusOr<Tensor> Fold(const Tensor& self_part, const Tensor& src_part, const char* reduce) const {
    return Op("scatter_reduce", {self_part, c.args[1], c.args[2], src_part, std::string(reduce), c.args[5]});
  }
  // The input's gradient where it is not folded (include_self=False): zero where src landed.
  absl::StatusOr<Tensor> Untouched(const Tensor& g) const {
    return Op("scatter.value", {g, c.args[1], c.args[2], Scalar::Int(0)});
  }
};

// The product of the other values folded with x at its target, from the target's product of
// nonzero values p and count of zeros z: p / x with no zero, p for the one zero, else 0.
absl::StatusOr<Tensor> ProductOfOthers(const Tensor& x, const Tensor& p, const Tensor& z) {
  DT_ASSIGN_OR_RETURN(Tensor x_zero, Op("eq", {x, Scalar::Int(0)}));
  DT_ASSIGN_OR_RETURN(Tensor one_zero, Op("eq", {z, Scalar::Int(1)}));
  DT_ASSIGN_OR_RETURN(Tensor no_zero, Op("eq", {z, Scalar::Int(0)}));
  DT_ASSIGN_OR_RETURN(Tensor safe_x, Op("where", {x_zero, Scalar::Int(1), x}));
  DT_ASSIGN_OR_RETURN(Tensor ratio, Op("div", {p, safe_x}));
  DT_ASSIGN_OR_RETURN(Tensor if_zero, Op("where", {one_zero, p, Scalar::Int(0)}));
  DT_ASSIGN_OR_RETURN(Tensor if_not, Op("where", {no_zero, ratio, Scalar::Int(0)}));
  return Op("where", {x_zero, if_zero, if_not});
}

// Per-element weights (d out / d value) of the input and of src for each reduce: [self, src].
absl::StatusOr<std::array<Tensor, 2>> ScatterWeights(const ScatterParts& s, const std::string& reduce) {
  const Tensor &self = s.c.input(0), &src = s.c.input(3);
  DT_ASSIGN_OR_RETURN(Tensor ones_self, Op("full", {self.sizes(), Scalar::Int(1), self.dtype(), self.device()}));
  DT_ASSIGN_OR_RETURN(Tensor ones_src, Op("full", {src.sizes(), Scalar::Int(1), src.dtype(), src.device()}));
  if (reduce == "sum") return std::array<Tensor, 2>{ones_self, ones_src};
  if (reduce == "mean") {  // 1 / the count folded at each target
    DT_ASSIGN_OR_RETURN(Tensor count, s.Fold(ones_self, ones_src, "sum"));
    DT_ASSIGN_OR_RETURN(Tensor w, Op("reciprocal", {count}));
    DT_ASSIGN_OR_RETURN(Tensor w_src, s.Gather(w));
    return std::array<Tensor, 2>{w, w_src};
  }
  if (reduce == "prod") {
    DT_ASSIGN_OR_RETURN(Tensor self_zero, Op("eq", {self, Scalar::Int(0)}));
    DT_ASSIGN_OR_RETURN(Tensor src_zero, Op("eq", {src, Scalar::Int(0)}));
    DT_ASSIGN_OR_RETURN(Tensor self_nz, Op("where", {self_zero, Scalar::Int(1), self}));
    DT_ASSIGN_OR_RETURN(Tensor src_nz, Op("where", {src_zero, Scalar::Int(1), src}));
    DT_ASSIGN_OR_RETURN(Tensor p, s.Fold(self_nz, src_nz, "prod"));
    DT_ASSIGN_OR_RETURN(Tensor self_z, Op("_to", {self_zero, self.dtype()}));
    DT_ASSIGN_OR_RETURN(Tensor src_z, Op("_to", {src_zero, src.dtype()}));
    DT_ASSIGN_OR_RETURN(Tensor z, s.Fold(self_z, src_z, "sum"));
    DT_ASSIGN_OR_RETURN(Tensor w_self, ProductOfOthers(self, p, z));
    DT_ASSIGN_OR_RETURN(Tensor p_src, s.Gather(p));
    DT_ASSIGN_OR_RETURN(Tensor z_src, s.Gather(z));
    DT_ASSIGN_OR_RETURN(Tensor w_src, ProductOfOthers(src, p_src, z_src));
    return std::array<Tensor, 2>{w_self, w_src};
  }
  // amax / amin: shared evenly by the values equal to the result, as PyTorch does.
  DT_ASSIGN_OR_RETURN(Tensor self_eq, Op("eq", {self, s.c.output()}));
  DT_ASSIGN_OR_RETURN(Tensor out_at_src, s.Gather(s.c.output()));
  DT_ASSIGN_OR_RETURN(Tensor src_eq, Op("eq", {src, out_at_src}));
  DT_ASSIGN_OR_RETURN(Tensor self_w, Op("_to", {self_eq, self.dtype()}));
  DT_ASSIGN_OR_RETURN(Tensor src_w, Op("_to", {src_eq, src.dtype()}));
  DT_ASSIGN_OR_RETURN(Tensor ties, s.Fold(self_w, src_w, "sum"));
  DT_ASSIGN_OR_RETURN(Tensor safe_ties, Op("clamp_min", {ties, Scalar::Int(1)}));
  DT_ASSIGN_OR_RETURN(Tensor w_self, Op("div", {self_w, safe_ties}));
  DT_ASSIGN_OR_RETURN(Tensor ties_src, s.Gather(safe_ties));
  DT_ASSIGN_OR_RETURN(Tensor w_src, Op("div", {src_w, ties_src}));
  return std::array<Tensor, 2>{w_self, w_src};
}

absl::StatusOr<ArgGrads> ScatterReduceGrad(const GradContext& c) {
  ArgGrads grads = grad::NoGrads(c);
  const ScatterParts s{c};
  DT_ASSIGN_OR_RETURN(auto weights, ScatterWeights(s, c.args.string(4)));
  if (c.needs(0)) {
    DT_ASSIGN_OR_RETURN(Tensor g, Op("mul", {c.grad(), weights[0]}));
    DT_ASSIGN_OR_RETURN(grads[0], c.args.bool_(5) ? absl::StatusOr<Tensor>(g) : s.Untouched(c.grad()));
  }
  if (c.needs(3)) {
    DT_ASSIGN_OR_RETURN(Tensor g, s.Gather(c.grad()));
    DT_ASSIGN_OR_RETURN(grads[3], Op("mul", {g, weights[1]}));
  }
  return grads;
}

// cummax/cummin: each output's gradient goes back to the element it copied (added up where one
// element stays the extreme for several positions).
absl::StatusOr<ArgGrads> CumExtremeGrad(const GradContext& c) {
  if (c.input(0).ndim() == 0) return FirstGrad(c, c.grad(0));
  DT_ASSIGN_OR_RETURN(Tensor zeros, grad::ZerosFor(c.input(0), c.grad(0)));
  return FirstGrad(c, Op("scatter_add", {zeros, c.args[1], c.output(1), c.grad(0)}));
}

// kthvalue: the gradient goes to the one element chosen in each row.
absl::StatusOr<ArgGrads> KthvalueGrad(const GradContext& c) {
  const Tensor& input = c.input(0);
  if (input.ndim() == 0) return FirstGrad(c, c.grad(0));
  DT_ASSIGN_OR_RETURN(int64_t dim, NormalizeDim(c.args.int_(2), input.ndim()));
  Tensor g = c.grad(0), index = c.output(1);
  if (!c.args.bool_(3)) {
    DT_ASSIGN_OR_RETURN(g, Op("unsqueeze", {g, Scalar::Int(dim)}));
    DT_ASSIGN_OR_RETURN(index, Op("unsqueeze", {index, Scalar::Int(dim)}));
  }
  DT_ASSIGN_OR_RETURN(Tensor zeros, grad::ZerosFor(input, g));
  return FirstGrad(c, Op("scatter", {zeros, Scalar::Int(dim), index, g}));
}

// y = logcumsumexp(x): dx_i = sum over j >= i of g_j exp(x_i - y_j). Split by the sign of g and
// summed in log space (reversed logcumsumexp) so that neither exp overflows; TensorFlow's form.
absl::StatusOr<ArgGrads> LogcumsumexpGrad(const GradContext& c) {
  const Tensor& x = c.input(0);
  if (x.ndim() == 0 || x.numel() == 0) return FirstGrad(c, c.grad());
  const Dims dim{c.args.int_(1)};
  const Scalar minus_inf = Scalar::Float(-std::numeric_limits<double>::infinity());
  auto part = [&](const char* sign_test, bool negate) -> absl::StatusOr<Tensor> {
    DT_ASSIGN_OR_RETURN(Tensor selected, Op(sign_test, {c.grad(), Scalar::Int(0)}));
    DT_ASSIGN_OR_RETURN(Tensor magnitude, negate ? Op("neg", {c.grad()}) : Op("clone", {c.grad()}));
    DT_ASSIGN_OR_RETURN(Tensor log_g, Op("log", {magnitude}));
    DT_ASSIGN_OR_RETURN(log_g, Op("where", {selected, log_g, minus_inf}));
    DT_ASSIGN_OR_RETURN(Tensor t, Op("sub", {log_g, c.output()}));
    DT_ASSIGN_OR_RETURN(t, Op("flip", {t, dim}));
    DT_ASSIGN_OR_RETURN(t, Op("logcumsumexp", {t, c.args[1]}));
    DT_ASSIGN_OR_RETURN(t, Op("flip", {t, dim}));
    DT_ASSIGN_OR_RETURN(t, Op("add", {t, x}));
    return Op("exp", {t});
  };
  DT_ASSIGN_OR_RETURN(Tensor positive, part("gt", false));
  DT_ASSIGN_OR_RETURN(Tensor negative, part("lt", true));
  return FirstGrad(c, Op("sub", {positive, negative}));
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

// _im2col copies input elements (or padding values) to new places: its adjoint adds each
// gradient back at its source (_col2im, which drops the entries read from padding).
absl::StatusOr<ArgGrads> Im2colGrad(const GradContext& c) {
  const Tensor& input = c.input(0);
  return FirstGrad(c, Op("_col2im", {c.grad(), Dims{input.size(2), input.size(3)}, c.args[1], c.args[2], c.args[3],
                                     c.args[4], c.args[5]}));
}

// _col2im is linear, and its adjoint is _im2col with zero padding.
absl::StatusOr<ArgGrads> Col2imGrad(const GradContext& c) {
  return FirstGrad(c, Op("_im2col", {c.grad(), c.args[2], c.args[3], c.args[4], c.args[5], c.args[6],
                                     Scalar::Int(0)}));
}

}  // namespace

void RegisterIndexingDerivatives(OpRegistry& registry) {
  constexpr bool kInputs = true, kNoInputs = false, kOutputs = true, kNoOutputs = false;
  registry.Mutable("gather").derivative = {&GatherGrad, kInputs, kNoOutputs};
  registry.Mutable("index_select").derivative = {&IndexSelectGrad, kInputs, kNoOutputs};
  registry.Mutable("index_add").derivative = {&IndexAddGrad, kInputs, kNoOutputs};
  registry.Mutable("index_copy").derivative = {&IndexCopyGrad, kInputs, kNoOutputs};
  registry.Mutable("scatter_reduce").derivative = {&ScatterReduceGrad, kInputs, kOutputs};
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
  registry.Mutable("cummax").derivative = {&CumExtremeGrad, kInputs, kOutputs};
  registry.Mutable("cummin").derivative = {&CumExtremeGrad, kInputs, kOutputs};
  registry.Mutable("kthvalue").derivative = {&KthvalueGrad, kInputs, kOutputs};
  registry.Mutable("logcumsumexp").derivative = {&LogcumsumexpGrad, kInputs, kOutputs};
  registry.Mutable("cumprod").derivative = {&CumprodGrad, kInputs, kOutputs};
  registry.Mutable("_im2col").derivative = {&Im2colGrad, kNoInputs, kNoOutputs};
  registry.Mutable("_col2im").derivative = {&Col2imGrad, kNoInputs, kNoOutputs};
  registry.Mutable("masked_select").derivative = {&MaskedSelectGrad, kInputs, kNoOutputs};
}

void RegisterDerivatives(OpRegistry& registry) {
  RegisterPointwiseDerivatives(registry);
  RegisterShapeDerivatives(registry);
  RegisterReductionDerivatives(registry);
  RegisterIndexingDerivatives(registry);
}

}  // namespace dt
