#include "runtime/tensor.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_format.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/errors.h"

namespace dt {

int64_t NumelOf(DimsView sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

Dims ContiguousStrides(DimsView sizes) {
  Dims strides(sizes.size());
  int64_t running = 1;
  for (int64_t i = static_cast<int64_t>(sizes.size()) - 1; i >= 0; --i) {
    strides[i] = running;
    running *= std::max<int64_t>(sizes[i], 1);
  }
  return strides;
}

std::string DimsToString(DimsView dims) { return absl::StrCat("[", absl::StrJoin(dims, ", "), "]"); }

Tensor::Tensor(std::shared_ptr<Storage> storage, DimsView sizes, DimsView strides, int64_t offset,
               DType dtype)
    : storage_(std::move(storage)),
      sizes_(sizes.begin(), sizes.end()),
      strides_(strides.begin(), strides.end()),
      offset_(offset),
      dtype_(dtype) {}

Tensor Tensor::Empty(DimsView sizes, DType dtype, Device device) {
  const int64_t n = NumelOf(sizes);
  auto storage = Storage::Allocate(static_cast<size_t>(std::max<int64_t>(n, 1) * ItemSize(dtype)),
                                   device);
  return Tensor(std::move(storage), sizes, ContiguousStrides(sizes), 0, dtype);
}

Tensor Tensor::EmptyLike(const Tensor& other) { return EmptyLike(other, other.dtype()); }

Tensor Tensor::EmptyLike(const Tensor& other, DType dtype) {
  if (other.is_contiguous() || !other.is_non_overlapping_and_dense()) {
    return Empty(other.sizes(), dtype, other.device());
  }
  // Keep the dense permutation: order dims by decreasing stride, lay them out contiguously.
  const int64_t nd = other.ndim();
  Dims order(nd);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return other.stride(a) > other.stride(b); });
  Dims strides(nd);
  int64_t running = 1;
  for (int64_t i = nd - 1; i >= 0; --i) {
    strides[order[i]] = running;
    running *= std::max<int64_t>(other.size(order[i]), 1);
  }
  auto storage = Storage::Allocate(
      static_cast<size_t>(std::max<int64_t>(other.numel(), 1) * ItemSize(dtype)), other.device());
  return Tensor(std::move(storage), other.sizes(), strides, 0, dtype);
}

int64_t Tensor::numel() const { return NumelOf(sizes_); }

void* Tensor::data() const {
  char* base = static_cast<char*>(storage_->data());
  if (base == nullptr) return nullptr;
  return base + offset_ * itemsize();
}

bool Tensor::is_contiguous() const {
  int64_t expected = 1;
  for (int64_t i = ndim() - 1; i >= 0; --i) {
    if (sizes_[i] == 1) continue;
    if (sizes_[i] == 0) return true;
    if (strides_[i] != expected) return false;
    expected *= sizes_[i];
  }
  return true;
}

bool Tensor::is_non_overlapping_and_dense() const {
  if (is_contiguous()) return true;
  Dims order;
  for (int64_t i = 0; i < ndim(); ++i) {
    if (sizes_[i] != 1) order.push_back(i);
  }
  std::sort(order.begin(), order.end(),
            [&](int64_t a, int64_t b) { return strides_[a] < strides_[b]; });
  int64_t expected = 1;
  for (int64_t d : order) {
    if (strides_[d] != expected) return false;
    expected *= sizes_[d];
  }
  return true;
}

Tensor Tensor::AsStrided(DimsView sizes, DimsView strides, int64_t offset) const {
  return Tensor(storage_, sizes, strides, offset, dtype_);
}

std::string Tensor::ShapeString() const { return DimsToString(sizes_); }

absl::StatusOr<int64_t> NormalizeDim(int64_t dim, int64_t ndim) {
  const int64_t lo = ndim == 0 ? -1 : -ndim;
  const int64_t hi = ndim == 0 ? 0 : ndim - 1;
  if (dim < lo || dim > hi) {
    return absl::OutOfRangeError(absl::StrFormat(
        "Dimension out of range (expected to be in range of [%d, %d], but got %d)", lo, hi, dim));
  }
  return dim < 0 ? dim + std::max<int64_t>(ndim, 1) : dim;
}

absl::StatusOr<Dims> BroadcastShapes(DimsView a, DimsView b) {
  const size_t nd = std::max(a.size(), b.size());
  Dims out(nd);
  for (size_t i = 0; i < nd; ++i) {
    const int64_t ai = i < nd - a.size() ? 1 : a[i - (nd - a.size())];
    const int64_t bi = i < nd - b.size() ? 1 : b[i - (nd - b.size())];
    if (ai != bi && ai != 1 && bi != 1) {
      return Error(ErrorKind::kShape, absl::StrFormat(
          "shapes %s and %s cannot be broadcast together: size %d and size %d differ at "
          "dimension %d of the result",
          DimsToString(a), DimsToString(b), ai, bi, i));
    }
    out[i] = ai == 1 ? bi : ai;
  }
  return out;
}

absl::StatusOr<Dims> BroadcastStrides(const Tensor& t, DimsView sizes) {
  const int64_t nd = static_cast<int64_t>(sizes.size());
  if (t.ndim() > nd) {
    return Error(ErrorKind::kShape, absl::StrFormat(
        "cannot broadcast a tensor of shape %s to shape %s: it has more dimensions",
        t.ShapeString(), DimsToString(sizes)));
  }
  Dims strides(nd, 0);
  const int64_t lead = nd - t.ndim();
  for (int64_t i = 0; i < t.ndim(); ++i) {
    if (t.size(i) == sizes[lead + i]) {
      strides[lead + i] = t.size(i) == 1 ? 0 : t.stride(i);
    } else if (t.size(i) != 1) {
      return Error(ErrorKind::kShape, absl::StrFormat(
          "cannot broadcast a tensor of shape %s to shape %s: size %d at dimension %d is "
          "neither 1 nor %d",
          t.ShapeString(), DimsToString(sizes), t.size(i), i, sizes[lead + i]));
    }
  }
  return strides;
}

std::optional<Dims> ViewStrides(DimsView old_sizes, DimsView old_strides, DimsView new_sizes) {
  Dims new_strides(new_sizes.size());
  // A 0-d tensor is one element: any shape of one element views it (the caller checked numel).
  if (old_sizes.empty()) return ContiguousStrides(new_sizes);
  if (NumelOf(old_sizes) == 0) {
    if (NumelOf(new_sizes) == 0) return ContiguousStrides(new_sizes);
  }
  // Walk chunks of old dims that are contiguous among themselves, and match new dims to them.
  int64_t view_d = static_cast<int64_t>(new_sizes.size()) - 1;
  int64_t chunk_base_stride = old_strides.empty() ? 1 : old_strides.back();
  int64_t tensor_numel = 1;
  int64_t view_numel = 1;
  for (int64_t tensor_d = static_cast<int64_t>(old_sizes.size()) - 1; tensor_d >= 0; --tensor_d) {
    tensor_numel *= old_sizes[tensor_d];
    if (tensor_d == 0 ||
        (old_sizes[tensor_d - 1] != 1 &&
         old_strides[tensor_d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_sizes[view_d] == 1)) {
        new_strides[view_d] = view_numel * chunk_base_stride;
        view_numel *= new_sizes[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (tensor_d > 0) {
        chunk_base_stride = old_strides[tensor_d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return new_strides;
}

absl::StatusOr<Dims> InferReshape(DimsView requested, int64_t numel, DimsView from_sizes) {
  Dims out(requested.begin(), requested.end());
  int64_t known = 1;
  int64_t infer_at = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      if (infer_at >= 0) return absl::InvalidArgumentError("only one dimension can be inferred");
      infer_at = static_cast<int64_t>(i);
    } else if (out[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("invalid shape dimension %d in %s", out[i], DimsToString(requested)));
    } else {
      known *= out[i];
    }
  }
  if (infer_at >= 0) {
    if (known == 0 || numel % known != 0) {
      return Error(ErrorKind::kShape, absl::StrFormat(
          "shape '%s' is invalid for input of size %d (shape %s)", DimsToString(requested), numel,
          DimsToString(from_sizes)));
    }
    out[infer_at] = numel / known;
  } else if (known != numel) {
    return Error(ErrorKind::kShape, absl::StrFormat(
        "shape '%s' is invalid for input of size %d (shape %s)", DimsToString(requested), numel,
        DimsToString(from_sizes)));
  }
  return out;
}

}  // namespace dt
