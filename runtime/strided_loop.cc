#include "runtime/strided_loop.h"

#include <algorithm>
#include <numeric>

#include "runtime/parallel.h"

namespace dt {

absl::StatusOr<Dims> BroadcastByteStrides(const Tensor& t, DimsView sizes) {
  auto strides = BroadcastStrides(t, sizes);
  if (!strides.ok()) return strides.status();
  for (int64_t& s : *strides) s *= t.itemsize();
  return strides;
}

StridedLoop::StridedLoop(DimsView sizes, absl::Span<char* const> base,
                         absl::Span<const Dims> byte_strides)
    : num_operands_(static_cast<int>(base.size())), numel_(NumelOf(sizes)) {
  const int64_t nd = static_cast<int64_t>(sizes.size());
  base_.assign(base.begin(), base.end());
  // Order dims innermost-first by the output's stride (then the inputs'), skipping size-1 dims.
  Dims order;
  for (int64_t d = 0; d < nd; ++d) {
    if (sizes[d] != 1) order.push_back(d);
  }
  // The output decides the order unless it is a reduction's (zero strides); then the input does.
  int key_operand = 0;
  for (int64_t d : order) {
    if (byte_strides[0][d] == 0 && num_operands_ > 1) key_operand = 1;
  }
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    const int64_t ka = std::abs(byte_strides[key_operand][a]);
    const int64_t kb = std::abs(byte_strides[key_operand][b]);
    if (ka != kb) return ka < kb;
    return a > b;  // ties: the later dim is the inner one
  });
  sizes_.clear();
  strides_.assign(num_operands_, Dims());
  for (int64_t d : order) {
    // Merge with the previous (inner) dim when every operand steps through both as one.
    if (!sizes_.empty()) {
      bool mergeable = true;
      for (int op = 0; op < num_operands_; ++op) {
        if (strides_[op].back() * sizes_.back() != byte_strides[op][d]) {
          mergeable = false;
          break;
        }
      }
      if (mergeable) {
        sizes_.back() *= sizes[d];
        continue;
      }
    }
    sizes_.push_back(sizes[d]);
    for (int op = 0; op < num_operands_; ++op) strides_[op].push_back(byte_strides[op][d]);
  }
  if (sizes_.empty()) {
    sizes_.push_back(1);
    for (int op = 0; op < num_operands_; ++op) strides_[op].push_back(0);
  }
  for (int64_t s : strides_[0]) output_has_zero_stride_ |= (s == 0);
}

template <typename Fn>
void StridedLoop::RunRange(const Fn& inner, int64_t begin, int64_t end) const {
  // Linear positions [begin, end) over the coalesced dims, with dim 0 innermost.
  const int64_t nd = static_cast<int64_t>(sizes_.size());
  const int64_t inner_size = sizes_[0];
  Dims index(nd, 0);
  int64_t rest = begin;
  for (int64_t d = 0; d < nd; ++d) {
    index[d] = rest % sizes_[d];
    rest /= sizes_[d];
  }
  char* ptrs[kMaxLoopOperands];
  int64_t inner_strides[kMaxLoopOperands];
  for (int op = 0; op < num_operands_; ++op) inner_strides[op] = strides_[op][0];
  int64_t pos = begin;
  while (pos < end) {
    for (int op = 0; op < num_operands_; ++op) {
      char* p = base_[op];
      for (int64_t d = 0; d < nd; ++d) p += index[d] * strides_[op][d];
      ptrs[op] = p;
    }
    const int64_t n = std::min(inner_size - index[0], end - pos);
    inner(ptrs, inner_strides, n);
    pos += n;
    index[0] += n;
    for (int64_t d = 0; d < nd - 1 && index[d] == sizes_[d]; ++d) {
      index[d] = 0;
      index[d + 1]++;
    }
  }
}

template <typename Fn>
void StridedLoop::RunImpl(const Fn& inner, bool parallel) const {
  if (numel_ == 0) return;
  if (!parallel || numel_ < kDefaultGrain) {
    RunRange(inner, 0, numel_);
    return;
  }
  if (!output_has_zero_stride_) {
    ParallelFor(numel_, kDefaultGrain, [&](int64_t b, int64_t e) { RunRange(inner, b, e); });
    return;
  }
  // A reduction: split only over the outermost dim, and only when the output moves along it, so
  // two threads never accumulate into the same element.
  const int64_t outer = sizes_.back();
  if (sizes_.size() < 2 || strides_[0].back() == 0) {
    RunRange(inner, 0, numel_);
    return;
  }
  const int64_t per_outer = numel_ / outer;
  ParallelFor(outer, std::max<int64_t>(1, kDefaultGrain / per_outer), [&](int64_t b, int64_t e) {
    RunRange(inner, b * per_outer, e * per_outer);
  });
}

void StridedLoop::Run(InnerLoop inner, bool parallel) const { RunImpl(inner, parallel); }

void StridedLoop::Run(const std::function<void(char* const*, const int64_t*, int64_t)>& inner,
                      bool parallel) const {
  RunImpl(inner, parallel);
}

}  // namespace dt
