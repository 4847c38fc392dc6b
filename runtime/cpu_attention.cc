#include "runtime/cpu_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "runtime/blas.h"
#include "runtime/errors.h"
#include "runtime/parallel.h"
#include "runtime/scalar_math.h"
#include "runtime/sgemm_avx512.h"

namespace dt {
namespace {

constexpr int64_t kQueryBlock = 64;
constexpr int64_t kKeyTile = 256;

// Rows [first, first + rows) of a [*, width] operand of batch element (b0, b1), as a dense
// row-major block: a pointer into the operand when its rows are already dense (column stride 1),
// else a copy in `scratch`.
const float* DenseRows(const float* base, const std::array<int64_t, 4>& strides, int64_t b0, int64_t b1,
                       int64_t first, int64_t rows, int64_t width, std::vector<float>& scratch, int64_t* ld) {
  const float* start = base + b0 * strides[0] + b1 * strides[1] + first * strides[2];
  if (strides[3] == 1 && strides[2] >= width) {
    *ld = strides[2];
    return start;
  }
  scratch.resize(static_cast<size_t>(rows * width));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < width; ++c) scratch[r * width + c] = start[r * strides[2] + c * strides[3]];
  }
  *ld = width;
  return scratch.data();
}

struct HostOperands {
  const float* q;
  const float* k;
  const float* v;
  const void* mask;
  const uint8_t* keep;  // dropout's keep mask (bool), null without dropout
  float* out;
};

// One query block's running softmax state and output.
struct BlockState {
  std::vector<float> m, l, acc;  // per row; acc is [rows, Ev]
};

// The row loops below run only where CpuHasAvx512Sgemm() said yes, so they may use AVX-512;
// `omp simd` vectorises them (reductions included) at the build's -O2.
#define DT_AVX512 __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,fma")))

// One row of a tile's scores: scaled, masked (keys from `kept_below` on are masked: causal), the
// mask added or applied, scaled again; returns the row's maximum.
template <AttentionMask kKind>
DT_AVX512 float MaskRow(float* s, int64_t n, float scale, float post, const void* mask, int64_t mask_stride,
                        int64_t kept_below) {
  const float minus_inf = -std::numeric_limits<float>::infinity();
  const auto* bits = static_cast<const uint8_t*>(mask);
  const auto* added = static_cast<const float*>(mask);
  float row_max = minus_inf;
#pragma omp simd reduction(max : row_max)
  for (int64_t j = 0; j < n; ++j) {
    float x = s[j] * scale;
    bool kept = j < kept_below;
    if constexpr (kKind == kAttentionAddMask) x += added[j * mask_stride];
    if constexpr (kKind == kAttentionKeepWhereTrue) kept = kept && bits[j * mask_stride] != 0;
    if constexpr (kKind == kAttentionDropWhereTrue) kept = kept && bits[j * mask_stride] == 0;
    const float y = kept ? x * post : minus_inf;
    s[j] = y;
    row_max = row_max > y ? row_max : y;
  }
  return row_max;
}

// exp(s - m) in place; returns their sum.
DT_AVX512 float ExpRow(float* s, int64_t n, float m) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < n; ++j) {
    const float p = scalar::exp_f32(s[j] - m);
    s[j] = p;
    sum += p;
  }
  return sum;
}

// Dropout of a row of weights: times keep_scale where `keep` is set, else 0 (after their sum went
// into the softmax's denominator).
DT_AVX512 void DropRow(float* p, int64_t n, const uint8_t* keep, int64_t keep_stride, float keep_scale) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) p[j] = keep[j * keep_stride] != 0 ? p[j] * keep_scale : 0.0f;
}

DT_AVX512 void ScaleRow(float* x, int64_t n, float factor) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) x[i] *= factor;
}

DT_AVX512 void AddRows(float* into, const float* x, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) into[i] += x[i];
}

float MaskRowOfKind(AttentionMask kind, float* s, int64_t n, float scale, float post, const void* mask,
                    int64_t mask_stride, int64_t kept_below) {
  switch (kind) {
    case kAttentionKeepWhereTrue:
      return MaskRow<kAttentionKeepWhereTrue>(s, n, scale, post, mask, mask_stride, kept_below);
    case kAttentionDropWhereTrue:
      return MaskRow<kAttentionDropWhereTrue>(s, n, scale, post, mask, mask_stride, kept_below);
    case kAttentionAddMask:
      return MaskRow<kAttentionAddMask>(s, n, scale, post, mask, mask_stride, kept_below);
    case kAttentionNoMask:
      break;
  }
  return MaskRow<kAttentionNoMask>(s, n, scale, post, mask, mask_stride, kept_below);
}

// Masks, scales and folds tile `scores` ([rows, tile] of q k^T) into the block's running maximum
// and sum; leaves the tile's weights exp(s - m_new) (dropped out where dropout's keep is false)
// in `scores` and rescales the output rows.
void FoldTile(const AttentionLayout& l, const AttentionSpec& spec, const HostOperands& o, int64_t b0, int64_t b1,
              int64_t first_row, int64_t rows, int64_t first_key, int64_t tile, float* scores, BlockState& st) {
  const float minus_inf = -std::numeric_limits<float>::infinity();
  const int64_t item = spec.mask_kind == kAttentionAddMask ? 4 : 1;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t row = first_row + r;
    float* s = scores + r * tile;
    const char* mask = o.mask == nullptr ? nullptr
                       : static_cast<const char*>(o.mask) +
                             (b0 * l.mask[0] + b1 * l.mask[1] + row * l.mask[2] + first_key * l.mask[3]) * item;
    const int64_t kept_below = spec.causal ? std::clamp<int64_t>(row - first_key + 1, 0, tile) : tile;
    const float tile_max = MaskRowOfKind(spec.mask_kind, s, tile, static_cast<float>(spec.scale),
                                         static_cast<float>(spec.post_scale), mask, l.mask[3], kept_below);
    const float m_new = std::max(st.m[r], tile_max);
    if (m_new == minus_inf) {  // nothing kept yet: the tile adds nothing
      std::fill(s, s + tile, 0.0f);
      continue;
    }
    const float correction = scalar::exp_f32(st.m[r] - m_new);
    st.l[r] = st.l[r] * correction + ExpRow(s, tile, m_new);
    if (o.keep != nullptr) {
      DropRow(s, tile, o.keep + b0 * l.keep[0] + b1 * l.keep[1] + row * l.keep[2] + first_key * l.keep[3], l.keep[3],
              static_cast<float>(spec.keep_scale));
    }
    ScaleRow(st.acc.data() + r * l.value_head, l.value_head, correction);
    st.m[r] = m_new;
  }
}

// Query rows [first_row, first_row + rows) of batch element `batch`: tiles of keys through the
// GEMM, the online softmax, and the result written to `out`.
void RunBlock(const AttentionLayout& l, const AttentionSpec& spec, const HostOperands& o, int64_t batch,
              int64_t first_row, int64_t rows) {
  const int64_t b0 = batch / l.batch[1], b1 = batch % l.batch[1];
  std::vector<float> q_scratch, k_scratch, v_scratch, scores(static_cast<size_t>(rows * kKeyTile)),
      product(static_cast<size_t>(rows * l.value_head));
  BlockState st{std::vector<float>(rows, -std::numeric_limits<float>::infinity()), std::vector<float>(rows, 0.0f),
                std::vector<float>(static_cast<size_t>(rows * l.value_head), 0.0f)};
  int64_t ldq = 0, ldk = 0, ldv = 0;
  const float* q = DenseRows(o.q, l.q, b0, b1, first_row, rows, l.head, q_scratch, &ldq);
  const int64_t end = spec.causal ? std::min(l.keys, first_row + rows) : l.keys;
  for (int64_t first_key = 0; first_key < end; first_key += kKeyTile) {
    const int64_t tile = std::min(kKeyTile, end - first_key);
    const float* k = DenseRows(o.k, l.k, b0, b1, first_key, tile, l.head, k_scratch, &ldk);
    const float* v = DenseRows(o.v, l.v, b0, b1, first_key, tile, l.value_head, v_scratch, &ldv);
    Avx512Sgemm(false, true, rows, tile, l.head, q, ldq, k, ldk, scores.data(), tile);
    FoldTile(l, spec, o, b0, b1, first_row, rows, first_key, tile, scores.data(), st);
    Avx512Sgemm(false, false, rows, l.value_head, tile, scores.data(), tile, v, ldv, product.data(), l.value_head);
    AddRows(st.acc.data(), product.data(), static_cast<int64_t>(product.size()));
  }
  float* out = o.out + (batch * l.queries + first_row) * l.value_head;
  for (int64_t r = 0; r < rows; ++r) {
    const float inverse = 1.0f / st.l[r];  // 0 kept keys: 0 * inf = NaN, as softmax gives
    for (int64_t c = 0; c < l.value_head; ++c) out[r * l.value_head + c] = st.acc[r * l.value_head + c] * inverse;
  }
}

}  // namespace

absl::StatusOr<std::optional<Tensor>> FusedAttentionOnHost(const Tensor& q, const Tensor& k, const Tensor& v,
                                                           const Tensor* mask, const Tensor* keep,
                                                           const AttentionSpec& spec) {
  const auto on_cpu = [](const Tensor* t) { return t == nullptr || t->device().is_cpu(); };
  if (!on_cpu(&q) || !on_cpu(&k) || !on_cpu(&v) || !on_cpu(mask) || !on_cpu(keep) || q.dtype() != DType::kFloat32 ||
      !Avx512SgemmEnabled() || !AttentionKernelMisfit(q, k, v, mask, keep, spec).empty()) {
    return std::nullopt;
  }
  DT_ASSIGN_OR_RETURN(const AttentionLayout l, AttentionLayoutOf(q, k, v, mask, keep));
  Tensor out = Tensor::Empty(l.out_sizes, DType::kFloat32, q.device());
  if (out.numel() == 0) return out;
  const HostOperands o{static_cast<const float*>(q.data()), static_cast<const float*>(k.data()),
                       static_cast<const float*>(v.data()), mask != nullptr ? mask->data() : nullptr,
                       keep != nullptr ? static_cast<const uint8_t*>(keep->data()) : nullptr,
                       static_cast<float*>(out.data())};
  const int64_t blocks_per_batch = (l.queries + kQueryBlock - 1) / kQueryBlock;
  // Each block costs about rows * S * (E + Ev) multiply-adds: ParallelFor splits once that
  // dwarfs a thread start.
  ParallelFor(l.batch_count() * blocks_per_batch, 1, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t batch = task / blocks_per_batch, first_row = (task % blocks_per_batch) * kQueryBlock;
      RunBlock(l, spec, o, batch, first_row, std::min(kQueryBlock, l.queries - first_row));
    }
  });
  CountFusedAttentionRun();
  return out;
}

}  // namespace dt
