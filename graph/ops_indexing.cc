// Indexing with tensors: `x[t]`, `x[mask]` and writes through them (runtime/advanced_indexing.h),
// index_select, index_put, index_add, index_copy, gather, scatter, scatter_add, scatter_reduce,
// take_along_dim, masked_fill, embedding,
// one_hot, and the ops whose result size is the data's (nonzero, where(cond), masked_select).
//
// They run as nodes of their own between fused kernels (masked_fill is a `where`, and fuses).
// Indices are checked before any element moves: an IndexError names the index, dim and size.
// On CUDA tensors they run device kernels (runtime/cuda_index_kernels.h), the indices checked on
// the device; a boolean mask's True count (the size of what it selects) is read back.
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "graph/cuda_eager.h"
#include "graph/op_registry.h"
#include "runtime/advanced_indexing.h"
#include "runtime/copy.h"
#include "runtime/cuda_index_kernels.h"
#include "runtime/cuda_tensor.h"
#include "runtime/errors.h"
#include "runtime/scalar_math.h"

namespace dt {
namespace {

OpResult One(Tensor t) { return OpResult{std::move(t)}; }

bool HasBoolTensor(const std::vector<Tensor>& tensors) {
  for (const Tensor& t : tensors) {
    if (t.dtype() == DType::kBool) return true;
  }
  return false;
}

// ---- x[index] and x[index] = value, with `index` EncodeIndex()'s form ----

absl::StatusOr<OpResult> IndexEager(const OpDef& op, const OpArgs& args) {
  DT_RUN_THROUGH_HOST_IF_NEEDED(op, args, args.tensor(0));
  DT_ASSIGN_OR_RETURN(std::vector<IndexItem> items, DecodeIndex(args.ints(1)));
  DT_ASSIGN_OR_RETURN(Tensor out, IndexGather(args.tensor(0), items, args.tensors(2)));
  return One(out);
}

std::optional<std::string> IndexDataDependence(const OpArgs& args) {
  if (!HasBoolTensor(args.tensors(2))) return std::nullopt;
  return "x[mask] with a boolean mask: the result has as many elements as the mask has True values";
}

absl::StatusOr<Tensor> OnHost(const Tensor& t) {
  if (!IsCuda(t)) return t;
  DT_ASSIGN_OR_RETURN(HostMirror m, MirrorToHost(t));
  return m.host;
}

// A write into a CUDA tensor runs device kernels; with tensors on another device, or no kernels
// on its device, it goes through its host mirror (counted as a host op): the
// index and value tensors come over, and the target's span is written back.
absl::Status IndexPutAnywhere(const Tensor& target, absl::Span<const IndexItem> items, const std::vector<Tensor>& tensors,
                              const Tensor& values, bool accumulate) {
  if (!IsCuda(target)) return IndexPut(target, items, tensors, values, accumulate);
  // Device kernels take index, mask and value tensors on the target's device.
  bool on_device = values.device() == target.device();
  for (const Tensor& t : tensors) on_device = on_device && t.device() == target.device();
  if (on_device && IndexKernelsRun(target)) return IndexPut(target, items, tensors, values, accumulate);
  CountCudaHostOp("_index_put");
  DT_ASSIGN_OR_RETURN(HostMirror mirror, MirrorToHost(target));
  std::vector<Tensor> host_tensors;
  for (const Tensor& t : tensors) {
    DT_ASSIGN_OR_RETURN(Tensor h, OnHost(t));
    host_tensors.push_back(h);
  }
  DT_ASSIGN_OR_RETURN(Tensor host_values, OnHost(values));
  DT_RETURN_IF_ERROR(IndexPut(mirror.host, items, host_tensors, host_values, accumulate));
  return WriteBack(mirror);
}

// Writes into args[0] itself and returns it (the tracer records it as an in-place node).
absl::StatusOr<OpResult> IndexPutInPlaceEager(const OpDef&, const OpArgs& args) {
  const Tensor& target = args.tensor(0);
  DT_ASSIGN_OR_RETURN(std::vector<IndexItem> items, DecodeIndex(args.ints(1)));
  const Device where = target.is_meta() ? Device::Cpu() : target.device();
  const Tensor values = args.is_tensor(3) ? args.tensor(3) : ScalarTensor(args.scalar(3), target.dtype(), where);
  DT_RETURN_IF_ERROR(IndexPutAnywhere(target, items, args.tensors(2), values, args.bool_(4)));
  return One(target);
}

// x[mask] = v lines v up with the mask's True elements; that is value-independent only when v
// broadcasts over any count of them.
std::optional<std::string> IndexPutDataDependence(const OpArgs& args) {
  if (!HasBoolTensor(args.tensors(2)) || !args.is_tensor(3) || args.tensor(3).numel() == 1) return std::nullopt;
  absl::StatusOr<std::vector<IndexItem>> items = DecodeIndex(args.ints(1));
  if (items.ok()) {
    absl::StatusOr<Dims> one = IndexResultShape(args.tensor(0), *items, args.tensors(2), 1);
    absl::StatusOr<Dims> two = IndexResultShape(args.tensor(0), *items, args.tensors(2), 2);
    if (one.ok() && two.ok() && BroadcastStrides(args.tensor(3), *one).ok() &&
        BroadcastStrides(args.tensor(3), *two).ok()) {
      return std::nullopt;
    }
  }
  return "x[mask] = v with a tensor v: how v lines up depends on how many True values the mask has";
}

std::vector<IndexItem> TensorItems(size_t count) {
  std::vector<IndexItem> items;
  for (size_t i = 0; i < count; ++i) {
    items.push_back(IndexItem{.kind = IndexItem::Kind::kTensor, .index = static_cast<int64_t>(i)});
  }
  return items;
}

absl::StatusOr<OpResult> IndexPutEager(const OpDef& op, const OpArgs& args) {
  const Tensor& input = args.tensor(0);
  DT_RUN_THROUGH_HOST_IF_NEEDED(op, args, input);
  const Tensor& values = args.tensor(2);
  if (values.dtype() != input.dtype()) {
    return Error(ErrorKind::kType,
                 absl::StrFormat("index_put(): values must have the input's dtype %s, got %s",
                                 DTypeName(input.dtype()), DTypeName(values.dtype())));
  }
  Tensor out = Clone(input);
  DT_RETURN_IF_ERROR(IndexPut(out, TensorItems(args.tensors(1).size()), args.tensors(1), values, args.bool_(3)));
  return One(out);
}

std::optional<std::string> IndexPutListDataDependence(const OpArgs& args) {
  if (!HasBoolTensor(args.tensors(1)) || args.tensor(2).numel() == 1) return std::nullopt;
  return "index_put with a boolean mask and non-scalar values: how they line up depends on the mask's values";
}

absl::StatusOr<OpResult> IndexSelectEager(const OpDef& op, const OpArgs& args) {
  const Tensor& input = args.tensor(0);
  DT_RUN_THROUGH_HOST_IF_NEEDED(op, args, input);
  const Tensor& index = args.tensor(2);
  DT_RETURN_IF_ERROR(CheckIndexDType(index, "index_select()", /*allow_bool=*/false));
  if (index.ndim() > 1) {
    return Error(ErrorKind::kIndex,
                 absl::StrFormat("index_select(): index must be 0-d or 1-d, got shape %s", index.ShapeString()));
  }
  DT_ASSIGN_OR_RETURN(int64_t dim, NormalizeDim(args.int_(1), input.ndim()));
  const Tensor vector = index.AsStrided({index.numel()}, {index.ndim() == 0 ? 1 : index.stride(0)}, index.offset());
  const Tensor source = input.ndim() == 0 ? input.AsStrided({1}, {1}, input.offset()) : input;
  std::vector<IndexItem> items(dim, IndexItem{.kind = IndexItem::Kind::kSlice});
  items.push_back(IndexItem{.kind = IndexItem::Kind::kTensor, .index = 0});
  DT_ASSIGN_OR_RETURN(Tensor out, IndexGather(source, items, {vector}));
  if (input.ndim() == 0) out = out.AsStrided({}, {}, out.offset());
  return One(out);
}

// ---- gather / scatter: an index with the input's rank, one index per element ----

struct AlongDim {
  Tensor self;   // the tensor indexed along `dim`
  Tensor index;  // int64
  Tensor other;  // read or written at the index element's own position
  int64_t dim;
};

// Calls fn(checked index, element offset in self, element offset in other) for every element
// of `a.index`, in order. Every index is checked before fn first runs.
template <typename Fn>
absl::Status ForEachAlong(const AlongDim& a, Fn&& fn) {
  const Tensor index = ContiguousInt64(a.index);
  const int64_t* values = index.data_as<int64_t>();
  const int64_t n = index.numel(), size = a.self.size(a.dim);
  for (int64_t i = 0; i < n; ++i) {
    DT_RETURN_IF_ERROR(CheckedIndex(values[i], size, a.dim, /*wrap_negative=*/false).status());
  }
  const int64_t rank = index.ndim();
  Dims counter(rank, 0);
  int64_t self_at = a.self.offset(), other_at = a.other.offset();
  for (int64_t i = 0; i < n; ++i) {
    fn(values[i], self_at + values[i] * a.self.stride(a.dim), other_at);
    for (int64_t d = rank - 1; d >= 0; --d) {
      const int64_t self_stride = d == a.dim ? 0 : a.self.stride(d);
      if (++counter[d] < index.size(d)) {
        self_at += self_stride;
        other_at += a.other.stride(d);
        break;
      }
      self_at -= self_stride * (index.size(d) - 1);
      other_at -= a.other.stride(d) * (index.size(d) - 1);
      counter[d] = 0;
    }
  }
  return absl::OkStatus();
}

Tensor AtLeast1d(const Tensor& t) { return t.ndim() == 0 ? t.AsStrided({1}, {1}, t.offset()) : t; }

// The device form of ForEachAlong: the index's positions are the domain; `self` steps along
// every dim but `dim`, where the checked index value moves it.
absl::StatusOr<DomainIndex> DeviceAlong(const AlongDim& a) {
  DT_RETURN_IF_ERROR(CheckIndicesOnDevice(a.index, a.self.size(a.dim), a.dim, /*wrap_negative=*/false));
  return DomainIndex{DomainOperand{a.index, a.index.strides()}, a.self.size(a.dim), false, a.self.stride(a.dim)};
}

Dims StridesOffDim(const Tensor& t, int64_t dim) {
  Dims strides = t.strides();
  strides[dim] = 0;
  return strides;
}

// PyTorch's checks: int64 index of the same rank, no bigger than self (and src) off `dim`.
absl::StatusOr<int64_t> CheckAlong(absl::string_view op, const Tensor& self, int64_t dim_arg, const Tensor& index,
                                   const Tensor* src) {
  if (index.dtype() != DType::kInt64) {
    return Error(ErrorKind::kType, absl::StrFormat("%s(): expected an int64 index, got %s", op, DTypeName(index.dtype())));
  }
  DT_ASSIGN_OR_RETURN(int64_t dim, NormalizeDim(dim_arg, self.ndim()));
  const Tensor s = AtLeast1d(self), i = AtLeast1d(index);
  if (i.ndim() != s.ndim() && index.numel() != 0) {
    return Error(ErrorKind::kIndex, absl::StrFormat("%s(): index %s must have as many dims as the input %s", op,
                                                    index.ShapeString(), self.ShapeString()));
  }
  if (src != nullptr && AtLeast1d(*src).ndim() != i.ndim() && index.numel() != 0) {
    return Error(ErrorKind::kIndex, absl::StrFormat("%s(): index %s must have as many dims as src %s", op,
                                                    index.ShapeString(), src->ShapeString()));
  }
  for (int64_t d = 0; d < i.ndim() && d < s.ndim(); ++d) {
    if ((d != dim && i.size(d) > s.size(d)) || (src != nullptr && i.size(d) > AtLeast1d(*src).size(d))) {
      return Error(ErrorKind::kShape,
                   absl::StrFormat("%s(): index %s is larger than the input %s%s at dim %d", op, index.ShapeString(),
                                   self.ShapeString(), src ? absl::StrCat(" or src ", src->ShapeString()) : "", d));
    }
  }
  return dim;
}

absl::StatusOr<OpResult> GatherEager(const OpDef& op, const OpArgs& args) {
  const Tensor& input = args.tensor(0);
  const Tensor& index = args.tensor(2);
  DT_RUN_THROUGH_HOST_IF_NEEDED(op, args, input);
  DT_ASSIGN_OR_RETURN(int64_t dim, CheckAlong("gather", input, args.int_(1), index, nullptr));
  Tensor out = Tensor::Empty(index.sizes(), input.dtype(), input.device());
  if (out.is_meta() || out.numel() == 0) return One(out);
  const int64_t itemsize = input.itemsize();
  const char* src = static_cast<const char*>(input.data()) - input.offset() * itemsize;
  char* dst = static_cast<char*>(out.data());
  const AlongDim along{AtLeast1d(input), index.ndim() == 0 ? AtLeast1d(index) : index, AtLeast1d(out), dim};
  if (IndexKernelsRun(input)) {
    DT_ASSIGN_OR_RETURN(DomainIndex term, DeviceAlong(along));
    DT_RETURN_IF_ERROR(GatherOnDevice(along.other, DomainOperand{along.self, StridesOffDim(along.self, dim)}, {term}));
    return One(out);
  }
  DT_RETURN_IF_ERROR(ForEachAlong(along, [&](int64_t, int64_t from, int64_t to) {
    std::memcpy(dst + to * itemsize, src + from * itemsize, itemsize);
  }));
  return One(out);
}

// A scatter along `dim` on the device: every position of the index folds `other` there into self.
absl::Status ScatterAlongOnDevice(const AlongDim& a, DeviceFold fold, bool include_self) {
  DT_ASSIGN_OR_RETURN(DomainIndex term, DeviceAlong(a));
  return ScatterOnDevice(a.index.sizes(), DomainOperand{a.self, StridesOffDim(a.self, a.dim)},
                         DomainOperand{a.other, a.other.strides()}, {term}, fold, include_self);
}

// scatter (src tensor or value), scatter_add: a copy of the input written at the indices.
absl::StatusOr<OpResult> ScatterEager(const OpDef& op, const OpArgs& args) {
  const Tensor& input = args.tensor(0);
  const Tensor& index = args.tensor(2);
  const bool add = op.name() == "scatter_add";
  DT_RUN_THROUGH_HOST_IF_NEEDED(op, args, input);
  const Device where = input.is_meta() ? Device::Cpu() : input.device();
  const Tensor src = args.is_tensor(3) ? args.tensor(3) : ScalarTensor(args.scalar(3), input.dtype(), where);
  if (args.is_tensor(3) && src.dtype() != input.dtype()) {
    return Error(ErrorKind::kType, absl::StrFormat("%s(): expected src to have the input's dtype %s, got %s",
                                                   op.name(), DTypeName(input.dtype()), DTypeName(src.dtype())));
  }
  const Dims zeros(index.ndim(), 0);
  const Tensor source = args.is_tensor(3) ? src : src.AsStrided(index.sizes(), zeros, src.offset());
  DT_ASSIGN_OR_RETURN(int64_t dim, CheckAlong(op.name(), input, args.int_(1), index, &source));
  Tensor out = Clone(input);
  if (out.is_meta() || index.numel() == 0) return One(out);
  const AlongDim along{AtLeast1d(out), AtLeast1d(index), AtLeast1d(source), dim};
  if (IndexKernelsRun(out)) {
    DT_RETURN_IF_ERROR(ScatterAlongOnDevice(along, add ? DeviceFold::kSum : DeviceFold::kAssign, true));
    return One(out);
  }
  absl::Status status;
  DT_DISPATCH_ALL(out.dtype(), [&] {
    using C = ComputeType<scalar_t>;
    scalar_t* dst = out.data_as<scalar_t>() - out.offset();
    const scalar_t* from = source.data_as<scalar_t>() - source.offset();
    status = ForEachAlong(along, [&](int64_t, int64_t to, int64_t at) {
      dst[to] = add ? static_cast<scalar_t>(static_cast<C>(dst[to]) + static_cast<C>(from[at])) : from[at];
    });
  });
  DT_RETURN_IF_ERROR(status);
  return One(out);
}

// ---- scatter_reduce: src folded into the input at the indices, by sum, prod, mean, amax or amin ----

enum class Fold : uint8_t { kSum, kProd, kMean, kMax, kMin };

absl::StatusOr<Fold> ParseFold(const std::string& reduce) {
  if (reduce == "sum") return Fold::kSum;
  if (reduce == "prod") return Fold::kProd;
  if (reduce == "mean") return Fold::kMean;
  if (reduce == "amax") return Fold::kMax;
  if (reduce == "amin") return Fold::kMin;
  return Error(ErrorKind::kValue, absl::StrFormat("scatter_reduce(): reduce must be 'sum', 'prod', 'mean', 'amax' "
                                                  "or 'amin', got '%s'",
                                                  reduce));
}

// One step of a fold; amax/amin propagate NaN, as PyTorch does.
template <typename C>
C FoldStep(Fold fold, C acc, C x) {
  switch (fold) {
    case Fold::kSum:
    case Fold::kMean:
      return acc + x;
    case Fold::kProd:
      return acc * x;
    case Fold::kMax:
      return scalar::is_nan(acc) || scalar::is_nan(x) ? (scalar::is_nan(acc) ? acc : x) : (x > acc ? x : acc);
    case Fold::kMin:
      return scalar::is_nan(acc) || scalar::is_nan(x) ? (scalar::is_nan(acc) ? acc : x) : (x < acc ? x : acc);
  }
  return acc;
}

// A mean divides by the number of values folded (the input's own counting as one where included);
// integers round down, as PyTorch's floor division does.
template <typename C>
C MeanOf(C sum, int64_t count) {
  if constexpr (std::is_floating_point_v<C>) {
    return sum / static_cast<C>(count);
  } else {
    const C q = sum / static_cast<C>(count);  // rounds toward zero: one less for a negative remainder
    return sum % static_cast<C>(count) != 0 && sum < 0 ? q - 1 : q;
  }
}

DeviceFold DeviceFoldOf(Fold fold) {
  switch (fold) {
    case Fold::kSum: return DeviceFold::kSum;
    case Fold::kProd: return DeviceFold::kProd;
    case Fold::kMean: return DeviceFold::kMean;
    case Fold::kMax: return DeviceFold::kMax;
    case Fold::kMin: return DeviceFold::kMin;
  }
  return DeviceFold::kSum;
}

absl::StatusOr<OpResult> ScatterReduceEager(const OpDef& op, const OpArgs& args) {
  const Tensor& input = args.tensor(0);
  const Tensor& index = args.tensor(2);
  const Tensor& src = args.tensor(3);
  DT_RUN_THROUGH_HOST_IF_NEEDED(op, args, input);
  DT_ASSIGN_OR_RETURN(Fold fold, ParseFold(args.string(4)));
  const bool include_self = args.bool_(5);
  if (src.dtype() != input.dtype()) {
    return Error(ErrorKind::kType, absl::StrFormat("scatter_reduce(): expected src to have the input's dtype %s, got %s",
                                                   DTypeName(input.dtype()), DTypeName(src.dtype())));
  }
  if (fold == Fold::kMean && input.dtype() == DType::kBool) {
    return Error(ErrorKind::kType, "scatter_reduce(): reduce='mean' is not supported for bool tensors");
  }
  DT_ASSIGN_OR_RETURN(int64_t dim, CheckAlong("scatter_reduce", input, args.int_(1), index, &src));
  Tensor out = Clone(input);
  if (out.is_meta() || index.numel() == 0) return One(out);
  const AlongDim along{AtLeast1d(out), AtLeast1d(index), AtLeast1d(src), dim};
  if (IndexKernelsRun(out)) {
    DT_RETURN_IF_ERROR(ScatterAlongOnDevice(along, DeviceFoldOf(fold), include_self));
    return One(out);
  }
  // Per element of out (by offset from out's first element): how many values were folded into it.
  std::vector<int64_t> count(out.offset() + out.numel(), include_self ? 1 : 0);
  absl::Status status;
  DT_DISPATCH_ALL(out.dtype(), [&] {
    using C = ComputeType<scalar_t>;
    scalar_t* dst = out.data_as<scalar_t>() - out.offset();
    const scalar_t* from = src.data_as<scalar_t>() - src.offset();
    status = ForEachAlong(along, [&](int64_t, int64_t to, int64_t at) {
      const C x = static_cast<C>(from[at]);
      dst[to] = static_cast<scalar_t>(count[to]++ == 0 ? x : FoldStep(fold, static_cast<C>(dst[to]), x));
    });
    if (!status.ok() || fold != Fold::kMean) return;
    for (size_t to = 0; to < count.size(); ++to) {
      if (count[to] > 1) dst[to] = static_cast<scalar_t>(MeanOf(static_cast<C>(dst[to]), count[to]));
    }
  });
  DT_RETURN_IF_ERROR(status);
  return One(out);
}

// ---- index_add / index_copy: whole slices of source written at the indices along `dim` ----

// PyTorch's checks, then every index against the size of `dim` (negative indices are errors
// there, as in PyTorch; they never wrap). Returns the normalised dim.
absl::StatusOr<int64_t> CheckIndexSlices(absl::string_view op, const Tensor& input, int64_t dim_arg,
                                         const Tensor& index, const Tensor& source, bool int32_index) {
  DT_ASSIGN_OR_RETURN(int64_t dim, NormalizeDim(dim_arg, input.ndim()));
  if (index.dtype() != DType::kInt64 && !(int32_index && index.dtype() == DType::kInt32)) {
    return Error(ErrorKind::kType, absl::StrFormat("%s(): expected an int64%s index, got %s", op,
                                                   int32_index ? " or int32" : "", DTypeName(index.dtype())));
  }
  if (index.ndim() > 1) {
    return Error(ErrorKind::kIndex, absl::StrFormat("%s(): index must be 0-d or 1-d, got shape %s", op,
                                                    index.ShapeString()));
  }
  if (source.dtype() != input.dtype()) {
    return Error(ErrorKind::kType, absl::StrFormat("%s(): source must have the input's dtype %s, got %s", op,
                                                   DTypeName(input.dtype()), DTypeName(source.dtype())));
  }
  Dims want = AtLeast1d(input).sizes();
  want[dim] = index.numel();
  if (AtLeast1d(source).sizes() != want) {
    return Error(ErrorKind::kShape,
                 absl::StrFormat("%s(): source %s must be the input %s with dim %d sized by the index's %d elements",
                                 op, source.ShapeString(), input.ShapeString(), dim, index.numel()));
  }
  if (input.is_meta()) return dim;
  if (IndexKernelsRun(input)) {
    DT_RETURN_IF_ERROR(CheckIndicesOnDevice(index, AtLeast1d(input).size(dim), dim, /*wrap_negative=*/false));
    return dim;
  }
  const Tensor values = ContiguousInt64(index);
  for (int64_t i = 0; i < values.numel(); ++i) {
    DT_RETURN_IF_ERROR(CheckedIndex(values.data_as<int64_t>()[i], AtLeast1d(input).size(dim), dim,
                                    /*wrap_negative=*/false).status());
  }
  return dim;
}

// index_add / index_copy on the device: the source's positions are the domain; along `dim`,
// position k writes slice index[k] of out.
absl::Status IndexSlicesOnDevice(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& source,
                                 DeviceFold fold, double alpha) {
  Dims index_strides(out.ndim(), 0);
  index_strides[dim] = index.stride(0);
  const DomainIndex term{DomainOperand{index, index_strides}, out.size(dim), false, out.stride(dim)};
  return ScatterOnDevice(source.sizes(), DomainOperand{out, StridesOffDim(out, dim)},
                         DomainOperand{source, source.strides()}, {term}, fold, true, alpha);
}

// A copy of the input with source's slice k added (alpha times) at, or copied to, slice index[k]
// along dim, in index order: duplicates add up, or the last one wins.
absl::StatusOr<OpResult> IndexSlicesEager(const OpDef& op, const OpArgs& args) {
  const bool add = op.name() == "index_add";
  const Tensor& input = args.tensor(0);
  const Tensor& index = args.tensor(2);
  DT_RUN_THROUGH_HOST_IF_NEEDED(op, args, input);
  DT_ASSIGN_OR_RETURN(int64_t dim,
                      CheckIndexSlices(op.name(), input, args.int_(1), index, args.tensor(3), /*int32_index=*/add));
  // Row-major, so that slices are [outer, size, inner] blocks (Clone keeps a transposed layout).
  Tensor out = Contiguous(Clone(input));
  if (out.is_meta() || out.numel() == 0 || index.numel() == 0) return One(out);
  if (IndexKernelsRun(out)) {
    const double alpha = !add ? 1.0 : IsFloating(out.dtype()) ? args.float_(4) : static_cast<double>(args.scalar(4).ToInt());
    DT_RETURN_IF_ERROR(IndexSlicesOnDevice(AtLeast1d(out), dim, AtLeast1d(index), AtLeast1d(args.tensor(3)),
                                           add ? DeviceFold::kSum : DeviceFold::kAssign, alpha));
    return One(out);
  }
  const Tensor source = Contiguous(args.tensor(3));
  const Tensor positions = ContiguousInt64(index);
  const Dims sizes = AtLeast1d(input).sizes();
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= sizes[d];
  for (int64_t d = dim + 1; d < static_cast<int64_t>(sizes.size()); ++d) inner *= sizes[d];
  const int64_t size = sizes[dim], n = index.numel();
  const int64_t* at = positions.data_as<int64_t>();
  DT_DISPATCH_ALL(out.dtype(), [&] {
    using C = ComputeType<scalar_t>;
    // An integer input takes alpha truncated, as PyTorch does.
    const C alpha = add ? static_cast<C>(IsFloating(out.dtype()) ? args.float_(4) : args.scalar(4).ToInt()) : C(1);
    scalar_t* dst = out.data_as<scalar_t>();
    const scalar_t* src = source.data_as<scalar_t>();
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t k = 0; k < n; ++k) {
        scalar_t* to = dst + (o * size + at[k]) * inner;
        const scalar_t* from = src + (o * n + k) * inner;
        for (int64_t j = 0; j < inner; ++j) {
          to[j] = add ? static_cast<scalar_t>(static_cast<C>(to[j]) + alpha * static_cast<C>(from[j])) : from[j];
        }
      }
    }
  });
  return One(out);
}

absl::StatusOr<OpResult> TakeAlongDimEager(const OpDef&, const OpArgs& args) {
  const Tensor& input = args.tensor(0);
  const Tensor& indices = args.tensor(1);
  if (args.is_none(2)) {
    const Tensor flat = Contiguous(input), flat_index = Contiguous(indices);
    return CallOp(*OpRegistry::Get().Find("gather"),
                  OpArgs({flat.AsStrided({flat.numel()}, {1}, flat.offset()), Scalar::Int(0),
                          flat_index.AsStrided({flat_index.numel()}, {1}, flat_index.offset())}));
  }
  if (input.ndim() != indices.ndim()) {
    return Error(ErrorKind::kIndex, absl::StrFormat("take_along_dim(): input %s and indices %s must have as many dims",
                                                    input.ShapeString(), indices.ShapeString()));
  }
  DT_ASSIGN_OR_RETURN(int64_t dim, NormalizeDim(args.int_(2), input.ndim()));
  // Every dim but `dim` broadcasts between the two.
  Dims in_shape = input.sizes(), index_shape = indices.sizes();
  for (int64_t d = 0; d < input.ndim(); ++d) {
    if (d == dim) continue;
    DT_ASSIGN_OR_RETURN(Dims both, BroadcastShapes({input.size(d)}, {indices.size(d)}));
    in_shape[d] = index_shape[d] = both[0];
  }
  DT_ASSIGN_OR_RETURN(Dims in_strides, BroadcastStrides(input, in_shape));
  DT_ASSIGN_OR_RETURN(Dims index_strides, BroadcastStrides(indices, index_shape));
  return CallOp(*OpRegistry::Get().Find("gather"),
                OpArgs({input.AsStrided(in_shape, in_strides, input.offset()), Scalar::Int(dim),
                        indices.AsStrided(index_shape, index_strides, indices.offset())}));
}

// masked_fill: where(mask, value, input) in the input's dtype, so it fuses with its neighbours.
absl::StatusOr<OpResult> MaskedFillEager(const OpDef&, const OpArgs& args) {
  const Tensor& input = args.tensor(0);
  const Tensor& mask = args.tensor(1);
  if (mask.dtype() != DType::kBool) {
    return Error(ErrorKind::kType,
                 absl::StrFormat("masked_fill(): expected a bool mask, got %s", DTypeName(mask.dtype())));
  }
  if (args.is_tensor(2) && args.tensor(2).ndim() != 0) {
    return Error(ErrorKind::kValue, absl::StrFormat("masked_fill(): the value must be a number or a 0-d tensor, "
                                                    "got a tensor of shape %s",
                                                    args.tensor(2).ShapeString()));
  }
  DT_ASSIGN_OR_RETURN(Tensor filled, Call("where", {mask, args[2], input}));
  if (filled.dtype() == input.dtype()) return One(filled);
  DT_ASSIGN_OR_RETURN(Tensor cast, Call("_to", {filled, input.dtype()}));
  return One(cast);
}

absl::StatusOr<OpResult> EmbeddingEager(const OpDef& op, const OpArgs& args) {
  const Tensor& input = args.tensor(0);
  const Tensor& weight = args.tensor(1);
  DT_RUN_THROUGH_HOST_IF_NEEDED(op, args, weight);
  if (input.dtype() != DType::kInt64 && input.dtype() != DType::kInt32) {
    return Error(ErrorKind::kType, absl::StrFormat("embedding(): expected int64 or int32 indices, got %s",
                                                   DTypeName(input.dtype())));
  }
  if (weight.ndim() != 2) {
    return Error(ErrorKind::kValue, absl::StrFormat("embedding(): weight must be 2-d, got shape %s", weight.ShapeString()));
  }
  if (!args.is_none(2)) {
    const int64_t padding = args.int_(2), rows = weight.size(0);
    if (padding < -rows || padding >= rows) {
      return Error(ErrorKind::kValue,
                   absl::StrFormat("embedding(): padding_idx %d must be within num_embeddings (%d)", padding, rows));
    }
  }
  if (!args.is_none(3)) {
    return Error(ErrorKind::kNotImplemented, "embedding(): max_norm (which renormalises weight in place) is not supported");
  }
  DT_ASSIGN_OR_RETURN(Tensor out, IndexGather(weight, TensorItems(1), {input}));
  return One(out);
}

// one_hot's checks with the CPU path's messages: the first negative value, then the largest
// (read back only when it decides the number of classes or an error).
absl::StatusOr<int64_t> DeviceClasses(const Tensor& input, int64_t classes) {
  DT_ASSIGN_OR_RETURN(std::optional<int64_t> negative, FindValueOutside(input, 0, INT64_MAX));
  if (negative) {
    return Error(ErrorKind::kValue, absl::StrFormat("one_hot(): class values must be non-negative, got %d", *negative));
  }
  if (classes >= 0) {
    DT_ASSIGN_OR_RETURN(std::optional<int64_t> over, FindValueOutside(input, 0, classes));
    if (!over) return classes;
  } else if (input.numel() == 0) {
    return Error(ErrorKind::kValue, "one_hot(): cannot infer num_classes from an empty tensor");
  }
  DT_ASSIGN_OR_RETURN(Tensor top, Call("amax", {input}));
  DT_ASSIGN_OR_RETURN(Scalar largest, ItemOf(top));
  if (classes < 0) return largest.ToInt() + 1;
  return Error(ErrorKind::kValue, absl::StrFormat("one_hot(): class value %d must be smaller than num_classes (%d)",
                                                  largest.ToInt(), classes));
}

// One 1 per input element, at its class along the new last dim.
absl::StatusOr<OpResult> OneHotOnDevice(const Tensor& input, int64_t classes_arg) {
  DT_ASSIGN_OR_RETURN(const int64_t classes, DeviceClasses(input, classes_arg));
  Dims shape = input.sizes();
  shape.push_back(classes);
  Tensor out = Tensor::Empty(shape, DType::kInt64, input.device());
  DT_RETURN_IF_ERROR(Fill(out, Scalar::Int(0)));
  Dims dst_strides = out.strides();
  dst_strides.pop_back();
  const DomainIndex term{DomainOperand{input, input.strides()}, classes, false, out.stride(out.ndim() - 1)};
  const Tensor one = ScalarTensor(Scalar::Int(1), DType::kInt64, input.device());
  DT_RETURN_IF_ERROR(ScatterOnDevice(input.sizes(), DomainOperand{out, dst_strides},
                                     DomainOperand{one, Dims(input.ndim(), 0)}, {term}, DeviceFold::kAssign));
  return One(out);
}

absl::StatusOr<OpResult> OneHotEager(const OpDef& op, const OpArgs& args) {
  const Tensor& input = args.tensor(0);
  DT_RUN_THROUGH_HOST_IF_NEEDED(op, args, input);
  if (input.dtype() != DType::kInt64) {
    return Error(ErrorKind::kType, absl::StrFormat("one_hot(): expected an int64 tensor, got %s", DTypeName(input.dtype())));
  }
  int64_t classes = args.int_(1);
  Dims shape = input.sizes();
  if (input.is_meta()) {
    shape.push_back(classes);
    return One(Tensor::Empty(shape, DType::kInt64, input.device()));
  }
  if (IndexKernelsRun(input)) return OneHotOnDevice(input, classes);
  const Tensor values = ContiguousInt64(input);
  const int64_t* v = values.data_as<int64_t>();
  int64_t largest = -1;
  for (int64_t i = 0; i < values.numel(); ++i) {
    if (v[i] < 0) return Error(ErrorKind::kValue, absl::StrFormat("one_hot(): class values must be non-negative, got %d", v[i]));
    largest = std::max(largest, v[i]);
  }
  if (classes < 0) {
    if (values.numel() == 0) return Error(ErrorKind::kValue, "one_hot(): cannot infer num_classes from an empty tensor");
    classes = largest + 1;
  } else if (largest >= classes) {
    return Error(ErrorKind::kValue,
                 absl::StrFormat("one_hot(): class value %d must be smaller than num_classes (%d)", largest, classes));
  }
  shape.push_back(classes);
  Tensor out = Tensor::Empty(shape, DType::kInt64, input.device());
  int64_t* dst = out.data_as<int64_t>();
  std::memset(dst, 0, out.numel() * sizeof(int64_t));
  for (int64_t i = 0; i < values.numel(); ++i) dst[i * classes + v[i]] = 1;
  return One(out);
}

std::optional<std::string> OneHotDataDependence(const OpArgs& args) {
  if (args.int_(1) >= 0) return std::nullopt;
  return "one_hot() without num_classes: the number of classes is the largest value + 1";
}

// ---- results sized by the data ----

absl::StatusOr<Tensor> Positions(const Tensor& t) {
  if (IndexKernelsRun(t)) return NonzeroOnDevice(t);
  return NonzeroPositions(t);
}

absl::StatusOr<OpResult> NonzeroEager(const OpDef& op, const OpArgs& args) {
  DT_RUN_THROUGH_HOST_IF_NEEDED(op, args, args.tensor(0));
  DT_ASSIGN_OR_RETURN(Tensor positions, Positions(args.tensor(0)));
  return One(positions);
}

absl::StatusOr<OpResult> WhereConditionEager(const OpDef& op, const OpArgs& args) {
  DT_RUN_THROUGH_HOST_IF_NEEDED(op, args, args.tensor(0));
  DT_ASSIGN_OR_RETURN(const Tensor positions, Positions(args.tensor(0)));
  OpResult out;
  const int64_t n = positions.size(0), k = positions.size(1);
  for (int64_t d = 0; d < k; ++d) out.push_back(Contiguous(positions.AsStrided({n}, {k}, positions.offset() + d)));
  return out;
}

absl::StatusOr<OpResult> MaskedSelectEager(const OpDef& op, const OpArgs& args) {
  const Tensor& input = args.tensor(0);
  const Tensor& mask = args.tensor(1);
  DT_RUN_THROUGH_HOST_IF_NEEDED(op, args, input);
  if (mask.dtype() != DType::kBool) {
    return Error(ErrorKind::kType, absl::StrFormat("masked_select(): expected a bool mask, got %s", DTypeName(mask.dtype())));
  }
  DT_ASSIGN_OR_RETURN(Dims shape, BroadcastShapes(input.sizes(), mask.sizes()));
  DT_ASSIGN_OR_RETURN(Dims in_strides, BroadcastStrides(input, shape));
  DT_ASSIGN_OR_RETURN(Dims mask_strides, BroadcastStrides(mask, shape));
  const Tensor whole_mask = mask.AsStrided(shape, mask_strides, mask.offset());
  DT_ASSIGN_OR_RETURN(Tensor out, IndexGather(Contiguous(input.AsStrided(shape, in_strides, input.offset())),
                                              TensorItems(1), {whole_mask}));
  return One(out);
}

std::optional<std::string> AlwaysDataDependent(const OpArgs&) {
  return "its result has one entry per nonzero (True) element of its input";
}

// ---- printing: `v2 = v0[v1, :]`, `v0[v1] = v2` ----

// The subscript an encoded index reads as, its tensors named as in `tensor_list_text` ("[v1, v2]").
std::optional<std::string> SubscriptText(const ArgValue* encoded, const std::string& tensor_list_text) {
  const Dims* dims = encoded != nullptr ? std::get_if<Dims>(encoded) : nullptr;
  if (dims == nullptr) return std::nullopt;
  absl::StatusOr<std::vector<IndexItem>> items = DecodeIndex(*dims);
  if (!items.ok()) return std::nullopt;
  absl::string_view inner = tensor_list_text;
  if (inner.size() < 2 || inner.front() != '[' || inner.back() != ']') return std::nullopt;
  inner = inner.substr(1, inner.size() - 2);
  std::vector<std::string> names = absl::StrSplit(inner, ", ", absl::SkipEmpty());
  return IndexToString(*items, names);
}

std::optional<std::string> PrintIndex(absl::Span<const std::string> outputs, absl::Span<const std::string> args,
                                      absl::Span<const ArgValue* const> constants) {
  std::optional<std::string> index = SubscriptText(constants[1], args[2]);
  if (!index || outputs.size() != 1) return std::nullopt;
  return absl::StrCat(outputs[0], " = ", args[0], "[", *index, "]");
}

std::optional<std::string> PrintIndexPut(absl::Span<const std::string> outputs, absl::Span<const std::string> args,
                                         absl::Span<const ArgValue* const> constants) {
  std::optional<std::string> index = SubscriptText(constants[1], args[2]);
  const Scalar* accumulate = constants[4] ? std::get_if<Scalar>(constants[4]) : nullptr;
  if (!index || accumulate == nullptr) return std::nullopt;
  std::string text = absl::StrCat(args[0], "[", *index, "] ", accumulate->ToBool() ? "+= " : "= ", args[3]);
  if (outputs.size() == 1) absl::StrAppend(&text, "; ", outputs[0], " = ", args[0]);
  return text;
}

}  // namespace

void RegisterIndexingOps(OpRegistry& registry) {
  constexpr uint32_t kBoth = kMethod | kFunction;
  constexpr uint32_t kIdx = kChecksIndices;
  // kCudaNative: each runs CUDA operands on the device itself (runtime/cuda_index_kernels.h).
  constexpr uint32_t kDev = kCudaNative;
  OpDef& index = registry.Add("_index(Tensor input, int[] index, Tensor[] tensors) -> Tensor", OpKind::kData,
                              kIdx | kDev, &IndexEager);
  index.print_statement = &PrintIndex;
  index.data_dependent_shape = &IndexDataDependence;
  OpDef& put = registry.Add(
      "_index_put(Tensor input, int[] index, Tensor[] tensors, Operand value, bool accumulate=False) -> Tensor",
      OpKind::kData, kCudaNative | kIdx | kWritesArguments, &IndexPutInPlaceEager);  // writes `input`
  put.print_statement = &PrintIndexPut;
  put.data_dependent_shape = &IndexPutDataDependence;
  registry.Add("index_put(Tensor input, Tensor[] indices, Tensor values, bool accumulate=False) -> Tensor",
               OpKind::kData, kBoth | kInplaceVariant | kIdx | kDev, &IndexPutEager)
      .data_dependent_shape = &IndexPutListDataDependence;
  registry.Add("index_select(Tensor input, int dim, Tensor index) -> Tensor", OpKind::kData, kBoth | kIdx | kDev,
               &IndexSelectEager);
  registry.Add("gather(Tensor input, int dim, Tensor index) -> Tensor", OpKind::kData, kBoth | kIdx | kDev,
               &GatherEager);
  registry.Add("scatter(Tensor input, int dim, Tensor index, Tensor src) -> Tensor", OpKind::kData,
               kBoth | kInplaceVariant | kIdx | kDev, &ScatterEager);
  registry.Add("scatter.value(Tensor input, int dim, Tensor index, Scalar value) -> Tensor", OpKind::kData,
               kBoth | kInplaceVariant | kIdx | kDev, &ScatterEager);
  registry.Add("scatter_add(Tensor input, int dim, Tensor index, Tensor src) -> Tensor", OpKind::kData,
               kBoth | kInplaceVariant | kIdx | kDev, &ScatterEager);
  registry.Add("scatter_reduce(Tensor input, int dim, Tensor index, Tensor src, str reduce, *, "
               "bool include_self=True) -> Tensor",
               OpKind::kData, kBoth | kInplaceVariant | kIdx | kDev, &ScatterReduceEager);
  registry.Add("index_add(Tensor input, int dim, Tensor index, Tensor source, *, Scalar alpha=1) -> Tensor",
               OpKind::kData, kBoth | kInplaceVariant | kIdx | kDev, &IndexSlicesEager);
  registry.Add("index_copy(Tensor input, int dim, Tensor index, Tensor source) -> Tensor", OpKind::kData,
               kBoth | kInplaceVariant | kIdx | kDev, &IndexSlicesEager);
  // Its gather call finds the device by itself.
  registry.Add("take_along_dim(Tensor input, Tensor indices, int? dim=None) -> Tensor", OpKind::kData,
               kBoth | kIdx | kDev, &TakeAlongDimEager);
  registry.Add("masked_fill(Tensor input, Tensor mask, Operand value) -> Tensor", OpKind::kComposite,
               kBoth | kInplaceVariant | kDecomposable, &MaskedFillEager);
  registry.Add("embedding(Tensor input, Tensor weight, int? padding_idx=None, float? max_norm=None, "
               "float norm_type=2.0, bool scale_grad_by_freq=False, bool sparse=False) -> Tensor",
               OpKind::kData, kFunction | kNNFunctional | kIdx | kDev, &EmbeddingEager);
  registry.Add("one_hot(Tensor input, int num_classes=-1) -> Tensor", OpKind::kData,
               kFunction | kNNFunctional | kIdx | kDev, &OneHotEager)
      .data_dependent_shape = &OneHotDataDependence;
  registry.Add("nonzero(Tensor input) -> Tensor", OpKind::kData, kBoth | kDev, &NonzeroEager).data_dependent_shape =
      &AlwaysDataDependent;
  registry.Add("where.condition(Tensor condition) -> Tensor[]", OpKind::kData, kFunction | kDev,
               &WhereConditionEager)
      .data_dependent_shape = &AlwaysDataDependent;
  registry.Add("masked_select(Tensor input, Tensor mask) -> Tensor", OpKind::kData, kBoth | kDev,
               &MaskedSelectEager)
      .data_dependent_shape = &AlwaysDataDependent;
}

}  // namespace dt
