#include "runtime/cuda_driver.h"

#include <dlfcn.h>

#include <array>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/strings/str_format.h"
#include "runtime/errors.h"

namespace dt {
namespace {

// One table entry: the driver symbols to try, newest ABI version first (a driver older than the
// toolkit dyntrace was written against exports only the plain name), and the slot they fill.
struct Symbol {
  std::vector<const char*> names;
  void** slot;
};

std::vector<Symbol> SymbolsOf(CudaDriver& d) {
  auto slot = [](auto& fn) { return reinterpret_cast<void**>(&fn); };
  return {
      {{"cuInit"}, slot(d.cuInit)},
      {{"cuDriverGetVersion"}, slot(d.cuDriverGetVersion)},
      {{"cuGetErrorName"}, slot(d.cuGetErrorName)},
      {{"cuGetErrorString"}, slot(d.cuGetErrorString)},
      {{"cuDeviceGetCount"}, slot(d.cuDeviceGetCount)},
      {{"cuDeviceGet"}, slot(d.cuDeviceGet)},
      {{"cuDeviceGetName"}, slot(d.cuDeviceGetName)},
      {{"cuDeviceGetAttribute"}, slot(d.cuDeviceGetAttribute)},
      {{"cuDevicePrimaryCtxRetain"}, slot(d.cuDevicePrimaryCtxRetain)},
      {{"cuCtxSetCurrent"}, slot(d.cuCtxSetCurrent)},
      {{"cuMemAlloc_v2"}, slot(d.cuMemAlloc)},
      {{"cuMemFree_v2"}, slot(d.cuMemFree)},
      {{"cuMemHostAlloc"}, slot(d.cuMemHostAlloc)},
      {{"cuMemFreeHost"}, slot(d.cuMemFreeHost)},
      {{"cuMemcpyHtoDAsync_v2"}, slot(d.cuMemcpyHtoDAsync)},
      {{"cuMemcpyDtoHAsync_v2"}, slot(d.cuMemcpyDtoHAsync)},
      {{"cuMemcpyDtoDAsync_v2"}, slot(d.cuMemcpyDtoDAsync)},
      {{"cuMemsetD8Async"}, slot(d.cuMemsetD8Async)},
      {{"cuMemsetD16Async"}, slot(d.cuMemsetD16Async)},
      {{"cuMemsetD32Async"}, slot(d.cuMemsetD32Async)},
      {{"cuMemsetD2D32Async"}, slot(d.cuMemsetD2D32Async)},
      {{"cuStreamCreate"}, slot(d.cuStreamCreate)},
      {{"cuStreamDestroy_v2"}, slot(d.cuStreamDestroy)},
      {{"cuStreamSynchronize"}, slot(d.cuStreamSynchronize)},
      {{"cuStreamWaitEvent"}, slot(d.cuStreamWaitEvent)},
      {{"cuEventCreate"}, slot(d.cuEventCreate)},
      {{"cuEventRecord"}, slot(d.cuEventRecord)},
      {{"cuEventQuery"}, slot(d.cuEventQuery)},
      {{"cuEventSynchronize"}, slot(d.cuEventSynchronize)},
      {{"cuEventElapsedTime_v2", "cuEventElapsedTime"}, slot(d.cuEventElapsedTime)},
      {{"cuEventDestroy_v2"}, slot(d.cuEventDestroy)},
      {{"cuModuleLoadData"}, slot(d.cuModuleLoadData)},
      {{"cuModuleUnload"}, slot(d.cuModuleUnload)},
      {{"cuModuleGetFunction"}, slot(d.cuModuleGetFunction)},
      {{"cuFuncSetAttribute"}, slot(d.cuFuncSetAttribute)},
      {{"cuLaunchKernel"}, slot(d.cuLaunchKernel)},
      {{"cuStreamBeginCapture_v2"}, slot(d.cuStreamBeginCapture)},
      {{"cuStreamEndCapture"}, slot(d.cuStreamEndCapture)},
      {{"cuStreamGetCaptureInfo_v2"}, slot(d.cuStreamGetCaptureInfo)},
      {{"cuGraphInstantiateWithFlags"}, slot(d.cuGraphInstantiateWithFlags)},
      {{"cuGraphLaunch"}, slot(d.cuGraphLaunch)},
      {{"cuGraphGetNodes"}, slot(d.cuGraphGetNodes)},
      {{"cuGraphNodeGetType"}, slot(d.cuGraphNodeGetType)},
      {{"cuGraphKernelNodeGetParams_v2"}, slot(d.cuGraphKernelNodeGetParams)},
      {{"cuGraphExecKernelNodeSetParams_v2"}, slot(d.cuGraphExecKernelNodeSetParams)},
      {{"cuGraphExecDestroy"}, slot(d.cuGraphExecDestroy)},
      {{"cuGraphDestroy"}, slot(d.cuGraphDestroy)},
  };
}

struct Loaded {
  CudaDriver driver{};
  CudaProbe probe;
};

const Loaded& Load() {
  static const Loaded* loaded = [] {
    auto* l = new Loaded();
    // DYNTRACE_LIBCUDA names another driver library: a driver installed outside the loader's
    // path, or the tests' fake driver.
    const char* override_path = std::getenv("DYNTRACE_LIBCUDA");
    const char* path = override_path != nullptr && *override_path ? override_path : "libcuda.so.1";
    void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      l->probe.reason = absl::StrFormat(
          "the NVIDIA driver library %s could not be loaded (%s)", path, dlerror());
      return l;
    }
    for (const Symbol& symbol : SymbolsOf(l->driver)) {
      for (const char* name : symbol.names) {
        if ((*symbol.slot = dlsym(lib, name)) != nullptr) break;
      }
      if (*symbol.slot == nullptr) {
        l->probe.reason = absl::StrFormat(
            "libcuda.so.1 lacks %s: the NVIDIA driver is older than CUDA 12.3, which dyntrace needs",
            symbol.names.front());
        return l;
      }
    }
    if (CUresult rc = l->driver.cuInit(0); rc != kCudaSuccess) {
      const char* text = nullptr;
      l->driver.cuGetErrorString(rc, &text);
      l->probe.reason = absl::StrFormat("cuInit failed: %s (CUDA error %d; no usable GPU?)",
                                        text ? text : "unknown error", rc);
      return l;
    }
    l->driver.cuDriverGetVersion(&l->probe.driver_version);
    if (l->driver.cuDeviceGetCount(&l->probe.device_count) != kCudaSuccess ||
        l->probe.device_count == 0) {
      l->probe.reason = "the CUDA driver reports no devices";
      return l;
    }
    l->probe.available = true;
    return l;  // the library stays loaded for the process's lifetime
  }();
  return *loaded;
}

}  // namespace

const CudaProbe& ProbeCuda() { return Load().probe; }

absl::StatusOr<const CudaDriver*> LoadCudaDriver() {
  const Loaded& l = Load();
  if (!l.probe.available) {
    return Error(ErrorKind::kRuntime,
                 absl::StrFormat("CUDA is not available: %s; use device='cpu'", l.probe.reason));
  }
  return &l.driver;
}

absl::Status CudaCall(CUresult result, const char* what) {
  if (result == kCudaSuccess) return absl::OkStatus();
  const Loaded& l = Load();
  const char* name = nullptr;
  const char* text = nullptr;
  if (l.driver.cuGetErrorName != nullptr) l.driver.cuGetErrorName(result, &name);
  if (l.driver.cuGetErrorString != nullptr) l.driver.cuGetErrorString(result, &text);
  return Error(ErrorKind::kRuntime, absl::StrFormat("%s failed: %s (%s, CUDA error %d)", what,
                                                    text ? text : "unknown error",
                                                    name ? name : "?", result));
}

absl::StatusOr<CudaDevice*> CudaDevice::Get(int index) {
  absl::StatusOr<const CudaDriver*> driver = LoadCudaDriver();
  if (!driver.ok()) return driver.status();
  const int count = ProbeCuda().device_count;
  if (index < 0 || index >= count) {
    return Error(ErrorKind::kValue,
                 absl::StrFormat("device cuda:%d does not exist (%d CUDA devices)", index, count));
  }
  // Devices are set up once each, under one lock; a failed setup is retried on the next call.
  static std::mutex mu;
  static std::array<CudaDevice*, 64> devices{};
  if (index >= static_cast<int>(devices.size())) {
    return Error(ErrorKind::kValue, absl::StrFormat("device cuda:%d: at most %d devices are supported",
                                                    index, devices.size()));
  }
  std::lock_guard<std::mutex> lock(mu);
  if (devices[index] != nullptr) return devices[index];
  auto device = std::unique_ptr<CudaDevice>(new CudaDevice());
  const CudaDriver& d = **driver;
  device->driver_ = &d;
  device->index_ = index;
  absl::Status s = CudaCall(d.cuDeviceGet(&device->device_, index), "cuDeviceGet");
  if (s.ok()) s = CudaCall(d.cuDevicePrimaryCtxRetain(&device->context_, device->device_), "cuDevicePrimaryCtxRetain");
  if (s.ok()) s = CudaCall(d.cuCtxSetCurrent(device->context_), "cuCtxSetCurrent");
  if (s.ok()) s = CudaCall(d.cuStreamCreate(&device->stream_, kCuStreamNonBlocking), "cuStreamCreate");
  int major = 0, minor = 0;
  if (s.ok()) s = CudaCall(d.cuDeviceGetAttribute(&major, kCuAttrComputeCapabilityMajor, device->device_), "cuDeviceGetAttribute");
  if (s.ok()) s = CudaCall(d.cuDeviceGetAttribute(&minor, kCuAttrComputeCapabilityMinor, device->device_), "cuDeviceGetAttribute");
  if (s.ok()) {
    s = CudaCall(d.cuDeviceGetAttribute(&device->multiprocessors_, kCuAttrMultiprocessorCount, device->device_),
                 "cuDeviceGetAttribute");
  }
  if (!s.ok()) return s;
  device->sm_arch_ = major * 10 + minor;
  char name[256] = {};
  if (d.cuDeviceGetName(name, sizeof(name) - 1, device->device_) == kCudaSuccess) device->name_ = name;
  devices[index] = device.release();
  return devices[index];
}

absl::Status CudaDevice::Activate() const {
  // The driver keeps the current context per thread; setting the one already current is cheap.
  return CudaCall(driver_->cuCtxSetCurrent(context_), "cuCtxSetCurrent");
}

absl::Status CudaDevice::Synchronize() const {
  absl::Status s = Activate();
  if (!s.ok()) return s;
  return CudaCall(driver_->cuStreamSynchronize(stream_), "cuStreamSynchronize");
}

absl::Status CheckDeviceUsable(Device device) {
  if (device.type != DeviceType::kCuda) return absl::OkStatus();
  absl::StatusOr<CudaDevice*> gpu = CudaDevice::Get(device.index);
  return gpu.ok() ? absl::OkStatus() : gpu.status();
}

}  // namespace dt
