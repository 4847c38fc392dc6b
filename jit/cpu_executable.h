// jit/cpu_executable.h: a graph compiled for the CPU, ready to run on real tensors.
//
// Build() schedules the graph, prints its kernels as C++, and loads them through the kernel
// cache (and, under DYNTRACE_NVRTC_CHECK, also compiles them for CUDA: jit/nvrtc_check.h). Run() walks the program: nodes the scheduler left alone run through the eager runtime,
// kernels are called on buffers from the caching allocator. The sizes and strides of every value
// come from a meta-device run of the graph, kept per input-shape set, so one compilation serves
// every size; outputs get exactly the layout eager execution would give them.
#ifndef DYNTRACE_JIT_CPU_EXECUTABLE_H_
#define DYNTRACE_JIT_CPU_EXECUTABLE_H_

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "jit/cpp_codegen.h"
#include "jit/kernel_cache.h"
#include "jit/kernel_ir.h"
#include "jit/shape_plans.h"

namespace dt::jit {

class CpuExecutable {
 public:
  // Fails when the graph can't be compiled (no compiler, a compiler error ...): callers then
  // run the graph eagerly and log the reason.
  [[nodiscard]] static absl::StatusOr<std::shared_ptr<CpuExecutable>> Build(const Graph& graph,
                                                                          absl::string_view name);

  // REQUIRES: `inputs` match the graph's inputs (as its guards ensure).
  [[nodiscard]] absl::StatusOr<std::vector<Tensor>> Run(const std::vector<Tensor>& inputs,
                                                        const std::vector<Scalar>& scalars) {
    return RunWith(inputs, nullptr, scalars);
  }
  // Takes the inputs over: each is then freed after its last use (a backward graph's saved values).
  [[nodiscard]] absl::StatusOr<std::vector<Tensor>> Run(std::vector<Tensor>&& inputs,
                                                        const std::vector<Scalar>& scalars) {
    return RunWith(inputs, &inputs, scalars);
  }

  const Program& program() const { return program_; }
  // The generated kernels (without the pasted runtime headers).
  const std::string& kernel_source() const { return kernel_source_; }
  int num_kernels() const { return static_cast<int>(program_.kernels.size()); }
  CacheSource cache_source() const { return cache_source_; }
  double build_seconds() const { return build_seconds_; }

 private:
  struct KernelEntry {
    KernelFn fixed = nullptr;
    KernelFn any = nullptr;
  };

  // `owned`: the caller's `inputs` themselves, moved into the run when given (else copied).
  absl::StatusOr<std::vector<Tensor>> RunWith(const std::vector<Tensor>& inputs, std::vector<Tensor>* owned,
                                              const std::vector<Scalar>& scalars);
  absl::Status RunKernel(int index, const ShapePlans::Plan& plan, std::vector<Tensor>& env,
                         const std::vector<Scalar>& scalars) const;

  Program program_;
  std::string kernel_source_;
  std::vector<std::shared_ptr<LoadedLibrary>> libraries_;  // one per translation unit
  std::vector<KernelEntry> entries_;
  // Per graph input, whether an in-place node writes its storage; empty unless some kernel
  // stores an in-place write (ScheduleOptions::fuse_in_place_writes).
  std::vector<bool> written_inputs_;
  // Per step, the values Run stops holding after it (their last use).
  std::vector<std::vector<ValueId>> release_after_;
  CacheSource cache_source_ = CacheSource::kMemory;
  double build_seconds_ = 0;
  std::unique_ptr<ShapePlans> plans_;
};

}  // namespace dt::jit

#endif  // DYNTRACE_JIT_CPU_EXECUTABLE_H_
