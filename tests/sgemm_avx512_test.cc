// dyntrace's AVX-512 float32 GEMM (runtime/sgemm_avx512.h) against a double-precision triple loop
// on the same float inputs. Error model: a dot product of k float32 products summed with fused
// multiply-adds, in blocks of at most 256 added together at the end, is off from the exact sum
// by at most (k + 2) u sum_p |a_ip b_pj| with u = 2^-24 (one rounding per fused step, one per
// block sum, the final store); the double reference is exact to far below that.
#include "runtime/sgemm_avx512.h"

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace dt {
namespace {

struct Problem {
  int64_t m, n, k;
  bool transpose_a, transpose_b;
  int64_t pad_a = 0, pad_b = 0, pad_c = 0;  // leading dimensions beyond the tight ones
};

// Runs the kernel on random inputs and returns how many entries of C break the error bound, or
// were written outside C's m x n corner (the padding of each row holds a sentinel).
int64_t CountWrongEntries(const Problem& pr, std::mt19937& rng) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  const int64_t lda = (pr.transpose_a ? pr.m : pr.k) + pr.pad_a;
  const int64_t ldb = (pr.transpose_b ? pr.k : pr.n) + pr.pad_b;
  const int64_t ldc = pr.n + pr.pad_c;
  std::vector<float> a((pr.transpose_a ? pr.k : pr.m) * lda), b((pr.transpose_b ? pr.n : pr.k) * ldb);
  for (float& x : a) x = uniform(rng);
  for (float& x : b) x = uniform(rng);
  constexpr float kSentinel = -12345.0f;
  std::vector<float> c(pr.m * ldc, kSentinel);
  Avx512Sgemm(pr.transpose_a, pr.transpose_b, pr.m, pr.n, pr.k, a.data(), lda, b.data(), ldb, c.data(), ldc);
  const double u = std::ldexp(1.0, -24);
  int64_t wrong = 0;
  for (int64_t i = 0; i < pr.m; ++i) {
    for (int64_t j = 0; j < ldc; ++j) {
      const float got = c[i * ldc + j];
      if (j >= pr.n) {
        wrong += got != kSentinel;
        continue;
      }
      double exact = 0, magnitude = 0;
      for (int64_t p = 0; p < pr.k; ++p) {
        const double x = pr.transpose_a ? a[p * lda + i] : a[i * lda + p];
        const double y = pr.transpose_b ? b[j * ldb + p] : b[p * ldb + j];
        exact += x * y;
        magnitude += std::fabs(x * y);
      }
      if (!(std::fabs(got - exact) <= (pr.k + 2) * u * magnitude)) {
        if (wrong < 3) {
          ADD_FAILURE() << "C[" << i << "," << j << "] = " << got << ", exact " << exact << " (m=" << pr.m
                        << " n=" << pr.n << " k=" << pr.k << " ta=" << pr.transpose_a << " tb=" << pr.transpose_b
                        << ")";
        }
        ++wrong;
      }
    }
  }
  return wrong;
}

#define SKIP_WITHOUT_AVX512()                                                                    \
  if (!CpuHasAvx512Sgemm()) GTEST_SKIP() << "SKIPPED LOUDLY: this CPU lacks AVX-512 F/DQ/BW/VL; " \
                                            "BatchedGemm uses OpenBLAS here and the kernel is untested"

TEST(Avx512Sgemm, EveryLayoutAndEdgeShapeMatchesExactSums) {
  SKIP_WITHOUT_AVX512();
  std::mt19937 rng(7);
  // Sides around the micro-tile (12 x 32) and the packing transposes (16), both operand
  // layouts, padded leading dimensions, and k past one 256-deep block (accumulation into C).
  const int64_t sides[] = {1, 5, 11, 12, 13, 16, 17, 31, 32, 33, 47, 64, 100};
  const int64_t depths[] = {1, 3, 16, 17, 255, 256, 257, 600};
  int64_t wrong = 0, problems = 0;
  for (int trial = 0; trial < 300; ++trial) {
    Problem pr{sides[rng() % 13], sides[rng() % 13], depths[rng() % 8], bool(rng() & 1), bool(rng() & 1),
               int64_t(rng() % 3), int64_t(rng() % 3), int64_t(rng() % 3)};
    wrong += CountWrongEntries(pr, rng);
    ++problems;
  }
  EXPECT_EQ(wrong, 0) << "over " << problems << " problems";
}

TEST(Avx512Sgemm, NarrowProductsLargeBlocksAndPackedLeadingDims) {
  SKIP_WITHOUT_AVX512();
  std::mt19937 rng(11);
  // Narrow C (n < 32, n < m) takes the transposed route; n past 2048 spans two column blocks;
  // m past 192 spans two row blocks; leading dimensions of 512 make the panels that are
  // otherwise read in place (transposed A, untransposed B) packed.
  const Problem problems[] = {
      {300, 10, 70, false, true},  {300, 10, 70, true, false, 1, 2, 5}, {40, 3, 9, false, false},
      {9, 2100, 20, false, false}, {9, 2100, 20, true, true, 3, 0, 1},  {400, 40, 300, false, true},
      {500, 40, 20, true, false, 12}, {20, 500, 300, false, false, 0, 12},
  };
  for (const Problem& pr : problems) EXPECT_EQ(CountWrongEntries(pr, rng), 0);
}

TEST(Avx512Sgemm, NonFiniteInputsReachOnlyTheirRowsAndColumns) {
  SKIP_WITHOUT_AVX512();
  // Zero padding inside the packed tiles must not turn into NaN in stored entries: an infinity
  // in A's row 2 makes row 2 of C infinite or NaN and leaves every other row finite.
  const int64_t m = 20, n = 40, k = 9;
  std::vector<float> a(m * k, 0.5f), b(k * n, 0.25f), c(m * n);
  a[2 * k + 4] = std::numeric_limits<float>::infinity();
  Avx512Sgemm(false, false, m, n, k, a.data(), k, b.data(), n, c.data(), n);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      if (i == 2) EXPECT_TRUE(std::isinf(c[i * n + j])) << j;
      else EXPECT_EQ(c[i * n + j], 0.5f * 0.25f * k) << i << "," << j;
    }
  }
}

}  // namespace
}  // namespace dt
