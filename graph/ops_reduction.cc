// Reductions: sum, prod, amax, amin, any, all fold with a combiner from runtime/scalar_math.h;
// argmax/argmin scan rows. Dims are normalised and checked here once for all of them.
#include <algorithm>
#include <limits>
#include <type_traits>

#include "absl/strings/str_format.h"
#include "graph/cuda_eager.h"
#include "graph/op_registry.h"
#include "graph/reduction.h"
#include "runtime/copy.h"
#include "runtime/cuda_index_kernels.h"
#include "runtime/errors.h"
#include "runtime/reduce_loops.h"
#include "runtime/scalar_math.h"

namespace dt {
namespace {

struct CombineSum { template <typename A> static A Apply(A acc, A x) { return scalar::reduce_sum(acc, x); } };
struct CombineProd { template <typename A> static A Apply(A acc, A x) { return scalar::reduce_prod(acc, x); } };
struct CombineMax { template <typename A> static A Apply(A acc, A x) { return scalar::reduce_max(acc, x); } };
struct CombineMin { template <typename A> static A Apply(A acc, A x) { return scalar::reduce_min(acc, x); } };
struct CombineAny { static bool Apply(bool acc, bool x) { return scalar::reduce_any(acc, x); } };
struct CombineAll { static bool Apply(bool acc, bool x) { return scalar::reduce_all(acc, x); } };

}  // namespace

DType AccumulatorDType(ReductionCombiner c, DType input) {
  switch (c) {
    case ReductionCombiner::kSum:
    case ReductionCombiner::kProd:
      return IsFloating(input) ? DType::kFloat64 : DType::kInt64;
    case ReductionCombiner::kMax:
    case ReductionCombiner::kMin:
      return input == DType::kFloat16 || input == DType::kBFloat16 ? DType::kFloat32 : input;
    case ReductionCombiner::kAny:
    case ReductionCombiner::kAll:
      return DType::kBool;
  }
  __builtin_unreachable();
}

Scalar ReductionIdentity(ReductionCombiner c, DType acc) {
  switch (c) {
    case ReductionCombiner::kSum: return Scalar::Int(0);
    case ReductionCombiner::kProd: return Scalar::Int(1);
    case ReductionCombiner::kAny: return Scalar::Bool(false);
    case ReductionCombiner::kAll: return Scalar::Bool(true);
    case ReductionCombiner::kMax:
    case ReductionCombiner::kMin: {
      const bool is_max = c == ReductionCombiner::kMax;
      if (IsFloating(acc)) {
        return Scalar::Float(is_max ? -std::numeric_limits<double>::infinity()
                                    : std::numeric_limits<double>::infinity());
      }
      if (acc == DType::kBool) return Scalar::Bool(!is_max);
      // The accumulator's own extremes: a wider type's would wrap when stored into it.
      return DT_DISPATCH_ALL(acc, [&]() -> Scalar {
        if constexpr (std::is_integral_v<scalar_t>) {
          using L = std::numeric_limits<scalar_t>;
          return Scalar::Int(is_max ? static_cast<int64_t>(L::lowest()) : static_cast<int64_t>(L::max()));
        } else {
          return Scalar::Int(0);  // unreachable: floats and bool are handled above
        }
      });
    }
  }
  __builtin_unreachable();
}

namespace {

template <typename Combine>
InnerLoop LoopFor(DType input, DType acc) {
  return DT_DISPATCH_ALL(input, [&]() -> InnerLoop {
    using S = scalar_t;
    return DT_DISPATCH_ALL(acc, [&]() -> InnerLoop {
      using A = scalar_t;
      // Never accumulators.
      if constexpr (std::is_same_v<A, Half> || std::is_same_v<A, BFloat16>) return nullptr;
      else return &ReduceLoop<S, A, Combine>;
    });
  });
}

InnerLoop ReductionLoop(ReductionCombiner c, DType input, DType acc) {
  switch (c) {
    case ReductionCombiner::kSum: return LoopFor<CombineSum>(input, acc);
    case ReductionCombiner::kProd: return LoopFor<CombineProd>(input, acc);
    case ReductionCombiner::kMax: return LoopFor<CombineMax>(input, acc);
    case ReductionCombiner::kMin: return LoopFor<CombineMin>(input, acc);
    case ReductionCombiner::kAny: return LoopFor<CombineAny>(input, acc);
    case ReductionCombiner::kAll: return LoopFor<CombineAll>(input, acc);
  }
  __builtin_unreachable();
}

absl::StatusOr<OpResult> ReductionEager(const OpDef& op, const OpArgs& args) {
  std::optional<Dims> dims;
  if (!args.is_none(1)) dims = args.ints(1);
  const bool keepdim = args.bool_(2);
  std::optional<DType> dtype;
  if (args.size() > 3) dtype = args.dtype(3);
  DT_ASSIGN_OR_RETURN(Tensor result, RunReduction(op, args.tensor(0), dims, keepdim, dtype));
  return OpResult{std::move(result)};
}

absl::StatusOr<OpResult> ArgReductionEager(const OpDef& op, const OpArgs& args) {
  const bool is_max = op.name() == "argmax";
  Tensor input = args.tensor(0);
  DT_RUN_THROUGH_HOST_IF_NEEDED(op, args, input);
  const bool keepdim = args.bool_(2);
  Dims out_shape;
  Tensor rows;  // [outer, n] contiguous, the scanned dim last
  if (input.numel() == 0) {
    return Error(ErrorKind::kIndex, absl::StrFormat("%s(): expected a non-empty tensor, got shape %s",
                                                    op.name(), input.ShapeString()));
  }
  if (args.is_none(1)) {
    rows = Contiguous(input);
    rows = rows.AsStrided({1, input.numel()}, {input.numel(), 1}, rows.offset());
    if (keepdim) out_shape.assign(input.ndim(), 1);
  } else {
    DT_ASSIGN_OR_RETURN(int64_t dim, NormalizeDim(args.int_(1), input.ndim()));
    if (input.ndim() == 0) {
      rows = input.AsStrided({1, 1}, {1, 1}, input.offset());
    } else {
      Dims perm;
      for (int64_t d = 0; d < input.ndim(); ++d) {
        if (d != dim) perm.push_back(d);
      }
      perm.push_back(dim);
      Dims sizes, strides;
      for (int64_t d : perm) {
        sizes.push_back(input.size(d));
        strides.push_back(input.stride(d));
      }
      Tensor moved = Contiguous(input.AsStrided(sizes, strides, input.offset()));
      const int64_t n = input.size(dim);
      rows = moved.AsStrided({moved.numel() / n, n}, {n, 1}, moved.offset());
      for (int64_t d = 0; d < input.ndim(); ++d) {
        if (d != dim) out_shape.push_back(input.size(d));
        else if (keepdim) out_shape.push_back(1);
      }
    }
  }
  Tensor out = Tensor::Empty(out_shape, DType::kInt64, input.device());
  if (out.is_meta()) return OpResult{out};
  const int64_t outer = rows.size(0), n = rows.size(1);
  if (IndexKernelsRun(input)) {
    DT_RETURN_IF_ERROR(ArgExtremeRowsOnDevice(rows, is_max, out.AsStrided({outer}, {1}, out.offset())));
    return OpResult{out};
  }
  int64_t* result = out.data_as<int64_t>();
  DT_DISPATCH_ALL(rows.dtype(), [&] {
    using C = ComputeType<scalar_t>;
    const scalar_t* data = rows.data_as<scalar_t>();
    for (int64_t r = 0; r < outer; ++r) {
      const scalar_t* row = data + r * n;
      int64_t best = 0;
      C best_value = static_cast<C>(row[0]);
      for (int64_t i = 1; i < n && !scalar::is_nan(best_value); ++i) {
        const C v = static_cast<C>(row[i]);
        if (scalar::is_nan(v) || (is_max ? v > best_value : v < best_value)) {
          best = i;
          best_value = v;
        }
      }
      result[r] = best;
    }
  });
  return OpResult{out};
}

}  // namespace

absl::StatusOr<Dims> NormalizeReductionDims(const std::optional<Dims>& dims, int64_t ndim) {
  Dims out;
  if (!dims.has_value() || dims->empty()) {
    for (int64_t d = 0; d < ndim; ++d) out.push_back(d);
    return out;
  }
  for (int64_t d : *dims) {
    DT_ASSIGN_OR_RETURN(int64_t nd, NormalizeDim(d, ndim));
    if (ndim == 0) continue;  // a 0-d tensor reduces over dim 0/-1 to itself
    if (std::find(out.begin(), out.end(), nd) != out.end()) {
      return Error(ErrorKind::kValue,
                   absl::StrFormat("dim %d appears multiple times in the list of dims", nd));
    }
    out.push_back(nd);
  }
  std::sort(out.begin(), out.end());
  return out;
}

absl::StatusOr<Tensor> RunReduction(const OpDef& op, const Tensor& input,
                                    const std::optional<Dims>& dims_arg, bool keepdim,
                                    std::optional<DType> dtype) {
  const ReductionCombiner c = op.reduction.combiner;
  DT_ASSIGN_OR_RETURN(Dims dims, NormalizeReductionDims(dims_arg, input.ndim()));
  Tensor source = input;
  if (dtype.has_value()) source = CastTo(input, *dtype);
  DType result_dtype = source.dtype();
  if ((c == ReductionCombiner::kSum || c == ReductionCombiner::kProd) && !dtype.has_value() &&
      !IsFloating(source.dtype())) {
    result_dtype = DType::kInt64;
  }
  if (c == ReductionCombiner::kAny || c == ReductionCombiner::kAll) result_dtype = DType::kBool;
  Dims keep_shape = source.sizes();
  for (int64_t d : dims) {
    if ((c == ReductionCombiner::kMax || c == ReductionCombiner::kMin) && source.size(d) == 0) {
      return Error(ErrorKind::kIndex,
                   absl::StrFormat("%s(): expected reduction dim %d to have non-zero size (input "
                                   "shape %s)",
                                   op.name(), d, source.ShapeString()));
    }
    keep_shape[d] = 1;
  }
  const DType acc_dtype = AccumulatorDType(c, source.dtype());
  Tensor acc = Tensor::Empty(keep_shape, acc_dtype, source.device());
  if (!acc.is_meta()) {
    DT_RETURN_IF_ERROR(Fill(acc, ReductionIdentity(c, acc_dtype)));
    Dims acc_strides = acc.strides();
    for (int64_t d : dims) acc_strides[d] = 0;
    for (int64_t& s : acc_strides) s *= acc.itemsize();
    Dims in_strides = source.strides();
    for (int64_t& s : in_strides) s *= source.itemsize();
    char* bases[2] = {static_cast<char*>(acc.data()), static_cast<char*>(source.data())};
    Dims strides[2] = {acc_strides, in_strides};
    StridedLoop loop(source.sizes(), bases, strides);
    loop.Run(ReductionLoop(c, source.dtype(), acc_dtype), /*parallel=*/true);
  }
  Tensor result = CastTo(acc, result_dtype);
  if (!keepdim) {
    Dims sizes, strides;
    for (int64_t d = 0; d < result.ndim(); ++d) {
      if (std::find(dims.begin(), dims.end(), d) != dims.end()) continue;
      sizes.push_back(result.size(d));
      strides.push_back(result.stride(d));
    }
    result = result.AsStrided(sizes, strides, result.offset());
  }
  return result;
}

void RegisterReductionOps(OpRegistry& registry) {
  constexpr uint32_t kBound = kMethod | kFunction;
  struct Entry {
    const char* schema;
    ReductionCombiner combiner;
    const char* fn;
    const char* order_key_fn = "";
  };
  const Entry entries[] = {
      {"sum(Tensor input, int[]? dim=None, bool keepdim=False, *, DType? dtype=None) -> Tensor",
       ReductionCombiner::kSum, "reduce_sum"},
      {"prod(Tensor input, int[]? dim=None, bool keepdim=False, *, DType? dtype=None) -> Tensor",
       ReductionCombiner::kProd, "reduce_prod"},
      {"amax(Tensor input, int[]? dim=None, bool keepdim=False) -> Tensor",
       ReductionCombiner::kMax, "reduce_max", "reduce_max_key"},
      {"amin(Tensor input, int[]? dim=None, bool keepdim=False) -> Tensor",
       ReductionCombiner::kMin, "reduce_min", "reduce_min_key"},
      {"any(Tensor input, int[]? dim=None, bool keepdim=False) -> Tensor",
       ReductionCombiner::kAny, "reduce_any"},
      {"all(Tensor input, int[]? dim=None, bool keepdim=False) -> Tensor",
       ReductionCombiner::kAll, "reduce_all"},
  };
  for (const Entry& e : entries) {
    OpDef& op = registry.Add(e.schema, OpKind::kReduction, kBound, &ReductionEager);
    op.reduction.combiner = e.combiner;
    op.reduction.scalar_fn = e.fn;
    op.reduction.order_key_fn = e.order_key_fn;
  }
  registry.Add("argmax(Tensor input, int? dim=None, bool keepdim=False) -> Tensor",
               OpKind::kReduction, kBound | kCudaNative, &ArgReductionEager);
  registry.Add("argmin(Tensor input, int? dim=None, bool keepdim=False) -> Tensor",
               OpKind::kReduction, kBound | kCudaNative, &ArgReductionEager);
}

}  // namespace dt
