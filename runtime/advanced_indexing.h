// runtime/advanced_indexing.h: indexing with integer tensors, int lists and boolean masks
// (`x[t]`, `x[:, t]`, `x[t1, t2]`, `x[[0, 2]]`, `x[mask]`), reading and writing through them.
//
// PyTorch's rules. Ints, slices, None and Ellipsis act as in basic indexing, and so does a 0-d
// integer tensor (it selects and drops its dim, as an int does). The other index tensors (a
// k-dim boolean mask counts as k integer tensors: its True positions) broadcast together to one
// shape B. When the dims they index are adjacent, B takes their place in the result; otherwise B
// comes first (numpy's rule). Indices may be negative. Every index is checked against its size
// before any element is read or written: an IndexError names the index, the dim and the size.
// The result of a read is a new tensor, never a view.
//
//   IndexGather(x, items, {t});                      // x[t]
//   IndexPut(x, items, {t}, v, /*accumulate=*/false);  // x[t] = v
//
// Meta tensors give shapes only; a boolean mask needs values (its True count sets the result's
// size), so on meta tensors IndexGather refuses masks and IndexPut counts each mask as one True.
#ifndef DYNTRACE_RUNTIME_ADVANCED_INDEXING_H_
#define DYNTRACE_RUNTIME_ADVANCED_INDEXING_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/indexing.h"
#include "runtime/tensor.h"

namespace dt {

// input[items], with kTensor items naming entries of `tensors` (int32, int64 or bool).
[[nodiscard]] absl::StatusOr<Tensor> IndexGather(const Tensor& input, absl::Span<const IndexItem> items,
                                                 absl::Span<const Tensor> tensors);

// target[items] = values (broadcast to the indexed shape, converted to target's dtype), or
// target[items] += values with `accumulate` (every duplicate index adds). Without accumulate a
// duplicate index keeps the last value written, in index order.
[[nodiscard]] absl::Status IndexPut(const Tensor& target, absl::Span<const IndexItem> items,
                                    absl::Span<const Tensor> tensors, const Tensor& values, bool accumulate);

// The shape input[items] has; boolean masks count `mask_count` True elements.
[[nodiscard]] absl::StatusOr<Dims> IndexResultShape(const Tensor& input, absl::Span<const IndexItem> items,
                                                    absl::Span<const Tensor> tensors, int64_t mask_count);

// The positions of `input`'s nonzero elements, [count, ndim] int64, in row-major order.
Tensor NonzeroPositions(const Tensor& input);

// Reads index `i` of an int32/int64 tensor, wrapped and checked against `size` (negative indices
// count from the end when `wrap_negative`). The error is PyTorch's IndexError text.
[[nodiscard]] absl::StatusOr<int64_t> CheckedIndex(int64_t i, int64_t size, int64_t dim, bool wrap_negative);

// `t` converted to int64 and made contiguous; REQUIRES: t is int32 or int64.
Tensor ContiguousInt64(const Tensor& t);

// IndexError unless `t` may serve as an index (int32, int64, bool); `what` names the op.
[[nodiscard]] absl::Status CheckIndexDType(const Tensor& t, absl::string_view what, bool allow_bool);

}  // namespace dt

#endif  // DYNTRACE_RUNTIME_ADVANCED_INDEXING_H_
