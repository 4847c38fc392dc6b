#include "runtime/format.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "runtime/copy.h"
#include "runtime/cuda_tensor.h"

namespace dt {
namespace {

constexpr int64_t kSummarizeThreshold = 1000;
constexpr int64_t kEdgeItems = 3;

// How every element of one tensor is printed, decided from all its (shown) values.
struct ElementStyle {
  DType dtype;
  bool integer_valued = false;  // floats that are all whole: "3."
  bool scientific = false;
  int width = 0;
};

std::string FormatOne(double v, const ElementStyle& style) {
  if (style.dtype == DType::kBool) return v != 0 ? "True" : "False";
  if (!IsFloating(style.dtype)) return absl::StrCat(static_cast<int64_t>(v));
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (style.scientific) return absl::StrFormat("%.4e", v);
  if (style.integer_valued) return absl::StrFormat("%.0f.", v);
  return absl::StrFormat("%.4f", v);
}

void Render(const Tensor& t, const std::vector<double>& values, const Dims& shape, int64_t dim,
            int64_t& cursor, bool summarize, const ElementStyle& style, int indent,
            std::string& out) {
  const int64_t nd = static_cast<int64_t>(shape.size());
  const int64_t size = shape[dim];
  const bool cut = summarize && size > 2 * kEdgeItems;
  out += "[";
  for (int64_t i = 0; i < size; ++i) {
    if (cut && i == kEdgeItems) {
      out += dim == nd - 1 ? "..., " : absl::StrCat("...,\n", std::string(indent + dim + 1, ' '));
      i = size - kEdgeItems;
    }
    if (dim == nd - 1) {
      std::string s = FormatOne(values[cursor++], style);
      out += std::string(std::max<int>(0, style.width - static_cast<int>(s.size())), ' ') + s;
      if (i + 1 < size) out += ", ";
    } else {
      Render(t, values, shape, dim + 1, cursor, summarize, style, indent, out);
      if (i + 1 < size) {
        out += ",";
        out += std::string(nd - dim - 1, '\n');
        out += std::string(indent + dim + 1, ' ');
      }
    }
  }
  out += "]";
}

// Collects the values that will be shown, in print order.
void Gather(const Tensor& t, int64_t dim, int64_t offset, bool summarize, std::vector<double>& out) {
  if (dim == t.ndim()) {
    Tensor one = t.AsStrided({}, {}, offset);
    out.push_back(ItemOf(one)->ToDouble());
    return;
  }
  const int64_t size = t.size(dim);
  const bool cut = summarize && size > 2 * kEdgeItems;
  for (int64_t i = 0; i < size; ++i) {
    if (cut && i == kEdgeItems) i = size - kEdgeItems;
    Gather(t, dim + 1, offset + i * t.stride(dim), summarize, out);
  }
}

}  // namespace

std::string FormatTensor(const Tensor& t) {
  std::vector<std::string> suffix;
  if (!t.device().is_cpu()) suffix.push_back(absl::StrCat("device='", t.device().ToString(), "'"));
  const bool default_dtype = t.dtype() == DType::kFloat32 || t.dtype() == DType::kInt64 ||
                             t.dtype() == DType::kBool;
  std::string body;
  if (t.is_meta()) {
    body = "...";
    suffix.insert(suffix.begin(), absl::StrCat("size=", DimsToString(t.sizes())));
  } else if (t.numel() == 0) {
    body = "[]";
    if (t.ndim() != 1) {
      suffix.insert(suffix.begin(),
                    absl::StrCat("size=(", absl::StrJoin(t.sizes(), ", "), t.ndim() == 1 ? ",)" : ")"));
    }
  } else {
    const bool summarize = t.numel() > kSummarizeThreshold;
    std::vector<double> values;
    Tensor readable = t;
    if (IsCuda(t)) {
      absl::StatusOr<Tensor> host = ToDevice(t, Device::Cpu());
      if (!host.ok()) return absl::StrCat("tensor(<unreadable: ", host.status().message(), ">)");
      readable = *host;
    }
    Gather(readable, 0, readable.offset(), summarize, values);
    ElementStyle style{t.dtype()};
    if (IsFloating(t.dtype())) {
      double max_abs = 0, min_abs = INFINITY;
      bool all_whole = true;
      for (double v : values) {
        if (!std::isfinite(v)) continue;
        max_abs = std::max(max_abs, std::abs(v));
        if (v != 0) min_abs = std::min(min_abs, std::abs(v));
        all_whole &= v == std::floor(v);
      }
      style.integer_valued = all_whole;
      style.scientific = all_whole ? max_abs >= 1e8
                                   : (max_abs > 1e8 || (min_abs < 1e-4 && min_abs != INFINITY) ||
                                      (min_abs != INFINITY && max_abs / min_abs > 1000.0));
    }
    for (double v : values) style.width = std::max<int>(style.width, FormatOne(v, style).size());
    if (t.ndim() == 0) {
      body = FormatOne(values[0], style);
    } else {
      int64_t cursor = 0;
      Render(t, values, t.sizes(), 0, cursor, summarize, style, /*indent=*/7, body);
    }
  }
  if (!default_dtype) suffix.push_back(absl::StrCat("dtype=dyntrace.", DTypeName(t.dtype())));
  std::string out = absl::StrCat("tensor(", body);
  for (const std::string& s : suffix) absl::StrAppend(&out, ", ", s);
  out += ")";
  return out;
}

}  // namespace dt
