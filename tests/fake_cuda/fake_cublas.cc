// A stand-in for cuBLAS (libcublas.so) over the fake driver, for machines without a GPU.
//
// It implements the calls runtime/cuda_blas.cc makes, with cuBLAS's documented column-major
// semantics computed by plain loops on the fake driver's device memory (reached through
// fakeCudaHostAddress). So CI checks dyntrace's translation of row-major, strided, transposed
// and broadcast matmuls into cuBLAS arguments against the CPU result, exactly as real cuBLAS
// would read them. An operand reaching outside its device block fails the call. During a stream
// capture the driver records a GEMM for the graph's launches instead of running it.
//
// Loaded by tests through DYNTRACE_LIBCUBLAS, next to DYNTRACE_LIBCUDA (the fake driver).
#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "runtime/half.h"

namespace {

constexpr int kSuccess = 0;
constexpr int kNotInitialized = 1;
constexpr int kInvalidValue = 7;
constexpr int kNotSupported = 15;
constexpr int kExecutionFailed = 13;

using HostAddressFn = char* (*)(uint64_t, size_t);
using RunOrRecordFn = int (*)(int (*)(void*), void*, void (*)(void*));

// A function the fake driver exports (it is loaded first, through DYNTRACE_LIBCUDA), or null.
void* DriverSymbol(const char* name) {
  const char* driver = std::getenv("DYNTRACE_LIBCUDA");
  void* lib = driver ? dlopen(driver, RTLD_NOW | RTLD_NOLOAD) : nullptr;
  return lib ? dlsym(lib, name) : nullptr;
}

HostAddressFn host_address() {
  static auto fn = reinterpret_cast<HostAddressFn>(DriverSymbol("fakeCudaHostAddress"));
  return fn;
}

RunOrRecordFn run_or_record() {
  static auto fn = reinterpret_cast<RunOrRecordFn>(DriverSymbol("fakeCudaRunOrRecord"));
  return fn;
}

// Element (row, col) of op(X) where X is column-major with leading dimension ld.
template <typename T>
T At(const T* x, bool transposed, int64_t ld, int64_t row, int64_t col) {
  return transposed ? x[col + row * ld] : x[row + col * ld];
}

// The bytes a column-major rows x cols matrix with leading dimension ld spans.
size_t Span(bool transposed, int64_t rows, int64_t cols, int64_t ld, size_t itemsize) {
  const int64_t stored_rows = transposed ? cols : rows, stored_cols = transposed ? rows : cols;
  if (stored_rows == 0 || stored_cols == 0) return 0;
  return static_cast<size_t>((stored_cols - 1) * ld + stored_rows) * itemsize;
}

// One strided-batched GEMM's arguments, alpha and beta read at the call (as cuBLAS reads host
// scalars, also when a stream capture records the call).
template <typename Acc>
struct GemmCall {
  int ta, tb, m, n, k;
  Acc alpha, beta;
  uint64_t a, b, c;
  int lda, ldb, ldc;
  long long sa, sb, sc;
  int batches;
};

// T: the stored element type; Acc: the compute type (alpha and beta are Acc values, as cuBLAS
// takes them for a compute type of 32F or 64F), so float16 operands accumulate in float.
template <typename T, typename Acc>
int RunGemm(void* raw) {
  const GemmCall<Acc>& g = *static_cast<const GemmCall<Acc>*>(raw);
  HostAddressFn translate = host_address();
  for (int batch = 0; batch < g.batches; ++batch) {
    const uint64_t pa = g.a + batch * g.sa * sizeof(T);
    const uint64_t pb = g.b + batch * g.sb * sizeof(T);
    const uint64_t pc = g.c + batch * g.sc * sizeof(T);
    const T* ha = reinterpret_cast<const T*>(translate(pa, Span(g.ta, g.m, g.k, g.lda, sizeof(T))));
    const T* hb = reinterpret_cast<const T*>(translate(pb, Span(g.tb, g.k, g.n, g.ldb, sizeof(T))));
    T* hc = reinterpret_cast<T*>(translate(pc, Span(false, g.m, g.n, g.ldc, sizeof(T))));
    if (!ha || !hb || !hc) return kExecutionFailed;
    // A column of C at a time, each entry's products summed in order of p (as a dot product
    // would), the loop over i innermost for the memory order of column-major A.
    std::vector<Acc> column(g.m);
    for (int j = 0; j < g.n; ++j) {
      std::fill(column.begin(), column.end(), Acc(0));
      for (int p = 0; p < g.k; ++p) {
        const Acc b_pj = Acc(At(hb, g.tb, g.ldb, p, j));
        for (int i = 0; i < g.m; ++i) column[i] += Acc(At(ha, g.ta, g.lda, i, p)) * b_pj;
      }
      for (int i = 0; i < g.m; ++i) {
        hc[i + j * g.ldc] = T(g.alpha * column[i] + (g.beta == 0 ? Acc(0) : g.beta * Acc(hc[i + j * g.ldc])));
      }
    }
  }
  return kSuccess;
}

template <typename T, typename Acc = T>
int Gemm(int ta, int tb, int m, int n, int k, const void* alpha, const void* a, int lda, long long sa,
         const void* b, int ldb, long long sb, const void* beta, void* c, int ldc, long long sc, int batches) {
  if (host_address() == nullptr || run_or_record() == nullptr) return kNotInitialized;
  auto* call = new GemmCall<Acc>{ta, tb, m, n, k, *static_cast<const Acc*>(alpha), *static_cast<const Acc*>(beta),
                                 reinterpret_cast<uint64_t>(a), reinterpret_cast<uint64_t>(b),
                                 reinterpret_cast<uint64_t>(c), lda, ldb, ldc, sa, sb, sc, batches};
  return run_or_record()(&RunGemm<T, Acc>, call, [](void* p) { delete static_cast<GemmCall<Acc>*>(p); });
}

}  // namespace

extern "C" {

int cublasCreate_v2(void** handle) {
  if (host_address() == nullptr) return kNotInitialized;
  *handle = reinterpret_cast<void*>(uintptr_t{0x400});
  return kSuccess;
}
int cublasSetStream_v2(void*, void*) { return kSuccess; }
int cublasSetWorkspace_v2(void*, void*, size_t) { return kSuccess; }
const char* cublasGetStatusString(int status) {
  switch (status) {
    case kSuccess: return "success";
    case kNotInitialized: return "the library was not initialized (fake: no fake driver loaded)";
    case kInvalidValue: return "an unsupported value or parameter was passed to the function";
    case kExecutionFailed: return "the GPU program failed to execute (fake: operand outside its block)";
    case kNotSupported: return "the functionality requested is not supported";
  }
  return "unknown cuBLAS status";
}

int cublasGemmStridedBatchedEx(void*, int ta, int tb, int m, int n, int k, const void* alpha, const void* a,
                               int a_type, int lda, long long sa, const void* b, int b_type, int ldb, long long sb,
                               const void* beta, void* c, int c_type, int ldc, long long sc, int batches,
                               int compute, int) {
  if (a_type != b_type || a_type != c_type) return kNotSupported;
  if (m < 0 || n < 0 || k < 0 || batches < 0 || ldc < (m > 1 ? m : 1)) return kInvalidValue;
  if (lda < ((ta ? k : m) > 1 ? (ta ? k : m) : 1) || ldb < ((tb ? n : k) > 1 ? (tb ? n : k) : 1)) return kInvalidValue;
  if (a_type == 0 && compute == 68) return Gemm<float>(ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, batches);
  if (a_type == 1 && compute == 70) return Gemm<double>(ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, batches);
  if (a_type == 2 && compute == 68) {  // CUDA_R_16F with CUBLAS_COMPUTE_32F
    return Gemm<dt::Half, float>(ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, batches);
  }
  if (a_type == 14 && compute == 68) {  // CUDA_R_16BF with CUBLAS_COMPUTE_32F
    return Gemm<dt::BFloat16, float>(ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, batches);
  }
  return kNotSupported;
}

}  // extern "C"
