// runtime/sgemm_avx512.h: dyntrace's own float32 GEMM for CPUs with AVX-512.
//
// Debian's OpenBLAS (0.3.21) predates AMD's Zen 4 and Zen 5: on them it picks its Haswell
// (AVX2) kernels, at about 95 GFLOP/s on one Zen 5 core where this blocked AVX-512 kernel
// reaches 130-200 (bench/gemm.py prints both side by side). BatchedGemm (runtime/blas.h) sends
// single-precision products here when the CPU has AVX-512 and both sides of C are at least
// kMinAvx512GemmSide; vector-like products stay with OpenBLAS (its GEMV measured as fast or faster).
// DYNTRACE_CPU_GEMM=openblas sends every product to OpenBLAS (results then match numpy's
// summation order on the same library).
#ifndef DYNTRACE_RUNTIME_SGEMM_AVX512_H_
#define DYNTRACE_RUNTIME_SGEMM_AVX512_H_

#include <cstdint>

namespace dt {

inline constexpr int64_t kMinAvx512GemmSide = 8;

// Whether this CPU runs Avx512Sgemm (AVX-512 F/DQ/BW/VL and FMA), checked once.
bool CpuHasAvx512Sgemm();

// C = op(A) op(B), row-major, single-threaded. op(A) is m x k: element (i, p) is a[i * lda + p],
// or a[p * lda + i] when transpose_a; op(B) is k x n likewise; C's row i starts at c + i * ldc.
// REQUIRES: CpuHasAvx512Sgemm(); m, n, k >= 1.
void Avx512Sgemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, const float* a,
                 int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc);

}  // namespace dt

#endif  // DYNTRACE_RUNTIME_SGEMM_AVX512_H_
