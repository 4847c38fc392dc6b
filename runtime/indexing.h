// runtime/indexing.h: basic indexing (`t[1, ::2, None, ...]`) as a view.
//
// Items are ints, slices, None (new axis) and one Ellipsis, with Python's clamping rules for
// slice bounds and PyTorch's refusal of non-positive steps. The result always shares storage.
// An index may also hold advanced items (index tensors and int lists); those are applied by
// runtime/advanced_indexing.h, and ApplyIndex refuses them.
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
  // kTensor: an index tensor, the `index`-th of the tensors given beside the items.
  // kIntList: a Python list of ints (`x[[0, 2]]`), its values in `values`.
  enum class Kind : uint8_t { kInt, kSlice, kNewAxis, kEllipsis, kTensor, kIntList };
  Kind kind = Kind::kInt;
  int64_t index = 0;  // kInt; kTensor: position in the tensor list
  std::optional<int64_t> start, stop;  // kSlice
  int64_t step = 1;                    // kSlice
  std::vector<int64_t> values;         // kIntList
};

// Whether `items` hold an index tensor or an int list (advanced indexing).
bool HasAdvancedItems(absl::Span<const IndexItem> items);

[[nodiscard]] absl::StatusOr<Tensor> ApplyIndex(const Tensor& t, absl::Span<const IndexItem> items);

// Index items as a flat int list (4 ints per item: kind, then index or start/stop/step, with
// kNoBound for an omitted slice bound; an int list's 4 ints give its length, its values follow),
// so graphs can carry an index as an ordinary int[] argument.
inline constexpr int64_t kNoBound = INT64_MIN;
Dims EncodeIndex(absl::Span<const IndexItem> items);
[[nodiscard]] absl::StatusOr<std::vector<IndexItem>> DecodeIndex(DimsView encoded);
// "1, ::2, None, [0, 2], t" for printing; kTensor items print as tensor_names[index] (or
// "<tensor>" where no name is given).
std::string IndexToString(absl::Span<const IndexItem> items,
                          absl::Span<const std::string> tensor_names = {});

}  // namespace dt

#endif  // DYNTRACE_RUNTIME_INDEXING_H_
