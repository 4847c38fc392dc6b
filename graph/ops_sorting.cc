// Search, sort and scan along one dim: max/min (all-reduce, per dim with indices, elementwise),
// sort, argsort, topk, kthvalue, unique, cumsum, cumprod, cummax, cummin, logcumsumexp.
//
// Sorts are stable and order NaN as the largest value, as PyTorch does: last ascending, first
// descending; equal values keep their input order either way. Scans accumulate in double (or
// int64) and round each running value once into the result's dtype. Each runs as one node
// between fused kernels; max/min decompose into amax/amin (fused) and argmax/argmin. On CUDA
// tensors sorts, scans and cummax/cummin run device kernels (runtime/cuda_index_kernels.h) on
// the same rows; so does unique, which reads back only its number of distinct values.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "graph/cuda_eager.h"
#include "graph/op_registry.h"
#include "graph/rows_along.h"
#include "runtime/copy.h"
#include "runtime/cuda_index_kernels.h"
#include "runtime/errors.h"
#include "runtime/scalar_math.h"

namespace dt {
namespace {


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
        return scalar::sorts_before(static_cast<C>(row[a]), static_cast<C>(row[b]), descending);
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
  Tensor row_values = Tensor::Empty({rows.outer, keep}, input.dtype(), input.device());
  Tensor row_indices = Tensor::Empty({rows.outer, keep}, DType::kInt64, input.device());
  if (IndexKernelsRun(input)) {
    DT_RETURN_IF_ERROR(SortRowsOnDevice(rows.matrix(), descending, row_values, row_indices));
  } else {
    SortRows(rows, descending, keep, row_values, row_indices);
  }
  return OpResult{PutBack(row_values, values, dim), PutBack(row_indices, indices, dim)};
}

absl::StatusOr<OpResult> SortEager(const OpDef& op, const OpArgs& args) {
  DT_RUN_THROUGH_HOST_IF_NEEDED(op, args, args.tensor(0));
  return SortAlong(args.tensor(0), args.int_(1), args.bool_(2), -1);
}

absl::StatusOr<OpResult> ArgsortEager(const OpDef& op, const OpArgs& args) {
  DT_RUN_THROUGH_HOST_IF_NEEDED(op, args, args.tensor(0));
  DT_ASSIGN_OR_RETURN(OpResult sorted, SortAlong(args.tensor(0), args.int_(1), args.bool_(2), -1));
  return OpResult{sorted[1]};
}

// topk and kthvalue: the normalised dim, once k is within [lowest, the dim's size].
absl::StatusOr<int64_t> DimForK(absl::string_view op, const Tensor& input, int64_t k, int64_t dim_arg,
                                int64_t lowest) {
  DT_ASSIGN_OR_RETURN(int64_t dim, NormalizeDim(dim_arg, input.ndim()));
  const int64_t size = input.ndim() == 0 ? 1 : input.size(dim);
  if (k < lowest || k > size) {
    return Error(ErrorKind::kValue, absl::StrFormat("%s(): k (%d) is out of range [%d, %d] for dimension %d of "
                                                    "size %d (input shape %s)",
                                                    op, k, lowest, size, dim, size, input.ShapeString()));
  }
  return dim;
}

absl::StatusOr<OpResult> TopkEager(const OpDef& op, const OpArgs& args) {
  DT_RUN_THROUGH_HOST_IF_NEEDED(op, args, args.tensor(0));
  const Tensor& input = args.tensor(0);
  const int64_t k = args.int_(1);
  DT_ASSIGN_OR_RETURN(int64_t dim, DimForK("topk", input, k, args.int_(2), /*lowest=*/0));
  return SortAlong(input, dim, /*descending=*/args.bool_(3), k);
}

// ---- scans ----

absl::StatusOr<OpResult> ScanEager(const OpDef& op, const OpArgs& args) {
  DT_RUN_THROUGH_HOST_IF_NEEDED(op, args, args.tensor(0));
  const bool product = op.name() == "cumprod";
  Tensor input = args.tensor(0);
  DT_ASSIGN_OR_RETURN(int64_t dim, NormalizeDim(args.int_(1), input.ndim()));
  if (std::optional<DType> dtype = args.dtype(2)) input = CastTo(input, *dtype);
  const DType result_dtype = IsFloating(input.dtype()) ? input.dtype() : DType::kInt64;
  Tensor out = Tensor::Empty(input.sizes(), result_dtype, input.device());
  if (out.is_meta() || out.numel() == 0) return OpResult{out};
  const Rows rows = RowsAlong(input, dim);
  Tensor scanned = Tensor::Empty({rows.outer, rows.n}, result_dtype, input.device());
  if (IndexKernelsRun(input)) {
    DT_RETURN_IF_ERROR(ScanRowsOnDevice(rows.matrix(), product ? DeviceScan::kProd : DeviceScan::kSum, scanned));
    return OpResult{PutBack(scanned, out, dim)};
  }
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

// kthvalue: the k-th smallest (1-based) along `dim` in the sorts' order (NaN largest; equal
// values ranked in input order, so the index is deterministic where PyTorch leaves it open).
absl::StatusOr<OpResult> KthvalueEager(const OpDef& op, const OpArgs& args) {
  DT_RUN_THROUGH_HOST_IF_NEEDED(op, args, args.tensor(0));
  const Tensor& input = args.tensor(0);
  const int64_t k = args.int_(1);
  DT_ASSIGN_OR_RETURN(int64_t dim, DimForK("kthvalue", input, k, args.int_(2), /*lowest=*/1));
  DT_ASSIGN_OR_RETURN(OpResult sorted, SortAlong(input, dim, /*descending=*/false, k));
  if (input.ndim() == 0) return sorted;
  const bool keepdim = args.bool_(3);
  OpResult out;
  for (const Tensor& t : sorted) {
    DT_ASSIGN_OR_RETURN(Tensor kth, keepdim ? Call("narrow", {t, Scalar::Int(dim), Scalar::Int(k - 1), Scalar::Int(1)})
                                            : Call("select", {t, Scalar::Int(dim), Scalar::Int(k - 1)}));
    out.push_back(Contiguous(kth));
  }
  return out;
}

absl::StatusOr<OpResult> CumExtremeEager(const OpDef& op, const OpArgs& args) {
  const bool is_max = op.name() == "cummax";
  const Tensor& input = args.tensor(0);
  DT_RUN_THROUGH_HOST_IF_NEEDED(op, args, args.tensor(0));
  DT_ASSIGN_OR_RETURN(int64_t dim, NormalizeDim(args.int_(1), input.ndim()));
  Tensor values = Tensor::Empty(input.sizes(), input.dtype(), input.device());
  Tensor indices = Tensor::Empty(input.sizes(), DType::kInt64, input.device());
  if (values.is_meta() || values.numel() == 0) return OpResult{values, indices};
  const Rows rows = RowsAlong(input, dim);
  Tensor row_values = Tensor::Empty({rows.outer, rows.n}, input.dtype(), input.device());
  Tensor row_indices = Tensor::Empty({rows.outer, rows.n}, DType::kInt64, input.device());
  if (IndexKernelsRun(input)) {
    DT_RETURN_IF_ERROR(CumExtremeRowsOnDevice(rows.matrix(), is_max, row_values, row_indices));
    return OpResult{PutBack(row_values, values, dim), PutBack(row_indices, indices, dim)};
  }
  int64_t* at = row_indices.data_as<int64_t>();
  DT_DISPATCH_ALL(input.dtype(), [&] {
    using C = ComputeType<scalar_t>;
    const scalar_t* in = rows.data.data_as<scalar_t>();
    scalar_t* out = row_values.data_as<scalar_t>();
    for (int64_t r = 0; r < rows.outer; ++r) {
      int64_t best = r * rows.n;
      for (int64_t i = r * rows.n; i < (r + 1) * rows.n; ++i) {
        if (scalar::takes_over(static_cast<C>(in[i]), static_cast<C>(in[best]), is_max)) best = i;
        out[i] = in[best];
        at[i] = best - r * rows.n;
      }
    }
  });
  return OpResult{PutBack(row_values, values, dim), PutBack(row_indices, indices, dim)};
}

absl::StatusOr<OpResult> LogcumsumexpEager(const OpDef& op, const OpArgs& args) {
  const Tensor& input = args.tensor(0);
  DT_RUN_THROUGH_HOST_IF_NEEDED(op, args, args.tensor(0));
  if (!IsFloating(input.dtype())) {
    return Error(ErrorKind::kType, absl::StrFormat("logcumsumexp(): expected a floating-point input, got %s",
                                                   DTypeName(input.dtype())));
  }
  DT_ASSIGN_OR_RETURN(int64_t dim, NormalizeDim(args.int_(1), input.ndim()));
  Tensor out = Tensor::Empty(input.sizes(), input.dtype(), input.device());
  if (out.is_meta() || out.numel() == 0) return OpResult{out};
  const Rows rows = RowsAlong(input, dim);
  Tensor scanned = Tensor::Empty({rows.outer, rows.n}, input.dtype(), input.device());
  if (IndexKernelsRun(input)) {
    DT_RETURN_IF_ERROR(ScanRowsOnDevice(rows.matrix(), DeviceScan::kLogSumExp, scanned));
    return OpResult{PutBack(scanned, out, dim)};
  }
  DT_DISPATCH_ALL(input.dtype(), [&] {
    const scalar_t* in = rows.data.data_as<scalar_t>();
    scalar_t* dst = scanned.data_as<scalar_t>();
    for (int64_t r = 0; r < rows.outer; ++r) {
      double acc = -std::numeric_limits<double>::infinity();
      for (int64_t i = r * rows.n; i < (r + 1) * rows.n; ++i) {
        acc = scalar::log_add_exp(acc, static_cast<double>(static_cast<ComputeType<scalar_t>>(in[i])));
        dst[i] = static_cast<scalar_t>(acc);
      }
    }
  });
  return OpResult{PutBack(scanned, out, dim)};
}

// ---- unique: the distinct values (or slices along `dim`), sorted ----

// Row r of `rows` ([n, width], contiguous) against row s, element by element in the sorts'
// order (NaN largest). `Equal`: no NaN is equal to anything, so each NaN stays apart, as in
// numpy's unique(equal_nan=False) and PyTorch's sort-based unique.
template <typename T>
struct RowOrder {
  const T* rows;
  int64_t width;
  bool Less(int64_t r, int64_t s) const {
    using C = ComputeType<T>;
    for (int64_t j = 0; j < width; ++j) {
      const C a = static_cast<C>(rows[r * width + j]), b = static_cast<C>(rows[s * width + j]);
      if (scalar::sorts_before(a, b, false)) return true;
      if (scalar::sorts_before(b, a, false)) return false;
    }
    return false;
  }
  bool Equal(int64_t r, int64_t s) const {
    for (int64_t j = 0; j < width; ++j) {
      if (!(static_cast<ComputeType<T>>(rows[r * width + j]) == static_cast<ComputeType<T>>(rows[s * width + j]))) {
        return false;
      }
    }
    return true;
  }
};

Tensor Int64Vector(const std::vector<int64_t>& values) {
  Tensor t = Tensor::Empty({static_cast<int64_t>(values.size())}, DType::kInt64, Device::Cpu());
  std::copy(values.begin(), values.end(), t.data_as<int64_t>());
  return t;
}

// Groups the rows of `rows` ([n, width]) on the CPU: the first row of each group in sorted
// order, each row's group, and each group's size (GroupRowsOnDevice makes the same on a device).
RowGroups GroupRows(const Tensor& rows) {
  const int64_t n = rows.size(0), width = rows.size(1);
  std::vector<int64_t> firsts, group_of(n), sizes;
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  DT_DISPATCH_ALL(rows.dtype(), [&] {
    const RowOrder<scalar_t> by{rows.data_as<scalar_t>(), width};
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return by.Less(a, b); });
    for (int64_t i = 0; i < n; ++i) {
      if (i == 0 || !by.Equal(order[i - 1], order[i])) {
        firsts.push_back(order[i]);
        sizes.push_back(0);
      }
      group_of[order[i]] = static_cast<int64_t>(firsts.size()) - 1;
      ++sizes.back();
    }
  });
  return RowGroups{Int64Vector(firsts), Int64Vector(group_of), Int64Vector(sizes)};
}

// PyTorch's refusals: slices along `dim` with no elements cannot be told apart, unless `dim`
// itself is the empty one (then there are none).
absl::Status CheckUniqueDim(const Tensor& input, int64_t dim) {
  int64_t empty_dims = 0;
  for (int64_t d = 0; d < input.ndim(); ++d) empty_dims += input.size(d) == 0;
  if (empty_dims > 1 || (empty_dims == 1 && input.size(dim) != 0)) {
    return Error(ErrorKind::kRuntime, absl::StrFormat("unique(): cannot tell apart the slices along dim %d of a "
                                                      "tensor of shape %s: %s",
                                                      dim, input.ShapeString(),
                                                      empty_dims > 1 ? "more than one dim has size 0"
                                                                     : "a dim other than that one has size 0"));
  }
  return absl::OkStatus();
}

// sorted=False gives the sorted order too (PyTorch leaves that order unspecified).
absl::StatusOr<OpResult> UniqueEager(const OpDef& op, const OpArgs& args) {
  DT_RUN_THROUGH_HOST_IF_NEEDED(op, args, args.tensor(0));
  const Tensor& input = args.tensor(0);
  const bool whole = args.is_none(4);
  int64_t dim = 0;
  if (!whole) {
    DT_ASSIGN_OR_RETURN(dim, NormalizeDim(args.int_(4), input.ndim()));
    DT_RETURN_IF_ERROR(CheckUniqueDim(input, dim));
  }
  // Rows to tell apart: the elements (dim=None), or the slices along dim, each flattened.
  if (input.is_meta()) {
    return Error(ErrorKind::kNotImplemented, "unique(): its result size depends on values a meta tensor does not have");
  }
  const Tensor dense = Contiguous(input);
  const Tensor source = whole || input.ndim() == 0 ? dense.AsStrided({input.numel()}, {1}, dense.offset()) : input;
  DT_ASSIGN_OR_RETURN(Tensor front, Call("movedim", {source, Dims{dim}, Dims{0}}));
  const int64_t n = front.size(0);
  const Tensor moved = Contiguous(front);
  const int64_t width = n == 0 ? 0 : moved.numel() / n;
  const Tensor rows = moved.AsStrided({n, width}, {width, 1}, moved.offset());
  RowGroups g;
  if (IndexKernelsRun(rows)) {
    DT_ASSIGN_OR_RETURN(g, GroupRowsOnDevice(rows));
  } else {
    g = GroupRows(rows);
  }
  DT_ASSIGN_OR_RETURN(Tensor output, Call("index_select", {source, Scalar::Int(dim), g.firsts}));
  OpResult out{output};
  if (args.bool_(2)) out.push_back(whole ? g.group_of.AsStrided(input.sizes(), ContiguousStrides(input.sizes()), 0)
                                         : g.group_of);
  if (args.bool_(3)) out.push_back(g.sizes);
  return out;
}

std::optional<std::string> UniqueDataDependence(const OpArgs&) {
  return "unique(): its result has one entry per distinct value of its input";
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
  // kCudaNative: these run CUDA inputs on the device themselves (runtime/cuda_index_kernels.h).
  constexpr uint32_t kDev = kBoth | kCudaNative;
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
               OpKind::kData, kDev, &SortEager);
  registry.Add("argsort(Tensor input, int dim=-1, bool descending=False, bool stable=False) -> Tensor",
               OpKind::kData, kDev, &ArgsortEager);
  registry.Add("topk(Tensor input, int k, int dim=-1, bool largest=True, bool sorted=True) -> "
               "(Tensor values, Tensor indices)",
               OpKind::kData, kDev, &TopkEager);
  registry.Add("kthvalue(Tensor input, int k, int dim=-1, bool keepdim=False) -> (Tensor values, Tensor indices)",
               OpKind::kData, kDev, &KthvalueEager);
  for (const char* name : {"cummax", "cummin"}) {
    registry.Add(absl::StrFormat("%s(Tensor input, int dim) -> (Tensor values, Tensor indices)", name), OpKind::kData,
                 kDev, &CumExtremeEager);
  }
  registry.Add("unique(Tensor input, bool sorted=True, bool return_inverse=False, bool return_counts=False, "
               "int? dim=None) -> Tensor[]",
               OpKind::kData, kDev | kOneResultBare, &UniqueEager)
      .data_dependent_shape = &UniqueDataDependence;
  registry.Add("logcumsumexp(Tensor input, int dim) -> Tensor", OpKind::kData, kDev, &LogcumsumexpEager);
  registry.Add("cumsum(Tensor input, int dim, *, DType? dtype=None) -> Tensor", OpKind::kData, kDev, &ScanEager);
  registry.Add("cumprod(Tensor input, int dim, *, DType? dtype=None) -> Tensor", OpKind::kData, kDev, &ScanEager);
}

}  // namespace dt
