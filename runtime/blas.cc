#include "runtime/blas.h"

#include <cblas.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "runtime/copy.h"
#include "runtime/parallel.h"
#include "runtime/sgemm_avx512.h"

namespace dt {
bool Avx512SgemmEnabled() {
  static const bool enabled = [] {
    const char* choice = std::getenv("DYNTRACE_CPU_GEMM");
    return CpuHasAvx512Sgemm() && !(choice != nullptr && std::strcmp(choice, "openblas") == 0);
  }();
  return enabled;
}

namespace {

bool UseAvx512Sgemm(int64_t m, int64_t n) { return Avx512SgemmEnabled() && std::min(m, n) >= kMinAvx512GemmSide; }

template <typename T>
void Gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k, const T* a,
          int64_t lda, const T* b, int64_t ldb, T* c, int64_t ldc) {
  if constexpr (std::is_same_v<T, float>) {
    if (UseAvx512Sgemm(m, n)) {
      Avx512Sgemm(ta == CblasTrans, tb == CblasTrans, m, n, k, a, lda, b, ldb, c, ldc);
      return;
    }
    cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
  } else {
    cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, 1.0, a, lda, b, ldb, 0.0, c, ldc);
  }
}

// Below this many multiply-adds a GEMM runs on the calling thread alone.
constexpr int64_t kParallelGemmWork = int64_t{1} << 18;

// While alive, the pthread build of OpenBLAS runs each call on its caller's thread only. Its own
// threads and the OpenMP team that runs dyntrace's kernels would otherwise both want every
// core: on a small machine they take turns spinning (sched_yield) and a transformer layer ran
// about 2x slower than with one pool. The OpenMP build shares the OpenMP team already.
class OneBlasThread {
 public:
  OneBlasThread() : previous_(openblas_get_parallel() == 1 ? openblas_get_num_threads() : 0) {
    if (previous_ > 1) openblas_set_num_threads(1);
  }
  ~OneBlasThread() {
    if (previous_ > 1) openblas_set_num_threads(previous_);
  }
  OneBlasThread(const OneBlasThread&) = delete;
  OneBlasThread& operator=(const OneBlasThread&) = delete;

 private:
  int previous_;
};

// `batches` GEMMs of one layout, spread over dyntrace's OpenMP team: whole GEMMs per thread when
// there are enough of them, else row (or column) blocks of each, every block a single-threaded
// BLAS call.
template <typename T>
void ParallelGemms(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t batches, int64_t m, int64_t n, int64_t k,
                   const T* a, int64_t lda, int64_t stride_a, const T* b, int64_t ldb, int64_t stride_b, T* c,
                   int64_t ldc, int64_t stride_c) {
  const int threads = MaxThreads();
  if (openblas_get_parallel() == 2 || threads < 2 || batches * m * n * k < kParallelGemmWork) {
    // One thread asked for (set_num_threads(1)) is one thread: OpenBLAS's own pool would still
    // split a large GEMM, and its waiting threads spin on the other cores.
    std::optional<OneBlasThread> one_blas_thread;
    if (threads < 2) one_blas_thread.emplace();
    for (int64_t i = 0; i < batches; ++i) {
      Gemm<T>(ta, tb, m, n, k, a + i * stride_a, lda, b + i * stride_b, ldb, c + i * stride_c, ldc);
    }
    return;
  }
  OneBlasThread one_blas_thread;
  if (batches >= threads) {
    ParallelFor(batches, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        Gemm<T>(ta, tb, m, n, k, a + i * stride_a, lda, b + i * stride_b, ldb, c + i * stride_c, ldc);
      }
    });
    return;
  }
  // Split the longer of the output's two sides; op(A)'s row r starts at a + r * lda untransposed,
  // a + r transposed, and likewise op(B)'s column j.
  const bool by_rows = m >= n;
  const int64_t side = by_rows ? m : n;
  for (int64_t i = 0; i < batches; ++i) {
    const T* ai = a + i * stride_a;
    const T* bi = b + i * stride_b;
    T* ci = c + i * stride_c;
    ParallelFor(side, std::max<int64_t>(1, side / threads), [&](int64_t lo, int64_t hi) {
      if (by_rows) {
        Gemm<T>(ta, tb, hi - lo, n, k, ai + lo * (ta == CblasNoTrans ? lda : 1), lda, bi, ldb, ci + lo * ldc, ldc);
      } else {
        Gemm<T>(ta, tb, m, hi - lo, k, ai, lda, bi + lo * (tb == CblasNoTrans ? 1 : ldb), ldb, ci + lo, ldc);
      }
    });
  }
}

template <typename T>
void NaiveGemm(const Tensor& a, const Tensor& b, const Tensor& out) {
  using C = std::conditional_t<std::is_integral_v<T>, int64_t, ComputeType<T>>;
  const int64_t batches = a.size(0), m = a.size(1), k = a.size(2), n = b.size(2);
  const T* pa = a.data_as<T>();
  const T* pb = b.data_as<T>();
  T* pc = out.data_as<T>();
  ParallelFor(batches * m, std::max<int64_t>(1, 4096 / std::max<int64_t>(n * k, 1)), [&](int64_t lo, int64_t hi) {
    for (int64_t row = lo; row < hi; ++row) {
      const int64_t bi = row / m, i = row % m;
      for (int64_t j = 0; j < n; ++j) {
        C acc = 0;
        for (int64_t p = 0; p < k; ++p) {
          acc += static_cast<C>(static_cast<ComputeType<T>>(pa[bi * a.stride(0) + i * a.stride(1) + p * a.stride(2)])) *
                 static_cast<C>(static_cast<ComputeType<T>>(pb[bi * b.stride(0) + p * b.stride(1) + j * b.stride(2)]));
        }
        if constexpr (std::is_same_v<T, bool>) pc[(bi * m + i) * n + j] = acc != 0;
        else pc[(bi * m + i) * n + j] = static_cast<T>(acc);
      }
    }
  });
}

}  // namespace

std::optional<GemmOperandLayout> GemmLayoutOf(int64_t rows, int64_t cols, int64_t row_stride,
                                              int64_t col_stride) {
  // The stride of a size-1 dim is never followed (1-d matmul operands get stride 0 there), so
  // choose one that BLAS accepts.
  if (cols == 1) col_stride = 1;
  if (rows == 1) row_stride = std::max<int64_t>(cols, 1);
  if (col_stride == 1 && row_stride >= std::max<int64_t>(cols, 1)) return GemmOperandLayout{false, row_stride};
  if (row_stride == 1 && col_stride >= std::max<int64_t>(rows, 1)) return GemmOperandLayout{true, col_stride};
  return std::nullopt;
}

const char* CpuFloat32GemmName() { return Avx512SgemmEnabled() ? "avx512" : "openblas"; }

void BatchedGemm(const Tensor& a_in, const Tensor& b_in, const Tensor& out) {
  if (out.is_meta()) return;
  const int64_t batches = a_in.size(0), m = a_in.size(1), k = a_in.size(2), n = b_in.size(2);
  if (out.numel() == 0) return;
  if (k == 0) {
    (void)Fill(out, Scalar::Int(0));
    return;
  }
  const DType dtype = out.dtype();
  if (dtype != DType::kFloat32 && dtype != DType::kFloat64) {
    DT_DISPATCH_ALL(dtype, [&] { NaiveGemm<scalar_t>(a_in, b_in, out); });
    return;
  }
  Tensor a = a_in, b = b_in;
  auto la = GemmLayoutOf(m, k, a.stride(1), a.stride(2));
  if (!la) {
    a = Contiguous(a);
    la = GemmLayoutOf(m, k, a.stride(1), a.stride(2));
  }
  auto lb = GemmLayoutOf(k, n, b.stride(1), b.stride(2));
  if (!lb) {
    b = Contiguous(b);
    lb = GemmLayoutOf(k, n, b.stride(1), b.stride(2));
  }
  DT_DISPATCH_ALL(dtype, [&] {
    if constexpr (std::is_same_v<scalar_t, float> || std::is_same_v<scalar_t, double>) {
      ParallelGemms<scalar_t>(la->transposed ? CblasTrans : CblasNoTrans, lb->transposed ? CblasTrans : CblasNoTrans,
                              batches, m, n, k, a.data_as<scalar_t>(), la->ld, a.stride(0), b.data_as<scalar_t>(),
                              lb->ld, b.stride(0), out.data_as<scalar_t>(), n, m * n);
    }
  });
}

}  // namespace dt
