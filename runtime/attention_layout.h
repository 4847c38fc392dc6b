// runtime/attention_layout.h: what the fused attention kernels (runtime/cuda_attention.h,
// runtime/cpu_attention.h) take, and how their operands lie over the computation.
//
// softmax(mask(q k^T * scale) * post_scale) v with q [..., L, E], k [..., S, E], v [..., S, Ev]
// and the mask [..., L, S], all broadcast over at most two batch dims; with dropout, a bool
// `keep` [..., L, S] zeroes the weights where it is false and scales the rest by keep_scale. A layout gives every
// operand's strides over (batch dim 0, batch dim 1, row, column), 0 along a dim it broadcasts,
// so the kernels read views (heads split by a transpose, a [L, S] mask for every head) in place.
#ifndef DYNTRACE_RUNTIME_ATTENTION_LAYOUT_H_
#define DYNTRACE_RUNTIME_ATTENTION_LAYOUT_H_

#include <array>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/attention_abi.h"
#include "runtime/tensor.h"

namespace dt {

struct AttentionSpec {
  AttentionMask mask_kind = kAttentionNoMask;
  double scale = 1.0;       // multiplies q k^T, before the mask
  double post_scale = 1.0;  // multiplies the masked scores (a pattern that scales after masking)
  bool causal = false;      // key j > query i is masked (top-left aligned, as SDPA's is_causal)
  double keep_scale = 1.0;  // with a `keep` operand (dropout): what a kept weight is multiplied by
};

// Why the fused kernels do not take these operands, from dtypes, ranks and sizes alone (meta
// tensors are fine; devices are not looked at); empty when they do. E and Ev at most
// kAttentionMaxHeadDim; q, k, v (and an additive mask) one of float32, float16, bfloat16; a
// keep/drop mask and dropout's `keep` bool; at least one key.
std::string AttentionKernelMisfit(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor* mask,
                                  const Tensor* keep, const AttentionSpec& spec);

struct AttentionLayout {
  std::array<int64_t, 2> batch{1, 1};  // B0, B1 (1 where there are fewer batch dims)
  int64_t queries = 0, keys = 0, head = 0, value_head = 0;  // L, S, E, Ev
  Dims out_sizes;                      // [batch..., L, Ev]
  std::array<int64_t, 4> q{}, k{}, v{}, mask{}, keep{};  // strides over (B0, B1, row, column)

  int64_t batch_count() const { return batch[0] * batch[1]; }
  std::array<int64_t, 4> QuerySizes() const { return {batch[0], batch[1], queries, head}; }
  std::array<int64_t, 4> KeySizes() const { return {batch[0], batch[1], keys, head}; }
  std::array<int64_t, 4> ValueSizes() const { return {batch[0], batch[1], keys, value_head}; }
  std::array<int64_t, 4> MaskSizes() const { return {batch[0], batch[1], queries, keys}; }
  std::array<int64_t, 4> OutSizes() const { return {batch[0], batch[1], queries, value_head}; }
};

// REQUIRES: AttentionKernelMisfit(q, k, v, mask, keep, spec) is empty.
absl::StatusOr<AttentionLayout> AttentionLayoutOf(const Tensor& q, const Tensor& k, const Tensor& v,
                                                  const Tensor* mask, const Tensor* keep);

// Runs of a fused attention kernel (CUDA launches and host loops) in this process
// (stats()["fused_attention_runs"]); each kernel counts its own.
int64_t FusedAttentionRuns();
void CountFusedAttentionRun();

// `t`'s strides over (B0, B1, rows, columns), right-aligned to `sizes`, 0 along every dim it
// broadcasts.
std::array<int64_t, 4> StridesOver(const Tensor& t, const std::array<int64_t, 4>& sizes);

}  // namespace dt

#endif  // DYNTRACE_RUNTIME_ATTENTION_LAYOUT_H_
