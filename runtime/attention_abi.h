// runtime/attention_abi.h: the argument of the fused attention kernel, and its mask kinds.
//
// Compiled by the host build (runtime/cuda_attention.cc fills the struct), by NVRTC (pasted ahead
// of runtime/attention_kernel.cuh) and by the stand-in driver (tests/fake_cuda), so every side
// has one layout; the static_assert pins it (every field is 8 bytes but the four trailing floats).
//
// The kernel computes softmax(mask(q k^T * scale) * post_scale) v over up to two batch dims
// (broadcast dims have stride 0), one CUDA block per (batch element, block of query rows); with
// dropout (DT_ATT_DROPOUT), each weight is multiplied by keep_scale where the bool `keep` operand
// is true and by 0 where it is false, after the softmax's sum (dropout of the weights).
#ifndef DYNTRACE_RUNTIME_ATTENTION_ABI_H_
#define DYNTRACE_RUNTIME_ATTENTION_ABI_H_

#include "runtime/kernel_portability.h"

namespace dt {

// How the mask operand changes a score. Values are part of the kernel's source (DT_ATT_MASK) and
// of `_fused_attention`'s `mask_kind` argument.
enum AttentionMask : int32_t {
  kAttentionNoMask = 0,
  kAttentionKeepWhereTrue = 1,  // bool: false positions become -inf (where(mask, s, -inf), SDPA)
  kAttentionDropWhereTrue = 2,  // bool: true positions become -inf (masked_fill(mask, -inf))
  kAttentionAddMask = 3,        // the query's dtype: added to the score (SDPA's float mask)
};

// The widest head dim (query/key and value) one kernel holds in registers.
inline constexpr int kAttentionMaxHeadDim = 128;
// The most threads per block (the kernel's __launch_bounds__); a launch uses 32, 64 or 128.
inline constexpr int kAttentionThreads = 128;

struct AttentionOperand {
  char* data;          // element [0, 0, 0, 0] (device memory)
  int64_t strides[4];  // in elements, over (batch dim 0, batch dim 1, row, column)
  // The byte range [low_bytes, high_bytes) around `data` the launch may touch: the stand-in
  // driver checks it lies inside one device allocation.
  int64_t low_bytes, high_bytes;
};

struct CudaAttentionArgs {
  AttentionOperand query;  // [B0, B1, L, E]
  AttentionOperand key;    // [B0, B1, S, E]
  AttentionOperand value;  // [B0, B1, S, Ev]
  AttentionOperand mask;   // [B0, B1, L, S]; data null without a mask
  AttentionOperand keep;   // [B0, B1, L, S] bool; data null without dropout
  AttentionOperand out;    // [B0, B1, L, Ev]
  int64_t batch[2];        // B0, B1
  int64_t queries, keys;   // L, S
  int64_t query_blocks;    // blocks per batch element: ceil(L / (block threads / threads per row))
  float scale, post_scale;
  float keep_scale;  // 1 / (1 - p) for dropout with probability p
  float unused;      // keeps the size a multiple of 8 without implicit padding
};

static_assert(sizeof(CudaAttentionArgs) == 6 * 56 + 5 * 8 + 16,
              "CudaAttentionArgs must have no padding: host and NVRTC must agree on every offset");

}  // namespace dt

#endif  // DYNTRACE_RUNTIME_ATTENTION_ABI_H_
