#include "runtime/indexing.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "runtime/errors.h"

namespace dt {

bool HasAdvancedItems(absl::Span<const IndexItem> items) {
  for (const IndexItem& item : items) {
    if (item.kind == IndexItem::Kind::kTensor || item.kind == IndexItem::Kind::kIntList) return true;
  }
  return false;
}

absl::StatusOr<Tensor> ApplyIndex(const Tensor& t, absl::Span<const IndexItem> items) {
  if (HasAdvancedItems(items)) {
    return absl::InternalError("ApplyIndex: advanced items go through runtime/advanced_indexing.h");
  }
  int64_t consuming = 0;
  int ellipses = 0;
  for (const IndexItem& item : items) {
    if (item.kind == IndexItem::Kind::kInt || item.kind == IndexItem::Kind::kSlice) ++consuming;
    if (item.kind == IndexItem::Kind::kEllipsis) ++ellipses;
  }
  if (ellipses > 1) return Error(ErrorKind::kIndex, "an index can only have a single ellipsis ('...')");
  if (consuming > t.ndim()) {
    return Error(ErrorKind::kIndex,
                 absl::StrFormat("too many indices for tensor of dimension %d (shape %s)", t.ndim(),
                                 t.ShapeString()));
  }
  Dims sizes, strides;
  int64_t offset = t.offset();
  int64_t dim = 0;
  for (const IndexItem& item : items) {
    switch (item.kind) {
      case IndexItem::Kind::kEllipsis: {
        const int64_t skip = t.ndim() - consuming;
        for (int64_t i = 0; i < skip; ++i, ++dim) {
          sizes.push_back(t.size(dim));
          strides.push_back(t.stride(dim));
        }
        break;
      }
      case IndexItem::Kind::kNewAxis:
        sizes.push_back(1);
        strides.push_back(dim < t.ndim() ? t.size(dim) * t.stride(dim) : 1);
        break;
      case IndexItem::Kind::kInt: {
        const int64_t size = t.size(dim);
        int64_t i = item.index;
        if (i < -size || i >= size) {
          return Error(ErrorKind::kIndex,
                       absl::StrFormat("index %d is out of bounds for dimension %d with size %d",
                                       item.index, dim, size));
        }
        if (i < 0) i += size;
        offset += i * t.stride(dim);
        ++dim;
        break;
      }
      case IndexItem::Kind::kSlice: {
        if (item.step <= 0) {
          return Error(ErrorKind::kValue, "step must be greater than zero");
        }
        const int64_t size = t.size(dim);
        auto clamp = [&](std::optional<int64_t> v, int64_t fallback) {
          if (!v.has_value()) return fallback;
          int64_t x = *v < 0 ? *v + size : *v;
          return std::clamp<int64_t>(x, 0, size);
        };
        const int64_t start = clamp(item.start, 0);
        const int64_t stop = std::max(start, clamp(item.stop, size));
        const int64_t length = (stop - start + item.step - 1) / item.step;
        sizes.push_back(length);
        strides.push_back(t.stride(dim) * item.step);
        if (length > 0) offset += start * t.stride(dim);
        ++dim;
        break;
      }
      case IndexItem::Kind::kTensor:
      case IndexItem::Kind::kIntList:
        break;  // refused above
    }
  }
  for (; dim < t.ndim(); ++dim) {
    sizes.push_back(t.size(dim));
    strides.push_back(t.stride(dim));
  }
  return t.AsStrided(sizes, strides, offset);
}

Dims EncodeIndex(absl::Span<const IndexItem> items) {
  Dims out;
  for (const IndexItem& item : items) {
    out.push_back(static_cast<int64_t>(item.kind));
    const bool indexed = item.kind == IndexItem::Kind::kInt || item.kind == IndexItem::Kind::kTensor;
    out.push_back(indexed ? item.index : item.start.value_or(kNoBound));
    out.push_back(item.stop.value_or(kNoBound));
    out.push_back(item.step);
    if (item.kind == IndexItem::Kind::kIntList) {
      out[out.size() - 3] = static_cast<int64_t>(item.values.size());
      out.insert(out.end(), item.values.begin(), item.values.end());
    }
  }
  return out;
}

absl::StatusOr<std::vector<IndexItem>> DecodeIndex(DimsView encoded) {
  std::vector<IndexItem> items;
  for (size_t i = 0; i < encoded.size(); i += 4) {
    IndexItem item;
    if (i + 4 > encoded.size() || encoded[i] < 0 || encoded[i] > 5) {
      return Error(ErrorKind::kValue, "malformed encoded index");
    }
    item.kind = static_cast<IndexItem::Kind>(encoded[i]);
    if (item.kind == IndexItem::Kind::kInt || item.kind == IndexItem::Kind::kTensor) {
      item.index = encoded[i + 1];
    } else if (item.kind == IndexItem::Kind::kSlice) {
      if (encoded[i + 1] != kNoBound) item.start = encoded[i + 1];
      if (encoded[i + 2] != kNoBound) item.stop = encoded[i + 2];
      item.step = encoded[i + 3];
    } else if (item.kind == IndexItem::Kind::kIntList) {
      const int64_t n = encoded[i + 1];
      if (n < 0 || i + 4 + n > encoded.size()) return Error(ErrorKind::kValue, "malformed encoded index");
      item.values.assign(encoded.begin() + i + 4, encoded.begin() + i + 4 + n);
      i += n;
    }
    items.push_back(std::move(item));
  }
  return items;
}

std::string IndexToString(absl::Span<const IndexItem> items, absl::Span<const std::string> tensor_names) {
  std::vector<std::string> parts;
  for (const IndexItem& item : items) {
    switch (item.kind) {
      case IndexItem::Kind::kInt: parts.push_back(absl::StrCat(item.index)); break;
      case IndexItem::Kind::kNewAxis: parts.push_back("None"); break;
      case IndexItem::Kind::kEllipsis: parts.push_back("..."); break;
      case IndexItem::Kind::kTensor:
        parts.push_back(item.index >= 0 && item.index < static_cast<int64_t>(tensor_names.size())
                            ? tensor_names[item.index]
                            : std::string("<tensor>"));
        break;
      case IndexItem::Kind::kIntList:
        parts.push_back(absl::StrCat("[", absl::StrJoin(item.values, ", "), "]"));
        break;
      case IndexItem::Kind::kSlice:
        parts.push_back(absl::StrCat(item.start ? absl::StrCat(*item.start) : "", ":",
                                     item.stop ? absl::StrCat(*item.stop) : "",
                                     item.step != 1 ? absl::StrCat(":", item.step) : ""));
        break;
    }
  }
  return absl::StrJoin(parts, ", ");
}

}  // namespace dt
