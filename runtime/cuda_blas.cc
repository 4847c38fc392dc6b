#include "runtime/cuda_blas.h"

#include <dlfcn.h>

#include <array>
#include <climits>
#include <cstdlib>
#include <mutex>

#include "absl/strings/str_format.h"
#include "runtime/blas.h"
#include "runtime/copy.h"
#include "runtime/cuda_allocator.h"
#include "runtime/cuda_driver.h"
#include "runtime/cuda_tensor.h"
#include "runtime/errors.h"

namespace dt {
namespace {

// cuBLAS ABI values (cublas_api.h, library_types.h).
using CublasHandle = struct CublasContext*;
using CublasStatus = int;
constexpr int kCublasOpN = 0;
constexpr int kCublasOpT = 1;
constexpr int kCudaR16F = 2;
constexpr int kCudaR16BF = 14;
constexpr int kCudaR32F = 0;
constexpr int kCudaR64F = 1;
constexpr int kCublasCompute32F = 68;
constexpr int kCublasCompute64F = 70;
constexpr int kCublasGemmDefault = -1;
// Hopper's recommended cuBLAS workspace; with it set, no multiply allocates.
constexpr size_t kWorkspaceBytes = 32u << 20;

struct Cublas {
  CublasStatus (*create)(CublasHandle*);
  CublasStatus (*set_stream)(CublasHandle, CUstream);
  CublasStatus (*set_workspace)(CublasHandle, void*, size_t);
  const char* (*status_string)(CublasStatus);
  CublasStatus (*gemm_strided_batched)(CublasHandle, int transa, int transb, int m, int n, int k,
                                       const void* alpha, const void* a, int a_type, int lda,
                                       long long stride_a, const void* b, int b_type, int ldb,
                                       long long stride_b, const void* beta, void* c, int c_type,
                                       int ldc, long long stride_c, int batches, int compute,
                                       int algo);
};

struct LoadedCublas {
  Cublas api{};
  std::string error;  // empty when loaded
};

const LoadedCublas& Load() {
  static const LoadedCublas* loaded = [] {
    auto* l = new LoadedCublas();
    const char* override_path = std::getenv("DYNTRACE_LIBCUBLAS");
    std::vector<const char*> candidates;
    if (override_path != nullptr && *override_path) candidates.push_back(override_path);
    else candidates = {"libcublas.so.13", "libcublas.so.12", "libcublas.so"};
    void* lib = nullptr;
    std::string tried;
    for (const char* path : candidates) {
      if ((lib = dlopen(path, RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
      absl::StrAppendFormat(&tried, "%s%s (%s)", tried.empty() ? "" : "; ", path, dlerror());
    }
    if (lib == nullptr) {
      l->error = absl::StrFormat("cuBLAS could not be loaded: %s", tried);
      return l;
    }
    struct Entry {
      const char* name;
      void** slot;
    };
    auto slot = [](auto& fn) { return reinterpret_cast<void**>(&fn); };
    const Entry entries[] = {
        {"cublasCreate_v2", slot(l->api.create)},
        {"cublasSetStream_v2", slot(l->api.set_stream)},
        {"cublasSetWorkspace_v2", slot(l->api.set_workspace)},
        {"cublasGetStatusString", slot(l->api.status_string)},
        {"cublasGemmStridedBatchedEx", slot(l->api.gemm_strided_batched)},
    };
    for (const Entry& e : entries) {
      if ((*e.slot = dlsym(lib, e.name)) == nullptr) {
        l->error = absl::StrFormat("the cuBLAS library found lacks %s (cuBLAS 12 or newer is needed)", e.name);
        return l;
      }
    }
    return l;
  }();
  return *loaded;
}

absl::Status CublasCall(CublasStatus status, const char* what) {
  if (status == 0) return absl::OkStatus();
  const char* text = Load().api.status_string ? Load().api.status_string(status) : nullptr;
  return Error(ErrorKind::kRuntime,
               absl::StrFormat("%s failed: %s (cuBLAS status %d)", what, text ? text : "unknown", status));
}

// One handle per device, bound to its stream and its workspace. Calls on a handle are
// serialised: cuBLAS handles are not meant to be shared by threads at once.
struct DeviceHandle {
  std::mutex mu;
  CublasHandle handle = nullptr;
};

absl::StatusOr<DeviceHandle*> HandleFor(const CudaDevice& device) {
  static std::mutex mu;
  static std::array<DeviceHandle*, 64> handles{};
  std::lock_guard<std::mutex> lock(mu);
  DeviceHandle*& h = handles.at(device.index());
  if (h != nullptr) return h;
  const Cublas& api = Load().api;
  DT_RETURN_IF_ERROR(device.Activate());
  auto fresh = std::make_unique<DeviceHandle>();
  DT_RETURN_IF_ERROR(CublasCall(api.create(&fresh->handle), "cublasCreate"));
  DT_RETURN_IF_ERROR(CublasCall(api.set_stream(fresh->handle, device.stream()), "cublasSetStream"));
  DT_ASSIGN_OR_RETURN(CUdeviceptr workspace, CudaAllocator::Get().Allocate(device.index(), kWorkspaceBytes));
  DT_RETURN_IF_ERROR(CublasCall(api.set_workspace(fresh->handle, reinterpret_cast<void*>(workspace), kWorkspaceBytes),
                                "cublasSetWorkspace"));
  h = fresh.release();  // handles live for the process, like the devices
  return h;
}

bool FitsInt(int64_t v) { return v >= 0 && v <= INT_MAX; }

}  // namespace

absl::Status CheckCublasAvailable() {
  const LoadedCublas& l = Load();
  if (l.error.empty()) return absl::OkStatus();
  return Error(ErrorKind::kRuntime, l.error);
}

absl::StatusOr<std::optional<CublasGemmCall>> PlanCublasGemm(const Tensor& a, const Tensor& b,
                                                             const Tensor& out) {
  const int64_t batches = a.size(0), m = a.size(1), k = a.size(2), n = b.size(2);
  std::optional<GemmOperandLayout> la = GemmLayoutOf(m, k, a.stride(1), a.stride(2));
  std::optional<GemmOperandLayout> lb = GemmLayoutOf(k, n, b.stride(1), b.stride(2));
  if (!la || !lb) return std::optional<CublasGemmCall>();
  CublasGemmCall call;
  call.transpose_first = lb->transposed;
  call.transpose_second = la->transposed;
  call.m = n;
  call.n = m;
  call.k = k;
  call.ld_first = lb->ld;
  call.ld_second = la->ld;
  call.ld_out = std::max<int64_t>(n, 1);
  call.stride_first = b.stride(0);
  call.stride_second = a.stride(0);
  call.stride_out = out.stride(0);
  call.batches = batches;
  for (int64_t v : {call.m, call.n, call.k, call.ld_first, call.ld_second, call.ld_out, call.batches}) {
    if (!FitsInt(v)) {
      return Error(ErrorKind::kValue,
                   absl::StrFormat("matmul of shapes %s and %s on CUDA: a size or stride exceeds cuBLAS's 32-bit "
                                   "limit (%d)",
                                   a.ShapeString(), b.ShapeString(), v));
    }
  }
  return std::optional<CublasGemmCall>(call);
}

absl::Status CudaBatchedGemm(const Tensor& a_in, const Tensor& b_in, const Tensor& out) {
  if (out.numel() == 0) return absl::OkStatus();
  const DType dtype = out.dtype();
  if (!IsFloating(dtype)) {
    // No cuBLAS kernel for these: the CPU loops, through mirrors, give the exact CPU result.
    CountCudaHostOp("matmul");
    DT_ASSIGN_OR_RETURN(HostMirror ha, MirrorToHost(a_in));
    DT_ASSIGN_OR_RETURN(HostMirror hb, MirrorToHost(b_in));
    DT_ASSIGN_OR_RETURN(HostMirror hout, MirrorToHost(out));
    BatchedGemm(ha.host, hb.host, hout.host);
    return WriteBack(hout);
  }
  DT_ASSIGN_OR_RETURN(CudaDevice * device, CudaDevice::Get(out.device().index));
  if (a_in.size(2) == 0) {
    DT_RETURN_IF_ERROR(device->Activate());
    return CudaCall(device->driver().cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(out.data()), 0,
                                                      out.numel() * out.itemsize(), device->stream()),
                    "cuMemsetD8Async");
  }
  DT_RETURN_IF_ERROR(CheckCublasAvailable());
  Tensor a = a_in, b = b_in;
  DT_ASSIGN_OR_RETURN(std::optional<CublasGemmCall> call, PlanCublasGemm(a, b, out));
  if (!call) {
    if (!GemmLayoutOf(a.size(1), a.size(2), a.stride(1), a.stride(2))) a = Contiguous(a);
    if (!GemmLayoutOf(b.size(1), b.size(2), b.stride(1), b.stride(2))) b = Contiguous(b);
    DT_ASSIGN_OR_RETURN(call, PlanCublasGemm(a, b, out));
    if (!call) return absl::InternalError("matmul: contiguous operands still have no BLAS layout");
  }
  DT_ASSIGN_OR_RETURN(DeviceHandle * h, HandleFor(*device));
  std::lock_guard<std::mutex> lock(h->mu);
  DT_RETURN_IF_ERROR(device->Activate());
  // The 16-bit floats multiply with float32 compute (alpha and beta are floats), as PyTorch does.
  const int type = dtype == DType::kFloat16    ? kCudaR16F
                   : dtype == DType::kBFloat16 ? kCudaR16BF
                   : dtype == DType::kFloat32  ? kCudaR32F
                                               : kCudaR64F;
  const int compute = dtype == DType::kFloat64 ? kCublasCompute64F : kCublasCompute32F;
  const float one_f = 1.0f, zero_f = 0.0f;
  const double one_d = 1.0, zero_d = 0.0;
  const void* alpha = dtype == DType::kFloat64 ? static_cast<const void*>(&one_d) : &one_f;
  const void* beta = dtype == DType::kFloat64 ? static_cast<const void*>(&zero_d) : &zero_f;
  return CublasCall(
      Load().api.gemm_strided_batched(
          h->handle, call->transpose_first ? kCublasOpT : kCublasOpN, call->transpose_second ? kCublasOpT : kCublasOpN,
          static_cast<int>(call->m), static_cast<int>(call->n), static_cast<int>(call->k), alpha, b.data(), type,
          static_cast<int>(call->ld_first), call->stride_first, a.data(), type, static_cast<int>(call->ld_second),
          call->stride_second, beta, out.data(), type, static_cast<int>(call->ld_out), call->stride_out,
          static_cast<int>(call->batches), compute, kCublasGemmDefault),
      "cublasGemmStridedBatchedEx");
}

}  // namespace dt
