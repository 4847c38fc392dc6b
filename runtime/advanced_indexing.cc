#include "runtime/advanced_indexing.h"

#include <cstring>

#include "absl/strings/str_format.h"
#include "runtime/copy.h"
#include "runtime/cuda_index_kernels.h"
#include "runtime/cuda_tensor.h"
#include "runtime/errors.h"

namespace dt {

absl::StatusOr<int64_t> CheckedIndex(int64_t i, int64_t size, int64_t dim, bool wrap_negative) {
  if (i >= size || i < (wrap_negative ? -size : 0)) {
    return Error(ErrorKind::kIndex,
                 absl::StrFormat("index %d is out of bounds for dimension %d with size %d", i, dim, size));
  }
  return i < 0 ? i + size : i;
}

Tensor ContiguousInt64(const Tensor& t) {
  return Contiguous(t.dtype() == DType::kInt64 ? t : CastTo(t, DType::kInt64));
}

absl::Status CheckIndexDType(const Tensor& t, absl::string_view what, bool allow_bool) {
  if (t.dtype() == DType::kInt64 || t.dtype() == DType::kInt32 || (allow_bool && t.dtype() == DType::kBool)) {
    return absl::OkStatus();
  }
  return Error(ErrorKind::kIndex,
               absl::StrFormat("%s: tensors used as indices must be int64, int32%s tensors, got %s", what,
                               allow_bool ? " or bool" : "", DTypeName(t.dtype())));
}

Tensor NonzeroPositions(const Tensor& input) {
  const Tensor bools = Contiguous(input.dtype() == DType::kBool ? input : CastTo(input, DType::kBool));
  const bool* flags = bools.data_as<bool>();
  const int64_t n = bools.numel(), ndim = bools.ndim();
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) count += flags[i] ? 1 : 0;
  Tensor out = Tensor::Empty({count, ndim}, DType::kInt64, Device::Cpu());
  int64_t* row = out.data_as<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    if (!flags[i]) continue;
    for (int64_t d = ndim - 1, rest = i; d >= 0; --d) {
      row[d] = rest % bools.size(d);
      rest /= bools.size(d);
    }
    row += ndim;
  }
  return out;
}

namespace {

// An index tensor on one dim of the basic view.
struct DimIndex {
  int64_t view_dim;
  int64_t input_dim;  // for messages
  Tensor index;       // int32 or int64; 0-d: selects and drops the dim, as an int does
};

// The index with its basic items applied: `view` keeps the dims the index tensors index.
struct Resolved {
  Tensor view;
  std::vector<DimIndex> indexed;
};

// One item with lists and masks turned into integer index tensors (a mask into one per dim).
struct Expanded {
  IndexItem basic;
  std::vector<Tensor> indices;  // empty: `basic` applies
  Tensor mask;                  // the mask the indices came from, for the shape check
  bool advanced = false;
};

absl::StatusOr<std::vector<Tensor>> MaskIndices(const Tensor& mask, Device device, int64_t mask_count) {
  std::vector<Tensor> out;
  if (device.is_meta()) {
    if (mask_count < 0) {
      return Error(ErrorKind::kValue, "indexing with a boolean mask needs its values (its True count sets the size)");
    }
    for (int64_t d = 0; d < mask.ndim(); ++d) out.push_back(Tensor::Empty({mask_count}, DType::kInt64, device));
    return out;
  }
  Tensor positions;
  if (IndexKernelsRun(mask)) {
    DT_ASSIGN_OR_RETURN(positions, NonzeroOnDevice(mask));
  } else if (IsCuda(mask)) {  // callers send such masks through the host
    return absl::InternalError("advanced index: a boolean mask on a CUDA device without the index kernels");
  } else {
    positions = NonzeroPositions(mask);
  }
  const int64_t k = mask.ndim();
  for (int64_t d = 0; d < k; ++d) out.push_back(positions.AsStrided({positions.size(0)}, {k}, positions.offset() + d));
  return out;
}

absl::StatusOr<std::vector<Expanded>> Expand(const Tensor& input, absl::Span<const IndexItem> items,
                                             absl::Span<const Tensor> tensors, int64_t mask_count) {
  std::vector<Expanded> out;
  for (const IndexItem& item : items) {
    Expanded e;
    e.basic = item;
    if (item.kind == IndexItem::Kind::kIntList) {
      e.advanced = true;
      Tensor list = Tensor::Empty({static_cast<int64_t>(item.values.size())}, DType::kInt64, Device::Cpu());
      if (!item.values.empty()) std::memcpy(list.data(), item.values.data(), item.values.size() * sizeof(int64_t));
      if (IsCuda(input)) {  // the list is the index on the input's device
        DT_ASSIGN_OR_RETURN(list, ToDevice(list, input.device()));
      }
      e.indices.push_back(list);
    } else if (item.kind == IndexItem::Kind::kTensor) {
      if (item.index < 0 || item.index >= static_cast<int64_t>(tensors.size())) {
        return absl::InternalError("advanced index: tensor item without its tensor");
      }
      const Tensor& t = tensors[item.index];
      DT_RETURN_IF_ERROR(CheckIndexDType(t, "index", /*allow_bool=*/true));
      e.advanced = true;
      if (t.dtype() == DType::kBool) {
        e.mask = t;
        DT_ASSIGN_OR_RETURN(e.indices, MaskIndices(t, input.device(), mask_count));
      } else {
        e.indices.push_back(t);
      }
    }
    out.push_back(std::move(e));
  }
  return out;
}

absl::Status CheckMaskShape(const Expanded& e, const Tensor& input, int64_t dim) {
  for (int64_t k = 0; k < e.mask.ndim(); ++k) {
    if (dim + k >= input.ndim() || e.mask.size(k) != input.size(dim + k)) {
      return Error(ErrorKind::kIndex,
                   absl::StrFormat("the shape of the mask %s at index %d does not match the shape of the "
                                   "indexed tensor %s at index %d",
                                   e.mask.ShapeString(), k, input.ShapeString(), dim + k));
    }
  }
  return absl::OkStatus();
}

// The number of input dims each item consumes.
int64_t Consumes(const Expanded& e) {
  if (e.advanced) return e.mask.defined() ? e.mask.ndim() : 1;
  return e.basic.kind == IndexItem::Kind::kInt || e.basic.kind == IndexItem::Kind::kSlice ? 1 : 0;
}

absl::StatusOr<Resolved> Resolve(const Tensor& input, absl::Span<const IndexItem> items,
                                 absl::Span<const Tensor> tensors, int64_t mask_count) {
  DT_ASSIGN_OR_RETURN(std::vector<Expanded> expanded, Expand(input, items, tensors, mask_count));
  int64_t consuming = 0, ellipses = 0;
  for (const Expanded& e : expanded) {
    consuming += Consumes(e);
    ellipses += !e.advanced && e.basic.kind == IndexItem::Kind::kEllipsis;
  }
  if (ellipses > 1) return Error(ErrorKind::kIndex, "an index can only have a single ellipsis ('...')");
  if (consuming > input.ndim()) {
    return Error(ErrorKind::kIndex, absl::StrFormat("too many indices for tensor of dimension %d (shape %s)",
                                                    input.ndim(), input.ShapeString()));
  }
  // Basic items act through ApplyIndex, with a full slice standing where each index tensor is.
  std::vector<IndexItem> basic;
  Resolved r;
  int64_t input_dim = 0, view_dim = 0;
  for (const Expanded& e : expanded) {
    if (!e.advanced) {
      basic.push_back(e.basic);
      const IndexItem::Kind kind = e.basic.kind;
      if (kind == IndexItem::Kind::kEllipsis) {
        input_dim += input.ndim() - consuming;
        view_dim += input.ndim() - consuming;
      } else {
        input_dim += kind == IndexItem::Kind::kInt || kind == IndexItem::Kind::kSlice;
        view_dim += kind == IndexItem::Kind::kSlice || kind == IndexItem::Kind::kNewAxis;
      }
      continue;
    }
    if (e.mask.defined()) DT_RETURN_IF_ERROR(CheckMaskShape(e, input, input_dim));
    for (const Tensor& index : e.indices) {
      basic.push_back(IndexItem{.kind = IndexItem::Kind::kSlice});
      r.indexed.push_back(DimIndex{view_dim++, input_dim++, index});
    }
  }
  DT_ASSIGN_OR_RETURN(r.view, ApplyIndex(input, basic));
  return r;
}

// Where B goes: in place of the index tensors' dims when those are adjacent (0-d indices, which
// drop their dims, do not separate them), else first.
struct Layout {
  Dims kept_sizes, kept_strides;  // the view's dims no index tensor indexes, in order
  int64_t b_at = 0;
  Dims b_shape;
};

absl::StatusOr<Layout> LayoutOf(const Resolved& r) {
  enum class Role : uint8_t { kKept, kIndexed, kSelected };
  Layout l;
  std::vector<Role> role(r.view.ndim(), Role::kKept);
  for (const DimIndex& d : r.indexed) {
    role[d.view_dim] = d.index.ndim() == 0 ? Role::kSelected : Role::kIndexed;
    DT_ASSIGN_OR_RETURN(l.b_shape, BroadcastShapes(l.b_shape, d.index.sizes()));
  }
  int64_t first = -1, last = -1, kept_before_first = 0;
  for (int64_t d = 0; d < r.view.ndim(); ++d) {
    if (role[d] == Role::kKept) {
      kept_before_first += first < 0;
      l.kept_sizes.push_back(r.view.size(d));
      l.kept_strides.push_back(r.view.stride(d));
    } else if (role[d] == Role::kIndexed) {
      if (first < 0) first = d;
      last = d;
    }
  }
  bool adjacent = true;
  for (int64_t d = first; first >= 0 && d <= last; ++d) adjacent = adjacent && role[d] != Role::kKept;
  l.b_at = adjacent ? kept_before_first : 0;
  return l;
}

Dims ResultShape(const Layout& l) {
  Dims shape = l.kept_sizes;
  shape.insert(shape.begin() + l.b_at, l.b_shape.begin(), l.b_shape.end());
  return shape;
}

// Per element of B, the element offset the index tensors select, each index checked.
absl::StatusOr<std::vector<int64_t>> IndexOffsets(const Resolved& r, const Layout& l) {
  std::vector<int64_t> offsets(NumelOf(l.b_shape), 0);
  for (const DimIndex& d : r.indexed) {
    DT_ASSIGN_OR_RETURN(Dims strides, BroadcastStrides(d.index, l.b_shape));
    const Tensor values = ContiguousInt64(d.index.AsStrided(l.b_shape, strides, d.index.offset()));
    const int64_t* v = values.data_as<int64_t>();
    const int64_t size = r.view.size(d.view_dim), stride = r.view.stride(d.view_dim);
    for (size_t b = 0; b < offsets.size(); ++b) {
      DT_ASSIGN_OR_RETURN(int64_t i, CheckedIndex(v[b], size, d.input_dim, /*wrap_negative=*/true));
      offsets[b] += i * stride;
    }
  }
  return offsets;
}

// Calls fn(position in the contiguous result, element offset in the view's storage) for every
// result element, in order.
template <typename Fn>
void ForEachElement(const Resolved& r, const Layout& l, const std::vector<int64_t>& offsets, Fn&& fn) {
  Dims sizes = l.kept_sizes, strides = l.kept_strides;
  sizes.insert(sizes.begin() + l.b_at, static_cast<int64_t>(offsets.size()));
  strides.insert(strides.begin() + l.b_at, 0);
  const int64_t total = NumelOf(sizes), rank = static_cast<int64_t>(sizes.size());
  Dims counter(rank, 0);
  int64_t base = r.view.offset();
  for (int64_t linear = 0; linear < total; ++linear) {
    fn(linear, base + offsets[counter[l.b_at]]);
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++counter[d] < sizes[d]) {
        base += strides[d];
        break;
      }
      base -= strides[d] * (sizes[d] - 1);
      counter[d] = 0;
    }
  }
}

char* StorageBase(const Tensor& t) { return static_cast<char*>(t.data()) - t.offset() * t.itemsize(); }

// ---- the same on a device (runtime/cuda_index_kernels.h): the result's dims are the domain ----

// Each index tensor checked in order, over B as the CPU path checks them, then as domain terms.
absl::StatusOr<std::vector<DomainIndex>> DeviceTerms(const Resolved& r, const Layout& l) {
  const int64_t kept_after = static_cast<int64_t>(l.kept_sizes.size()) - l.b_at;
  std::vector<DomainIndex> terms;
  for (const DimIndex& d : r.indexed) {
    DT_ASSIGN_OR_RETURN(Dims b_strides, BroadcastStrides(d.index, l.b_shape));
    const int64_t size = r.view.size(d.view_dim);
    DT_RETURN_IF_ERROR(
        CheckIndicesOnDevice(d.index.AsStrided(l.b_shape, b_strides, d.index.offset()), size, d.input_dim, true));
    Dims strides(l.b_at, 0);
    strides.insert(strides.end(), b_strides.begin(), b_strides.end());
    strides.resize(strides.size() + kept_after, 0);
    terms.push_back(DomainIndex{DomainOperand{d.index, strides}, size, true, r.view.stride(d.view_dim)});
  }
  return terms;
}

// The view's own strides over the domain: its kept dims, 0 across B.
Dims ViewStrides(const Layout& l) {
  Dims strides = l.kept_strides;
  strides.insert(strides.begin() + l.b_at, l.b_shape.size(), 0);
  return strides;
}

absl::StatusOr<Tensor> IndexGatherOnDevice(const Resolved& r, const Layout& l) {
  Tensor out = Tensor::Empty(ResultShape(l), r.view.dtype(), r.view.device());
  DT_ASSIGN_OR_RETURN(std::vector<DomainIndex> terms, DeviceTerms(r, l));
  DT_RETURN_IF_ERROR(GatherOnDevice(out, DomainOperand{r.view, ViewStrides(l)}, terms));
  return out;
}

absl::Status IndexPutOnDevice(const Resolved& r, const Layout& l, const Tensor& values, bool accumulate) {
  const Dims shape = ResultShape(l);
  Tensor source = CastTo(values, r.view.dtype());
  if (source.SharesStorageWith(r.view)) source = Clone(source);  // written while read otherwise
  DT_ASSIGN_OR_RETURN(Dims source_strides, BroadcastStrides(source, shape));
  DT_ASSIGN_OR_RETURN(std::vector<DomainIndex> terms, DeviceTerms(r, l));
  return ScatterOnDevice(shape, DomainOperand{r.view, ViewStrides(l)}, DomainOperand{source, source_strides}, terms,
                         accumulate ? DeviceFold::kSum : DeviceFold::kAssign);
}

}  // namespace

absl::StatusOr<Dims> IndexResultShape(const Tensor& input, absl::Span<const IndexItem> items,
                                      absl::Span<const Tensor> tensors, int64_t mask_count) {
  const Tensor meta(Storage::Allocate(0, Device::Meta()), input.sizes(), input.strides(), 0, input.dtype());
  DT_ASSIGN_OR_RETURN(Resolved r, Resolve(meta, items, tensors, mask_count));
  DT_ASSIGN_OR_RETURN(Layout l, LayoutOf(r));
  return ResultShape(l);
}

absl::StatusOr<Tensor> IndexGather(const Tensor& input, absl::Span<const IndexItem> items,
                                   absl::Span<const Tensor> tensors) {
  DT_ASSIGN_OR_RETURN(Resolved r, Resolve(input, items, tensors, /*mask_count=*/-1));
  DT_ASSIGN_OR_RETURN(Layout l, LayoutOf(r));
  if (IndexKernelsRun(input)) return IndexGatherOnDevice(r, l);
  Tensor out = Tensor::Empty(ResultShape(l), input.dtype(), input.device());
  if (out.is_meta()) return out;
  DT_ASSIGN_OR_RETURN(std::vector<int64_t> offsets, IndexOffsets(r, l));
  const int64_t itemsize = input.itemsize();
  const char* src = StorageBase(r.view);
  char* dst = static_cast<char*>(out.data());
  ForEachElement(r, l, offsets, [&](int64_t at, int64_t from) {
    std::memcpy(dst + at * itemsize, src + from * itemsize, itemsize);
  });
  return out;
}

absl::Status IndexPut(const Tensor& target, absl::Span<const IndexItem> items, absl::Span<const Tensor> tensors,
                      const Tensor& values, bool accumulate) {
  DT_ASSIGN_OR_RETURN(Resolved r, Resolve(target, items, tensors, /*mask_count=*/1));
  DT_ASSIGN_OR_RETURN(Layout l, LayoutOf(r));
  const Dims shape = ResultShape(l);
  absl::StatusOr<Dims> strides = BroadcastStrides(values, shape);
  if (!strides.ok()) {
    return Error(ErrorKind::kShape,
                 absl::StrFormat("shape mismatch: value tensor of shape %s cannot be broadcast to indexing "
                                 "result of shape %s",
                                 values.ShapeString(), DimsToString(shape)));
  }
  if (target.is_meta()) return absl::OkStatus();
  if (IndexKernelsRun(target)) return IndexPutOnDevice(r, l, values, accumulate);
  const Tensor source = Contiguous(
      CastTo(values, target.dtype()).AsStrided(shape, *strides, values.offset()));
  DT_ASSIGN_OR_RETURN(std::vector<int64_t> offsets, IndexOffsets(r, l));
  char* dst = StorageBase(r.view);
  const char* src = static_cast<const char*>(source.data());
  const int64_t itemsize = target.itemsize();
  if (!accumulate) {
    ForEachElement(r, l, offsets, [&](int64_t at, int64_t to) {
      std::memcpy(dst + to * itemsize, src + at * itemsize, itemsize);
    });
    return absl::OkStatus();
  }
  DT_DISPATCH_ALL(target.dtype(), [&] {
    using C = ComputeType<scalar_t>;
    auto* out = reinterpret_cast<scalar_t*>(dst);
    const auto* in = reinterpret_cast<const scalar_t*>(src);
    ForEachElement(r, l, offsets, [&](int64_t at, int64_t to) {
      out[to] = static_cast<scalar_t>(static_cast<C>(out[to]) + static_cast<C>(in[at]));
    });
  });
  return absl::OkStatus();
}

}  // namespace dt
