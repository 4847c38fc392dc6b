// runtime/cuda_driver.h: the CUDA driver, found at run time.
//
// dyntrace never links CUDA: libcuda is opened with dlopen on first use, so one build runs on
// machines with and without a GPU. The driver's entry points live in one table of function
// pointers declared here with the driver ABI's own types (this header does not include cuda.h,
// which a machine without the toolkit lacks). Every call goes through CudaCall(), which turns a
// CUresult into an absl::Status naming the call and the driver's own description.
//
//   DT_ASSIGN_OR_RETURN(CudaDevice* gpu, CudaDevice::Get(0));
//   DT_RETURN_IF_ERROR(CudaCall(gpu->driver().cuMemsetD8Async(ptr, 0, bytes, gpu->stream()),
//                               "cuMemsetD8Async"));
#ifndef DYNTRACE_RUNTIME_CUDA_DRIVER_H_
#define DYNTRACE_RUNTIME_CUDA_DRIVER_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/device.h"

namespace dt {

// The driver ABI's handle types: opaque pointers and a 64-bit device address.
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = uint64_t;
using CUcontext = struct CUctx_st*;
using CUstream = struct CUstream_st*;
using CUevent = struct CUevent_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUgraph = struct CUgraph_st*;
using CUgraphExec = struct CUgraphExec_st*;
using CUgraphNode = struct CUgraphNode_st*;

// CUDA_KERNEL_NODE_PARAMS_v2, field for field.
struct CudaKernelNodeParams {
  CUfunction func;
  unsigned grid_x, grid_y, grid_z;
  unsigned block_x, block_y, block_z;
  unsigned shared_bytes;
  void** kernel_params;
  void** extra;
  void* kern;
  CUcontext ctx;
};

// Driver enum values dyntrace uses (from the driver API's documented ABI).
inline constexpr int kCuStreamNonBlocking = 0x1;
inline constexpr int kCuEventDisableTiming = 0x2;
inline constexpr int kCuCaptureModeThreadLocal = 1;
inline constexpr int kCuGraphNodeTypeKernel = 0;
inline constexpr int kCuAttrComputeCapabilityMajor = 75;
inline constexpr int kCuAttrComputeCapabilityMinor = 76;
inline constexpr int kCuAttrMultiprocessorCount = 16;
inline constexpr int kCuFuncAttrMaxDynamicSharedBytes = 8;
inline constexpr unsigned kCuMemHostAllocPortable = 0x1;
inline constexpr CUresult kCudaSuccess = 0;
inline constexpr CUresult kCudaErrorNotReady = 600;

struct CudaDriver {
  CUresult (*cuInit)(unsigned flags);
  CUresult (*cuDriverGetVersion)(int* version);
  CUresult (*cuGetErrorName)(CUresult, const char**);
  CUresult (*cuGetErrorString)(CUresult, const char**);
  CUresult (*cuDeviceGetCount)(int*);
  CUresult (*cuDeviceGet)(CUdevice*, int ordinal);
  CUresult (*cuDeviceGetName)(char*, int, CUdevice);
  CUresult (*cuDeviceGetAttribute)(int*, int attribute, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuMemAlloc)(CUdeviceptr*, size_t);
  CUresult (*cuMemFree)(CUdeviceptr);
  CUresult (*cuMemHostAlloc)(void**, size_t, unsigned flags);
  CUresult (*cuMemFreeHost)(void*);
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void*, size_t, CUstream);
  CUresult (*cuMemcpyDtoHAsync)(void*, CUdeviceptr, size_t, CUstream);
  CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
  CUresult (*cuMemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
  CUresult (*cuMemsetD16Async)(CUdeviceptr, unsigned short, size_t, CUstream);
  CUresult (*cuMemsetD32Async)(CUdeviceptr, unsigned int, size_t, CUstream);
  // `height` rows of `width` 32-bit words, rows `pitch` bytes apart.
  CUresult (*cuMemsetD2D32Async)(CUdeviceptr, size_t pitch, unsigned int, size_t width, size_t height, CUstream);
  CUresult (*cuStreamCreate)(CUstream*, unsigned flags);
  CUresult (*cuStreamDestroy)(CUstream);
  CUresult (*cuStreamSynchronize)(CUstream);
  CUresult (*cuStreamWaitEvent)(CUstream, CUevent, unsigned flags);
  CUresult (*cuEventCreate)(CUevent*, unsigned flags);
  CUresult (*cuEventRecord)(CUevent, CUstream);
  CUresult (*cuEventQuery)(CUevent);
  CUresult (*cuEventSynchronize)(CUevent);
  CUresult (*cuEventElapsedTime)(float* ms, CUevent start, CUevent end);
  CUresult (*cuEventDestroy)(CUevent);
  CUresult (*cuModuleLoadData)(CUmodule*, const void* image);
  CUresult (*cuModuleUnload)(CUmodule);
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char* name);
  CUresult (*cuFuncSetAttribute)(CUfunction, int attribute, int value);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                             unsigned by, unsigned bz, unsigned shared_bytes, CUstream,
                             void** params, void** extra);
  CUresult (*cuStreamBeginCapture)(CUstream, int mode);
  CUresult (*cuStreamEndCapture)(CUstream, CUgraph*);
  // After a captured launch, `deps` holds the node it became (the stream's capture is a chain).
  CUresult (*cuStreamGetCaptureInfo)(CUstream, int* status, uint64_t* id, CUgraph* graph,
                                     const CUgraphNode** deps, size_t* num_deps);
  CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec*, CUgraph, unsigned long long flags);
  CUresult (*cuGraphLaunch)(CUgraphExec, CUstream);
  CUresult (*cuGraphGetNodes)(CUgraph, CUgraphNode*, size_t* count);
  CUresult (*cuGraphNodeGetType)(CUgraphNode, int* type);
  CUresult (*cuGraphKernelNodeGetParams)(CUgraphNode, CudaKernelNodeParams*);
  CUresult (*cuGraphExecKernelNodeSetParams)(CUgraphExec, CUgraphNode, const CudaKernelNodeParams*);
  CUresult (*cuGraphExecDestroy)(CUgraphExec);
  CUresult (*cuGraphDestroy)(CUgraph);
};

struct CudaProbe {
  bool available = false;
  int device_count = 0;
  int driver_version = 0;  // e.g. 13000 for CUDA 13.0
  std::string reason;      // why CUDA is unavailable; empty when available
};

// Loads the driver once and caches the answer. Thread-safe.
const CudaProbe& ProbeCuda();

// The loaded driver table, or why there is none.
absl::StatusOr<const CudaDriver*> LoadCudaDriver();

// OK when `result` is success; else an error naming `what` and the driver's description.
absl::Status CudaCall(CUresult result, const char* what);

// One GPU as dyntrace uses it: the primary context, made current on the calling thread by
// Activate(), and one non-blocking stream that all of dyntrace's work on the device is ordered
// on (streams from the caller are not mixed in, so no cross-stream events are needed).
class CudaDevice {
 public:
  // Created on first use; lives for the process.
  static absl::StatusOr<CudaDevice*> Get(int index);

  // Makes the primary context current on this thread (cheap when it already is).
  absl::Status Activate() const;
  absl::Status Synchronize() const;

  const CudaDriver& driver() const { return *driver_; }
  CUstream stream() const { return stream_; }
  int index() const { return index_; }
  int sm_arch() const { return sm_arch_; }  // 90 on Hopper
  int multiprocessors() const { return multiprocessors_; }
  const std::string& name() const { return name_; }

 private:
  CudaDevice() = default;

  const CudaDriver* driver_ = nullptr;
  int index_ = 0;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  CUstream stream_ = nullptr;
  int sm_arch_ = 0;
  int multiprocessors_ = 0;
  std::string name_;
};

// OK for CPU and meta, and for a CUDA device that exists; otherwise an error explaining why
// tensors cannot be placed there (no driver, no device, no such index).
absl::Status CheckDeviceUsable(Device device);

}  // namespace dt

#endif  // DYNTRACE_RUNTIME_CUDA_DRIVER_H_
