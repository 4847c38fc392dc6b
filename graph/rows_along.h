// graph/rows_along.h: a tensor seen as rows along one dim, for the ops that work a row at a time
// (sorts, scans, searches, kthvalue).
//
// RowsAlong copies `input` with `dim` moved last into a contiguous [outer, n] buffer; the op
// fills a [outer, n'] result row by row, and PutBack lays it out again with `dim` in place.
//
//   const Rows rows = RowsAlong(input, dim);
//   Tensor out = Tensor::Empty({rows.outer, rows.n}, input.dtype(), Device::Cpu());
//   ... fill out ...
//   return PutBack(out, Tensor::Empty(input.sizes(), input.dtype(), Device::Meta()), dim);
#ifndef DYNTRACE_GRAPH_ROWS_ALONG_H_
#define DYNTRACE_GRAPH_ROWS_ALONG_H_

#include "runtime/tensor.h"

namespace dt {

// `data` is contiguous: `outer` rows of `n` elements.
struct Rows {
  Tensor data;
  int64_t outer = 1, n = 1;
  // `data` as the [outer, n] matrix it is.
  Tensor matrix() const { return data.AsStrided({outer, n}, {n, 1}, data.offset()); }
};

// `dim` is normalised (ignored for a 0-d input: one row of one).
Rows RowsAlong(const Tensor& input, int64_t dim);

// `rows` ([outer, k], contiguous) laid back out with the sizes of `like` (whose size at `dim` is
// k), as a contiguous tensor.
Tensor PutBack(const Tensor& rows, const Tensor& like, int64_t dim);

}  // namespace dt

#endif  // DYNTRACE_GRAPH_ROWS_ALONG_H_
