// jit/cuda_executable.h: a graph compiled for one CUDA device, ready to run on its tensors.
//
// Build() schedules the graph exactly as the CPU backend does, prints the kernels as CUDA C++
// (jit/cuda_codegen.h), compiles them with NVRTC for the device's own architecture through the
// kernel cache (CUBINs on disk beside the CPU libraries), and loads the module. Run() walks the
// program on the device's stream: kernels launch with a by-value argument struct
// (jit/cuda_launch_abi.h) on buffers from the caching device allocator; nodes the scheduler left
// alone (views, data movement, matmul) run eagerly. Launches are asynchronous: results are
// ready once the stream reaches them, which every host read (copies, item()) waits for.
#ifndef DYNTRACE_JIT_CUDA_EXECUTABLE_H_
#define DYNTRACE_JIT_CUDA_EXECUTABLE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "jit/cuda_codegen.h"
#include "jit/kernel_cache.h"
#include "jit/kernel_ir.h"
#include "jit/shape_plans.h"
#include "runtime/cuda_driver.h"

namespace dt::backend {

class CudaExecutable {
 public:
  // Fails when the graph can't be compiled or loaded for `device` (no NVRTC, an NVRTC error, a
  // module the driver rejects ...): callers then run the graph eagerly and log the reason.
  [[nodiscard]] static absl::StatusOr<std::shared_ptr<CudaExecutable>> Build(const Graph& graph,
                                                                           absl::string_view name,
                                                                           Device device);

  // REQUIRES: `inputs` match the graph's inputs (as its guards ensure), on this device.
  [[nodiscard]] absl::StatusOr<std::vector<Tensor>> Run(const std::vector<Tensor>& inputs,
                                                        const std::vector<Scalar>& scalars);

  CudaExecutable() = default;
  CudaExecutable(const CudaExecutable&) = delete;
  CudaExecutable& operator=(const CudaExecutable&) = delete;
  ~CudaExecutable();

  const Program& program() const { return program_; }
  // The generated kernels (without the pasted headers).
  const std::string& kernel_source() const { return kernel_source_; }
  int num_kernels() const { return static_cast<int>(program_.kernels.size()); }
  double build_seconds() const { return build_seconds_; }

 private:
  absl::Status RunKernel(int index, const ShapePlans::Plan& plan, std::vector<Tensor>& env,
                         const std::vector<Scalar>& scalars);
  absl::StatusOr<CUfunction> Function(const std::string& name);

  Program program_;
  CudaProgram cuda_;
  std::string kernel_source_;
  CudaDevice* device_ = nullptr;
  Device device_id_;
  std::shared_ptr<const std::string> cubin_;
  CUmodule module_ = nullptr;
  absl::flat_hash_map<std::string, CUfunction> functions_;
  double build_seconds_ = 0;
  std::unique_ptr<ShapePlans> plans_;
};

}  // namespace dt::backend

#endif  // DYNTRACE_JIT_CUDA_EXECUTABLE_H_
