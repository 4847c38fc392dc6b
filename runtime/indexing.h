// runtime/indexing.h: basic indexing (`t[1, ::2, None, ...]`) as a view.
//
// Items are ints, slices, None (new axis) and one Ellipsis, with Python's clamping rules for
// slice bounds and PyTorch's refusal of non-positive steps. The result always shares storage.
#ifndef DYNTRACE_RUNTIME_INDEXING_H_
#define DYNTRACE_RUNTIME_INDEXING_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/tensor.h"

namespace dt {

struct IndexItem {
  enum class Kind : uint8_t { kInt, kSlice, kNewAxis, kEllipsis };
  Kind kind = Kind::kInt;
  int64_t index = 0;  // kInt
  std::optional<int64_t> start, stop;  // kSlice
  int64_t step = 1;                    // kSlice
};

[[nodiscard]] absl::StatusOr<Tensor> ApplyIndex(const Tensor& t, absl::Span<const IndexItem> items);

// Index items as a flat int list (4 ints per item: kind, then index or start/stop/step, with
// kNoBound for an omitted slice bound), so graphs can carry an index as an ordinary int[] argument.
inline constexpr int64_t kNoBound = INT64_MIN;
Dims EncodeIndex(absl::Span<const IndexItem> items);
[[nodiscard]] absl::StatusOr<std::vector<IndexItem>> DecodeIndex(DimsView encoded);
// "1, ::2, None" for printing.
std::string IndexToString(absl::Span<const IndexItem> items);

}  // namespace dt

#endif  // DYNTRACE_RUNTIME_INDEXING_H_
