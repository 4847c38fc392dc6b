// runtime/attention_kernel.cuh: fused attention, softmax(mask(q k^T * scale) * post_scale) v,
// with an online softmax: the [L, S] scores never reach memory.
//
// NVRTC only (runtime/cuda_attention.cc prepends the defines and compiles one module per
// DT_ATT_SCALAR (the element type of q, k, v, an additive mask and the result), DT_ATT_E and
// DT_ATT_EV (head dims), DT_ATT_MASK (an AttentionMask), DT_ATT_CAUSAL and DT_ATT_DROPOUT), after
// kernel_portability.h, half.h, convert.h and attention_abi.h.
//
// One block per (batch element, blockDim.x / kGroup query rows); the launcher picks 32, 64 or
// 128 threads (kAttentionThreads), fewer when larger blocks would leave SMs idle. A query row
// belongs to kGroup adjacent threads, each holding a slice of the row's query and of its output
// accumulator in registers, in float4 chunks (chunk c of a row goes to thread c % kGroup), so a
// head dim of 128 needs 32 floats of each per thread. The block walks the keys in tiles of kKeys:
// the tile's keys and values are loaded once into shared memory (converted to float, zero-padded
// to whole chunks), every thread dots its query slice with each key (one 16-byte shared load per
// four multiply-adds; the group's threads read adjacent chunks, the other rows the same ones, so
// there are no bank conflicts), the group sums its partial dots with butterfly shuffles (every
// thread of the group then holds the same score, bit for bit) and keeps the tile's scores in
// shared memory ([key][thread]), and each row updates its running maximum m, its sum l of
// exp(s - m) and its accumulator (rescaled by exp(m_old - m_new)). The
// result is acc / l, rounded once into the element type. Causal blocks stop at the last key their
// last row sees. With dropout, l sums every weight but the accumulator adds each weight times
// keep_scale where the keep mask is set and 0 elsewhere: dropout applied after the softmax.
//
// A row whose every score is -inf ends with l = 0 and acc = 0: 0/0 is NaN, as the unfused
// softmax (exp(-inf - -inf)) gives. Until a row sees a finite score its accumulator is not
// rescaled, since exp(-inf - -inf) would poison it.
namespace dt::att {

using Scalar = DT_ATT_SCALAR;

constexpr int kE = DT_ATT_E;
constexpr int kEv = DT_ATT_EV;
constexpr int kWidest = kE > kEv ? kE : kEv;
constexpr int kGroup = kWidest <= 32 ? 1 : kWidest <= 64 ? 2 : 4;
constexpr int kKeys = 32;
// Chunks of four floats per thread, and per tile row (a multiple of kGroup: zero padding).
constexpr int kLaneChunksE = ((kE + 3) / 4 + kGroup - 1) / kGroup;
constexpr int kLaneChunksV = ((kEv + 3) / 4 + kGroup - 1) / kGroup;
constexpr int kTileChunksE = kLaneChunksE * kGroup;
constexpr int kTileChunksV = kLaneChunksV * kGroup;
static_assert(kAttentionThreads % 32 == 0 && 32 % kGroup == 0, "a query row's threads share a warp");

struct alignas(16) Float4 {
  float x, y, z, w;
};

DT_HD float Read(const char* base, int64_t offset) {
  return Convert<float>(reinterpret_cast<const Scalar*>(base)[offset]);
}

// Keys (or values) [first, first + kKeys) of one batch element, as float, into `tile`; keys past
// the last and columns past the head dim read as zero.
template <int kChunks>
__device__ __forceinline__ void LoadTile(Float4 (&tile)[kKeys][kChunks], const AttentionOperand& o, int64_t base,
                                         int64_t first, int64_t keys, int width) {
  float* flat = reinterpret_cast<float*>(&tile[0][0]);
  for (int e = threadIdx.x; e < kKeys * kChunks * 4; e += blockDim.x) {
    const int j = e / (kChunks * 4), d = e % (kChunks * 4);
    const int64_t key = first + j;
    flat[e] = key < keys && d < width ? Read(o.data, base + key * o.strides[2] + d * o.strides[3]) : 0.0f;
  }
}

// Whether the mask keeps (row, key), and the score it gives: `score` plus an additive mask.
__device__ __forceinline__ float Masked(const CudaAttentionArgs& a, int64_t mask_row, int64_t row, int64_t key,
                                        float score) {
  const float kMinusInf = -dt::Infinity<float>();
  if (DT_ATT_CAUSAL && key > row) return kMinusInf;
  if (DT_ATT_MASK == kAttentionKeepWhereTrue || DT_ATT_MASK == kAttentionDropWhereTrue) {
    const bool set = reinterpret_cast<const uint8_t*>(a.mask.data)[mask_row + key * a.mask.strides[3]] != 0;
    if (set != (DT_ATT_MASK == kAttentionKeepWhereTrue)) return kMinusInf;
  }
  if (DT_ATT_MASK == kAttentionAddMask) score += Read(a.mask.data, mask_row + key * a.mask.strides[3]);
  return score * a.post_scale;
}

// Dropout of weight p of (row, key): times keep_scale where the keep mask is set, else 0. Rows
// and keys past the end (whose p is 0) read nothing.
__device__ __forceinline__ float Dropped(const CudaAttentionArgs& a, int64_t keep_row, bool live, int64_t key,
                                         float p) {
  if (!live || key >= a.keys) return 0.0f;
  const bool kept = reinterpret_cast<const uint8_t*>(a.keep.data)[keep_row + key * a.keep.strides[3]] != 0;
  return kept ? p * a.keep_scale : 0.0f;
}

}  // namespace dt::att

// A literal bound: the stand-in NVRTC reads it as written.
static_assert(dt::kAttentionThreads == 128, "the launch bound below is kAttentionThreads");
extern "C" __global__ void __launch_bounds__(128) dt_att_forward(const dt::CudaAttentionArgs a) {
  using namespace dt::att;
  const float kMinusInf = -dt::Infinity<float>();
  __shared__ Float4 key_tile[kKeys][kTileChunksE];
  __shared__ Float4 value_tile[kKeys][kTileChunksV];
  // Each thread's scores of the tile, [key][thread] so a warp's stores and loads hit 32 banks.
  // Registers would need the key loops unrolled 32 times, which took NVRTC 1.2-1.7 s per variant
  // (0.3 s this way).
  __shared__ float scores[kKeys][dt::kAttentionThreads];
  const int64_t batch = blockIdx.x / a.query_blocks;
  const int64_t rows = blockDim.x / kGroup;
  const int64_t first_row = (blockIdx.x % a.query_blocks) * rows;
  const int64_t b0 = batch / a.batch[1], b1 = batch % a.batch[1];
  const int lane = threadIdx.x % kGroup;
  const int64_t row = first_row + threadIdx.x / kGroup;
  const bool live = row < a.queries;

  Float4 q[kLaneChunksE];
  const int64_t q_base = b0 * a.query.strides[0] + b1 * a.query.strides[1] + row * a.query.strides[2];
  DT_UNROLL
  for (int c = 0; c < kLaneChunksE; ++c) {
    float v[4];
    DT_UNROLL
    for (int i = 0; i < 4; ++i) {
      const int d = (lane + kGroup * c) * 4 + i;
      v[i] = live && d < kE ? Read(a.query.data, q_base + d * a.query.strides[3]) : 0.0f;
    }
    q[c] = Float4{v[0], v[1], v[2], v[3]};
  }
  Float4 acc[kLaneChunksV];
  DT_UNROLL
  for (int c = 0; c < kLaneChunksV; ++c) acc[c] = Float4{0.0f, 0.0f, 0.0f, 0.0f};
  float m = kMinusInf, l = 0.0f;

  const int64_t k_base = b0 * a.key.strides[0] + b1 * a.key.strides[1];
  const int64_t v_base = b0 * a.value.strides[0] + b1 * a.value.strides[1];
  const int64_t mask_row = b0 * a.mask.strides[0] + b1 * a.mask.strides[1] + row * a.mask.strides[2];
  const int64_t keep_row = b0 * a.keep.strides[0] + b1 * a.keep.strides[1] + row * a.keep.strides[2];
  int64_t end = a.keys;
  if (DT_ATT_CAUSAL) {
    const int64_t last_row = first_row + rows < a.queries ? first_row + rows : a.queries;
    end = end < last_row ? end : last_row;
  }
  for (int64_t first = 0; first < end; first += kKeys) {
    __syncthreads();  // every thread is done with the previous tile
    LoadTile(key_tile, a.key, k_base, first, a.keys, kE);
    LoadTile(value_tile, a.value, v_base, first, a.keys, kEv);
    __syncthreads();
    float tile_max = kMinusInf;
#pragma unroll 4
    for (int j = 0; j < kKeys; ++j) {
      float dot = 0.0f;
      DT_UNROLL
      for (int c = 0; c < kLaneChunksE; ++c) {
        const Float4 k = key_tile[j][lane + kGroup * c];
        dot = fmaf(q[c].x, k.x, dot);
        dot = fmaf(q[c].y, k.y, dot);
        dot = fmaf(q[c].z, k.z, dot);
        dot = fmaf(q[c].w, k.w, dot);
      }
      DT_UNROLL
      for (int o = 1; o < kGroup; o <<= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
      const int64_t key = first + j;
      const float score = live && key < a.keys ? Masked(a, mask_row, row, key, dot * a.scale) : kMinusInf;
      scores[j][threadIdx.x] = score;
      tile_max = fmaxf(tile_max, score);
    }
    const float m_new = fmaxf(m, tile_max);
    if (m_new == kMinusInf) continue;  // nothing kept yet: no __syncthreads skipped (loop top)
    const float correction = expf(m - m_new);
    l *= correction;
    DT_UNROLL
    for (int c = 0; c < kLaneChunksV; ++c) {
      acc[c].x *= correction;
      acc[c].y *= correction;
      acc[c].z *= correction;
      acc[c].w *= correction;
    }
#pragma unroll 4
    for (int j = 0; j < kKeys; ++j) {
      const float p = expf(scores[j][threadIdx.x] - m_new);
      l += p;
      const float w = DT_ATT_DROPOUT ? Dropped(a, keep_row, live, first + j, p) : p;
      DT_UNROLL
      for (int c = 0; c < kLaneChunksV; ++c) {
        const Float4 v = value_tile[j][lane + kGroup * c];
        acc[c].x = fmaf(w, v.x, acc[c].x);
        acc[c].y = fmaf(w, v.y, acc[c].y);
        acc[c].z = fmaf(w, v.z, acc[c].z);
        acc[c].w = fmaf(w, v.w, acc[c].w);
      }
    }
    m = m_new;
  }
  if (!live) return;
  const float inverse = 1.0f / l;
  const int64_t out_base = b0 * a.out.strides[0] + b1 * a.out.strides[1] + row * a.out.strides[2];
  Scalar* out = reinterpret_cast<Scalar*>(a.out.data);
  DT_UNROLL
  for (int c = 0; c < kLaneChunksV; ++c) {
    const float v[4] = {acc[c].x, acc[c].y, acc[c].z, acc[c].w};
    DT_UNROLL
    for (int i = 0; i < 4; ++i) {
      const int d = (lane + kGroup * c) * 4 + i;
      if (d < kEv) out[out_base + d * a.out.strides[3]] = dt::Convert<Scalar>(v[i] * inverse);
    }
  }
}
