#include "runtime/cuda_driver.h"

#include <dlfcn.h>

#include "absl/strings/str_format.h"
#include "runtime/errors.h"

namespace dt {

const CudaProbe& ProbeCuda() {
  static const CudaProbe* probe = [] {
    auto* p = new CudaProbe();
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      p->reason = absl::StrFormat("the NVIDIA driver library libcuda.so.1 could not be loaded (%s)",
                                  dlerror());
      return p;
    }
    using InitFn = int (*)(unsigned);
    using CountFn = int (*)(int*);
    auto init = reinterpret_cast<InitFn>(dlsym(lib, "cuInit"));
    auto count = reinterpret_cast<CountFn>(dlsym(lib, "cuDeviceGetCount"));
    if (init == nullptr || count == nullptr) {
      p->reason = "libcuda.so.1 lacks cuInit/cuDeviceGetCount";
      return p;
    }
    if (int rc = init(0); rc != 0) {
      p->reason = absl::StrFormat("cuInit failed with CUDA error %d (no usable GPU?)", rc);
      return p;
    }
    if (int rc = count(&p->device_count); rc != 0 || p->device_count == 0) {
      p->reason = "the CUDA driver reports no devices";
      return p;
    }
    p->available = true;
    return p;  // the library stays loaded for the process's lifetime
  }();
  return *probe;
}

absl::Status CheckDeviceUsable(Device device) {
  if (device.type != DeviceType::kCuda) return absl::OkStatus();
  const CudaProbe& probe = ProbeCuda();
  if (!probe.available) {
    return Error(ErrorKind::kRuntime,
                 absl::StrFormat("CUDA is not available: %s; use device='cpu'", probe.reason));
  }
  if (device.index >= probe.device_count) {
    return Error(ErrorKind::kValue, absl::StrFormat("device cuda:%d does not exist (%d CUDA devices)",
                                                    device.index, probe.device_count));
  }
  return Error(ErrorKind::kNotImplemented,
               "CUDA tensors are not supported by this build yet (the CUDA backend is pending); "
               "use device='cpu'");
}

}  // namespace dt
