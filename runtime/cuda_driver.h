// runtime/cuda_driver.h: finding the CUDA driver at run time.
//
// dyntrace never links CUDA: libcuda is opened with dlopen on first use, so one build runs on
// machines with and without a GPU. ProbeCuda() reports what was found, with a reason a person can
// act on when nothing was.
#ifndef DYNTRACE_RUNTIME_CUDA_DRIVER_H_
#define DYNTRACE_RUNTIME_CUDA_DRIVER_H_

#include <string>

#include "absl/status/status.h"
#include "runtime/device.h"

namespace dt {

struct CudaProbe {
  bool available = false;
  int device_count = 0;
  std::string reason;  // why CUDA is unavailable; empty when available
};

// Loads the driver once and caches the answer. Thread-safe.
const CudaProbe& ProbeCuda();

// OK for CPU and meta; for CUDA an error explaining why tensors cannot be placed there (no driver,
// no device, or CUDA tensors not supported by this build).
absl::Status CheckDeviceUsable(Device device);

}  // namespace dt

#endif  // DYNTRACE_RUNTIME_CUDA_DRIVER_H_
