// Search, sort and scan along one dim: max/min (all-reduce, per dim with indices, elementwise),
// sort, argsort, topk, cumsum, cumprod.
//
// Sorts are stable and order NaN as the largest value, as PyTorch does: last ascending, first
// descending; equal values keep their input order either way. Scans accumulate in double (or
// int64) and round each running value once into the result's dtype. Each runs as one node
// between fused kernels; max/min decompose into amax/amin (fused) and argmax/argmin.
#include <algorithm>
#include <numeric>

#include "absl/strings/str_format.h"
#include "graph/op_registry.h"
#include "runtime/copy.h"
#include "runtime/errors.h"
#include "runtime/scalar_math.h"

namespace dt {
namespace {

// `input` with `dim` moved last and made contiguous: `outer` rows of `n` elements.
struct Rows {
  Tensor data;
  int64_t outer = 1, n = 1;
};

Rows RowsAlong(const Tensor& input, int64_t dim) {
  if (input.ndim() == 0) return Rows{Contiguous(input).AsStrided({1, 1}, {1, 1}, Contiguous(input).offset()), 1, 1};
  Dims sizes, strides;
  for (int64_t d = 0; d < input.ndim(); ++d) {
    if (d == dim) continue;
    sizes.push_back(input.size(d));
    strides.push_back(input.stride(d));
  }
  sizes.push_back(input.size(dim));
  strides.push_back(input.stride(dim));
  Tensor moved = Contiguous(input.AsStrided(sizes, strides, input.offset()));
  const int64_t n = input.size(dim);
  return Rows{moved, n == 0 ? 0 : moved.numel() / n, n};
}

// A [outer, n] contiguous result of RowsAlong(like, dim) laid back out like `like`, contiguous.
Tensor PutBack(const Tensor& rows, const Tensor& like, int64_t dim) {
  if (like.ndim() == 0) return rows.AsStrided({}, {}, rows.offset());
  Dims moved_sizes;
  for (int64_t d = 0; d < like.ndim(); ++d) {
    if (d != dim) moved_sizes.push_back(like.size(d));
  }
  moved_sizes.push_back(like.size(dim));
  const Dims moved_strides = ContiguousStrides(moved_sizes);
  Dims sizes(like.ndim()), strides(like.ndim());
  for (int64_t d = 0, k = 0; d < like.ndim(); ++d) {
    const int64_t from = d == dim ? like.ndim() - 1 : k++;
    sizes[d] = moved_sizes[from];
    strides[d] = moved_strides[from];
  }
  return Contiguous(rows.AsStrided(sizes, strides, rows.offset()));
}

// NaN-last ascending order and NaN-first descending order, for stable sorts.
template <typename C>
bool Before(C a, C b, bool descending) {
  const bool a_nan = scalar::is_nan(a), b_nan = scalar::is_nan(b);
  if (descending) return a_nan ? !b_nan : (!b_nan && a > b);
  return !a_nan && (b_nan || a < b);
}

// Sorts each row of `rows`: the first `keep` values of each and their positions.
void SortRows(const Rows& rows, bool descending, int64_t keep, Tensor& values, Tensor& indices) {
  int64_t* out_index = indices.data_as<int64_t>();
  std::vector<int64_t> order(rows.n);
  DT_DISPATCH_ALL(rows.data.dtype(), [&] {
    using C = ComputeType<scalar_t>;
    const scalar_t* in = rows.data.data_as<scalar_t>();
    scalar_t* out = values.data_as<scalar_t>();
    for (int64_t r = 0; r < rows.outer; ++r) {
      const scalar_t* row = in + r * rows.n;
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
        return Before(static_cast<C>(row[a]), static_cast<C>(row[b]), descending);
      });
      for (int64_t i = 0; i < keep; ++i) {
        out[r * keep + i] = row[order[i]];
        out_index[r * keep + i] = order[i];
      }
    }
  });
}

// sort / topk: values and int64 indices, `keep` of them along `dim`.
absl::StatusOr<OpResult> SortAlong(const Tensor& input, int64_t dim_arg, bool descending, int64_t keep_arg) {
  DT_ASSIGN_OR_RETURN(int64_t dim, NormalizeDim(dim_arg, input.ndim()));
  Dims shape = input.sizes();
  const int64_t keep = keep_arg < 0 ? (input.ndim() == 0 ? 1 : input.size(dim)) : keep_arg;
  if (input.ndim() > 0) shape[dim] = keep;
  Tensor values = Tensor::Empty(shape, input.dtype(), input.device());
  Tensor indices = Tensor::Empty(shape, DType::kInt64, input.device());
  if (input.is_meta()) return OpResult{values, indices};
  const Rows rows = RowsAlong(input, dim);
  Tensor row_values = Tensor::Empty({rows.outer, keep}, input.dtype(), Device::Cpu());
  Tensor row_indices = Tensor::Empty({rows.outer, keep}, DType::kInt64, Device::Cpu());
  SortRows(rows, descending, keep, row_values, row_indices);
  return OpResult{PutBack(row_values, values, dim), PutBack(row_indices, indices, dim)};
}

absl::StatusOr<OpResult> SortEager(const OpDef&, const OpArgs& args) {
  return SortAlong(args.tensor(0), args.int_(1), args.bool_(2), -1);
}

absl::StatusOr<OpResult> ArgsortEager(const OpDef&, const OpArgs& args) {
  DT_ASSIGN_OR_RETURN(OpResult sorted, SortAlong(args.tensor(0), args.int_(1), args.bool_(2), -1));
  return OpResult{sorted[1]};
}

absl::StatusOr<OpResult> TopkEager(const OpDef&, const OpArgs& args) {
  const Tensor& input = args.tensor(0);
  const int64_t k = args.int_(1);
  DT_ASSIGN_OR_RETURN(int64_t dim, NormalizeDim(args.int_(2), input.ndim()));
  const int64_t size = input.ndim() == 0 ? 1 : input.size(dim);
  if (k < 0 || k > size) {
    return Error(ErrorKind::kValue, absl::StrFormat("topk(): k (%d) is out of range for dimension %d of size %d "
                                                    "(input shape %s)",
                                                    k, dim, size, input.ShapeString()));
  }
  return SortAlong(input, dim, /*descending=*/args.bool_(3), k);
}

// ---- scans ----

absl::StatusOr<OpResult> ScanEager(const OpDef& op, const OpArgs& args) {
  const bool product = op.name() == "cumprod";
  Tensor input = args.tensor(0);
  DT_ASSIGN_OR_RETURN(int64_t dim, NormalizeDim(args.int_(1), input.ndim()));
  if (std::optional<DType> dtype = args.dtype(2)) input = CastTo(input, *dtype);
  const DType result_dtype = IsFloating(input.dtype()) ? input.dtype() : DType::kInt64;
  Tensor out = Tensor::Empty(input.sizes(), result_dtype, input.device());
  if (out.is_meta() || out.numel() == 0) return OpResult{out};
  const Rows rows = RowsAlong(input, dim);
  Tensor scanned = Tensor::Empty({rows.outer, rows.n}, result_dtype, Device::Cpu());
  DT_DISPATCH_ALL(rows.data.dtype(), [&] {
    using In = scalar_t;
    DT_DISPATCH_ALL(result_dtype, [&] {
      using Acc = std::conditional_t<std::is_floating_point_v<ComputeType<scalar_t>>, double, int64_t>;
      const In* in = rows.data.data_as<In>();
      scalar_t* dst = scanned.data_as<scalar_t>();
      for (int64_t r = 0; r < rows.outer; ++r) {
        Acc acc = product ? Acc(1) : Acc(0);
        for (int64_t i = 0; i < rows.n; ++i) {
          const Acc x = static_cast<Acc>(static_cast<ComputeType<In>>(in[r * rows.n + i]));
          acc = product ? acc * x : acc + x;
          dst[r * rows.n + i] = static_cast<scalar_t>(acc);
        }
      }
    });
  });
  return OpResult{PutBack(scanned, out, dim)};
}

// ---- max / min as PyTorch has them ----

bool IsMax(const OpDef& op) { return op.name().rfind("max", 0) == 0; }

absl::StatusOr<OpResult> MaxAllEager(const OpDef& op, const OpArgs& args) {
  DT_ASSIGN_OR_RETURN(Tensor r, Call(IsMax(op) ? "amax" : "amin", {args.tensor(0)}));
  return OpResult{r};
}

absl::StatusOr<OpResult> MaxOtherEager(const OpDef& op, const OpArgs& args) {
  DT_ASSIGN_OR_RETURN(Tensor r, Call(IsMax(op) ? "maximum" : "minimum", {args.tensor(0), args.tensor(1)}));
  return OpResult{r};
}

// (values, indices): amax/amin fold (and fuse), argmax/argmin find the first extreme (a NaN
// first of all), so both agree on NaN.
absl::StatusOr<OpResult> MaxDimEager(const OpDef& op, const OpArgs& args) {
  const Tensor& input = args.tensor(0);
  const bool is_max = IsMax(op);
  DT_ASSIGN_OR_RETURN(Tensor values, Call(is_max ? "amax" : "amin", {input, Dims{args.int_(1)}, args[2]}));
  DT_ASSIGN_OR_RETURN(Tensor indices, Call(is_max ? "argmax" : "argmin", {input, args[1], args[2]}));
  return OpResult{values, indices};
}

}  // namespace

void RegisterSortingOps(OpRegistry& registry) {
  constexpr uint32_t kBoth = kMethod | kFunction;
  for (const char* name : {"max", "min"}) {
    registry.Add(absl::StrFormat("%s(Tensor input) -> Tensor", name), OpKind::kComposite, kBoth | kDecomposable,
                 &MaxAllEager);
    registry.Add(absl::StrFormat("%s.other(Tensor input, Tensor other) -> Tensor", name), OpKind::kComposite,
                 kBoth | kDecomposable, &MaxOtherEager);
    registry.Add(absl::StrFormat("%s.dim(Tensor input, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)",
                                 name),
                 OpKind::kComposite, kBoth | kDecomposable, &MaxDimEager);
  }
  registry.Add("sort(Tensor input, int dim=-1, bool descending=False, bool stable=False) -> "
               "(Tensor values, Tensor indices)",
               OpKind::kData, kBoth, &SortEager);
  registry.Add("argsort(Tensor input, int dim=-1, bool descending=False, bool stable=False) -> Tensor",
               OpKind::kData, kBoth, &ArgsortEager);
  registry.Add("topk(Tensor input, int k, int dim=-1, bool largest=True, bool sorted=True) -> "
               "(Tensor values, Tensor indices)",
               OpKind::kData, kBoth, &TopkEager);
  registry.Add("cumsum(Tensor input, int dim, *, DType? dtype=None) -> Tensor", OpKind::kData, kBoth, &ScanEager);
  registry.Add("cumprod(Tensor input, int dim, *, DType? dtype=None) -> Tensor", OpKind::kData, kBoth, &ScanEager);
}

}  // namespace dt
