// graph/rows_along.h's two copies.
#include "graph/rows_along.h"

#include "runtime/copy.h"

namespace dt {

Rows RowsAlong(const Tensor& input, int64_t dim) {
  if (input.ndim() == 0) return Rows{Contiguous(input).AsStrided({1, 1}, {1, 1}, Contiguous(input).offset()), 1, 1};
  Dims sizes, strides;
  for (int64_t d = 0; d < input.ndim(); ++d) {
    if (d == dim) continue;
    sizes.push_back(input.size(d));
    strides.push_back(input.stride(d));
  }
  sizes.push_back(input.size(dim));
  strides.push_back(input.stride(dim));
  Tensor moved = Contiguous(input.AsStrided(sizes, strides, input.offset()));
  const int64_t n = input.size(dim);
  return Rows{moved, n == 0 ? 0 : moved.numel() / n, n};
}

Tensor PutBack(const Tensor& rows, const Tensor& like, int64_t dim) {
  if (like.ndim() == 0) return rows.AsStrided({}, {}, rows.offset());
  Dims moved_sizes;
  for (int64_t d = 0; d < like.ndim(); ++d) {
    if (d != dim) moved_sizes.push_back(like.size(d));
  }
  moved_sizes.push_back(like.size(dim));
  const Dims moved_strides = ContiguousStrides(moved_sizes);
  Dims sizes(like.ndim()), strides(like.ndim());
  for (int64_t d = 0, k = 0; d < like.ndim(); ++d) {
    const int64_t from = d == dim ? like.ndim() - 1 : k++;
    sizes[d] = moved_sizes[from];
    strides[d] = moved_strides[from];
  }
  return Contiguous(rows.AsStrided(sizes, strides, rows.offset()));
}

}  // namespace dt
