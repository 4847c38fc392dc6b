// runtime/strided_loop.h: walking several same-shaped strided operands element by element.
//
// Every eager pointwise op, copy and reduction is a StridedLoop: operand 0 is written, the rest are
// read, and all are viewed with one common shape (broadcast operands have stride 0, a reduction's
// output has stride 0 on reduced dims). The plan merges dims that are contiguous in every
// operand and puts the fastest-moving dim innermost, so the element function usually sees one long
// run with unit strides that the compiler vectorises.
//
//   StridedLoop loop(out.sizes(), {out_ptr, in_ptr}, {out_strides_bytes, in_strides_bytes});
//   loop.Run([](char* const* p, const int64_t* s, int64_t n) { ... }, /*parallel=*/true);
#ifndef DYNTRACE_RUNTIME_STRIDED_LOOP_H_
#define DYNTRACE_RUNTIME_STRIDED_LOOP_H_

#include <cstdint>
#include <functional>

#include "absl/container/inlined_vector.h"
#include "absl/types/span.h"
#include "runtime/tensor.h"

namespace dt {

inline constexpr int kMaxLoopOperands = 4;

// Processes `n` elements: ptrs[k] is operand k's first element, strides[k] its byte step.
using InnerLoop = void (*)(char* const* ptrs, const int64_t* strides, int64_t n);

class StridedLoop {
 public:
  // `byte_strides[k]` has one entry per dim of `sizes`.
  StridedLoop(DimsView sizes, absl::Span<char* const> base, absl::Span<const Dims> byte_strides);

  // Runs `inner` over every element. With `parallel`, runs of the outer dims are split across
  // threads; the caller guarantees no two elements write the same output address (so a reduction
  // may only parallelise when its output stride is non-zero on the split dim, see
  // ParallelSafeForReduction()).
  void Run(InnerLoop inner, bool parallel) const;
  void Run(const std::function<void(char* const*, const int64_t*, int64_t)>& inner,
           bool parallel) const;

  int64_t numel() const { return numel_; }

 private:
  template <typename Fn>
  void RunRange(const Fn& inner, int64_t begin, int64_t end) const;
  template <typename Fn>
  void RunImpl(const Fn& inner, bool parallel) const;

  int num_operands_;
  int64_t numel_;
  // dims_[0] is the innermost dim after reordering and coalescing.
  Dims sizes_;
  absl::InlinedVector<Dims, kMaxLoopOperands> strides_;
  absl::InlinedVector<char*, kMaxLoopOperands> base_;
  // Whether operand 0 has a zero stride on some dim (a reduction): such loops only split the
  // outermost dims where operand 0 moves.
  bool output_has_zero_stride_ = false;
};

// Byte strides of `t` broadcast to `sizes`.
absl::StatusOr<Dims> BroadcastByteStrides(const Tensor& t, DimsView sizes);

}  // namespace dt

#endif  // DYNTRACE_RUNTIME_STRIDED_LOOP_H_
