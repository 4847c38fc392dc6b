// runtime/sgemm_avx512.cc: a blocked single-precision GEMM on AVX-512 (Goto's loop order:
// pack a block of B, pack a block of A, sweep micro-tiles). Every function that uses AVX-512
// carries the target attribute instead of the file being built with -mavx512f, so no inline
// function from a header is compiled here for AVX-512 and then shared with callers on CPUs
// without it.
#include "runtime/sgemm_avx512.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace dt {
namespace {

// The micro-tile: kRows x kCols of C held in 24 of the 32 zmm registers while the kernel walks
// k, one packed row of B (two vectors) and twelve broadcasts of A per step.
constexpr int kRows = 12;
constexpr int kCols = 32;
// Cache blocking: a packed kDepth x kCols panel of B (32 KiB) stays in L1 while the kernel sweeps
// every row panel of the packed kBlockRows x kDepth block of A (L2); the packed kDepth x
// kBlockCols block of B is reused by every block of A.
constexpr int64_t kDepth = 256;
constexpr int64_t kBlockRows = 16 * kRows;
constexpr int64_t kBlockCols = 2048;

#define DT_AVX512 __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,fma")))

DT_AVX512 inline __mmask16 FirstLanes(int64_t count) {
  return count >= 16 ? __mmask16(0xFFFF) : count <= 0 ? __mmask16(0) : __mmask16((1u << count) - 1);
}

// Transposes the 16 x 16 block held in rows[0..15] in place: rows[c] becomes column c.
DT_AVX512 inline void Transpose16(__m512 rows[16]) {
  __m512 pairs[16];
#pragma GCC unroll 8
  for (int i = 0; i < 16; i += 2) {
    pairs[i] = _mm512_unpacklo_ps(rows[i], rows[i + 1]);
    pairs[i + 1] = _mm512_unpackhi_ps(rows[i], rows[i + 1]);
  }
  // quads[4g + q]: column 4L + q of rows 4g..4g+3, in 128-bit lane L.
  __m512 quads[16];
#pragma GCC unroll 4
  for (int g = 0; g < 4; ++g) {
    const __m512d lo = _mm512_castps_pd(pairs[4 * g]), hi = _mm512_castps_pd(pairs[4 * g + 1]);
    const __m512d lo2 = _mm512_castps_pd(pairs[4 * g + 2]), hi2 = _mm512_castps_pd(pairs[4 * g + 3]);
    quads[4 * g + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(lo, lo2));
    quads[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(lo, lo2));
    quads[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(hi, hi2));
    quads[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(hi, hi2));
  }
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) {
    const __m512 low01 = _mm512_shuffle_f32x4(quads[q], quads[4 + q], 0x44);
    const __m512 high01 = _mm512_shuffle_f32x4(quads[q], quads[4 + q], 0xEE);
    const __m512 low23 = _mm512_shuffle_f32x4(quads[8 + q], quads[12 + q], 0x44);
    const __m512 high23 = _mm512_shuffle_f32x4(quads[8 + q], quads[12 + q], 0xEE);
    rows[q] = _mm512_shuffle_f32x4(low01, low23, 0x88);
    rows[4 + q] = _mm512_shuffle_f32x4(low01, low23, 0xDD);
    rows[8 + q] = _mm512_shuffle_f32x4(high01, high23, 0x88);
    rows[12 + q] = _mm512_shuffle_f32x4(high01, high23, 0xDD);
  }
}

// dst[p * dst_stride + r] = src[r * ld + p] for r < width (r >= rows reads as zero), p < depth:
// `rows` source lines of `depth` contiguous values become `depth` packed lines of `width`.
DT_AVX512 void PackTransposed(const float* src, int64_t ld, int64_t rows, int64_t depth, float* dst,
                              int64_t dst_stride, int width) {
  const __mmask16 store_mask = FirstLanes(width);
  for (int64_t p0 = 0; p0 < depth; p0 += 16) {
    const __mmask16 load_mask = FirstLanes(depth - p0);
    __m512 block[16];
#pragma GCC unroll 16
    for (int r = 0; r < 16; ++r) {
      block[r] = r < rows ? _mm512_maskz_loadu_ps(load_mask, src + r * ld + p0) : _mm512_setzero_ps();
    }
    Transpose16(block);
    const int64_t columns = std::min<int64_t>(16, depth - p0);
#pragma GCC unroll 16
    for (int c = 0; c < 16; ++c) {
      if (c < columns) _mm512_mask_storeu_ps(dst + (p0 + c) * dst_stride, store_mask, block[c]);
    }
  }
}

// dst[p * width + r] = src[p * ld + r] for r < valid (zero up to width), p < depth.
DT_AVX512 void PackStraight(const float* src, int64_t ld, int64_t valid, int64_t depth, float* dst, int width) {
  for (int64_t p = 0; p < depth; ++p) {
    for (int v = 0; v < width; v += 16) {
      const __m512 x = _mm512_maskz_loadu_ps(FirstLanes(valid - v), src + p * ld + v);
      _mm512_mask_storeu_ps(dst + p * width + v, FirstLanes(width - v), x);
    }
  }
}

// Packs op(A)'s rows x depth block into panels of kRows rows (zero beyond `rows`), each as depth
// lines of kRows values: the order in which the micro-kernel broadcasts them.
DT_AVX512 void PackA(bool transposed, const float* a, int64_t lda, int64_t rows, int64_t depth, float* packed) {
  for (int64_t i = 0; i < rows; i += kRows) {
    const int64_t valid = std::min<int64_t>(kRows, rows - i);
    float* panel = packed + i * depth;
    if (transposed) PackStraight(a + i, lda, valid, depth, panel, kRows);
    else PackTransposed(a + i * lda, lda, valid, depth, panel, kRows, kRows);
  }
}

// Packs op(B)'s depth x cols block into panels of kCols columns (zero beyond `cols`), each as
// depth lines of kCols values.
DT_AVX512 void PackB(bool transposed, const float* b, int64_t ldb, int64_t cols, int64_t depth, float* packed) {
  for (int64_t j = 0; j < cols; j += kCols) {
    const int64_t valid = std::min<int64_t>(kCols, cols - j);
    float* panel = packed + j * depth;
    if (!transposed) {
      PackStraight(b + j, ldb, valid, depth, panel, kCols);
    } else {
      PackTransposed(b + j * ldb, ldb, std::min<int64_t>(valid, 16), depth, panel, kCols, 16);
      // Past B's last row when valid <= 16: then no row is read and the half packs as zeros.
      PackTransposed(valid > 16 ? b + (j + 16) * ldb : b, ldb, valid - 16, depth, panel + 16, kCols, 16);
    }
  }
}

// C's rows x cols corner of a micro-tile = (or, accumulating, +=) a panel of A times a panel of
// B over `depth`: each depth step reads kRows values of A and kCols of B, then moves a_step
// (b_step) floats on (the panel widths when packed, the leading dimension when read in place).
DT_AVX512 void MicroKernel(int64_t depth, const float* a, int64_t a_step, const float* b, int64_t b_step, float* c,
                           int64_t ldc, int64_t rows, int64_t cols, bool accumulate) {
  __m512 acc[kRows][2];
#pragma GCC unroll 12
  for (int i = 0; i < kRows; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  for (int64_t p = 0; p < depth; ++p) {
    const __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
#pragma GCC unroll 12
    for (int i = 0; i < kRows; ++i) {
      const __m512 ai = _mm512_set1_ps(a[i]);
      acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(ai, b1, acc[i][1]);
    }
    a += a_step;
    b += b_step;
  }
  const __mmask16 m0 = FirstLanes(cols), m1 = FirstLanes(cols - 16);
#pragma GCC unroll 12
  for (int i = 0; i < kRows; ++i) {
    if (i >= rows) break;
    float* row = c + i * ldc;
    if (accumulate) {
      acc[i][0] = _mm512_add_ps(acc[i][0], _mm512_maskz_loadu_ps(m0, row));
      acc[i][1] = _mm512_add_ps(acc[i][1], _mm512_maskz_loadu_ps(m1, row + 16));
    }
    _mm512_mask_storeu_ps(row, m0, acc[i][0]);
    _mm512_mask_storeu_ps(row + 16, m1, acc[i][1]);
  }
}

// A stored-transposed A and a stored-as-is B already hold each depth step's kRows (kCols) values
// side by side, so whole panels are read where they lie (5% off the MLP training step, whose
// weight gradients are dY^T X): but not at leading dimensions of a multiple of 2 KiB, whose
// lines all fall into a few L1 sets and evict each other (a 512^3 product lost 5% that way).
bool ReadsInPlace(int64_t ld) { return ld % 512 != 0; }

struct Blocking {
  int64_t cols, rows, depth;  // of the packed blocks of B (depth x cols) and A (rows x depth)
};

Blocking BlockingFor(int64_t m, int64_t n, int64_t k) {
  return {std::min(kBlockCols, (n + kCols - 1) / kCols * kCols), std::min(kBlockRows, (m + kRows - 1) / kRows * kRows),
          std::min(kDepth, k)};
}

// The blocked product into C; the first depth block writes C, the later ones accumulate.
// `scratch` holds (blocking.cols + blocking.rows) * blocking.depth floats.
DT_AVX512 void BlockedSgemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, const float* a,
                            int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc, float* scratch) {
  const Blocking blocking = BlockingFor(m, n, k);
  const int64_t block_cols = blocking.cols, block_rows = blocking.rows, depth_max = blocking.depth;
  float* packed_b = scratch;
  float* packed_a = packed_b + block_cols * depth_max;
  for (int64_t j0 = 0; j0 < n; j0 += block_cols) {
    const int64_t cols = std::min(block_cols, n - j0);
    for (int64_t p0 = 0; p0 < k; p0 += depth_max) {
      const int64_t depth = std::min(depth_max, k - p0);
      // Whole panels the kernel can read in place are not packed (see ReadsInPlace).
      const int64_t direct_cols = !transpose_b && ReadsInPlace(ldb) ? cols / kCols * kCols : 0;
      PackB(transpose_b, transpose_b ? b + (j0 + direct_cols) * ldb + p0 : b + p0 * ldb + j0 + direct_cols, ldb,
            cols - direct_cols, depth, packed_b + direct_cols * depth);
      for (int64_t i0 = 0; i0 < m; i0 += block_rows) {
        const int64_t rows = std::min(block_rows, m - i0);
        const int64_t direct_rows = transpose_a && ReadsInPlace(lda) ? rows / kRows * kRows : 0;
        PackA(transpose_a, transpose_a ? a + p0 * lda + i0 + direct_rows : a + (i0 + direct_rows) * lda + p0, lda,
              rows - direct_rows, depth, packed_a + direct_rows * depth);
        for (int64_t j = 0; j < cols; j += kCols) {
          const bool direct_b = j < direct_cols;
          const float* b_panel = direct_b ? b + p0 * ldb + j0 + j : packed_b + j * depth;
          for (int64_t i = 0; i < rows; i += kRows) {
            const bool direct_a = i < direct_rows;
            const float* a_panel = direct_a ? a + p0 * lda + i0 + i : packed_a + i * depth;
            MicroKernel(depth, a_panel, direct_a ? lda : kRows, b_panel, direct_b ? ldb : kCols,
                        c + (i0 + i) * ldc + j0 + j, ldc, std::min<int64_t>(kRows, rows - i),
                        std::min<int64_t>(kCols, cols - j), p0 > 0);
          }
        }
      }
    }
  }
}

}  // namespace

bool CpuHasAvx512Sgemm() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                          __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                          __builtin_cpu_supports("fma");
  return has;
}

void Avx512Sgemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                 const float* b, int64_t ldb, float* c, int64_t ldc) {
  // The packed blocks, kept per thread (BatchedGemm runs one product per OpenMP thread): at most
  // (kBlockCols + kBlockRows) * kDepth floats, 2.2 MiB.
  thread_local std::vector<float> scratch;
  // A narrow C (a classifier's 10 logits) would leave most of each 32-wide tile empty: compute
  // C^T = op(B)^T op(A)^T instead, whose rows are the short side, and transpose it into place.
  const bool swap = n < kCols && n < m;
  const Blocking blocking = swap ? BlockingFor(n, m, k) : BlockingFor(m, n, k);
  const size_t packed = (blocking.cols + blocking.rows) * blocking.depth;
  if (scratch.size() < packed) scratch.resize(packed);
  if (!swap) {
    BlockedSgemm(transpose_a, transpose_b, m, n, k, a, lda, b, ldb, c, ldc, scratch.data());
    return;
  }
  // As large as C, so allocated per call rather than kept.
  std::vector<float> transposed(n * m);
  BlockedSgemm(!transpose_b, !transpose_a, n, m, k, b, ldb, a, lda, transposed.data(), m, scratch.data());
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = transposed[j * m + i];
  }
}

}  // namespace dt
