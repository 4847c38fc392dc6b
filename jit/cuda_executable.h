// jit/cuda_executable.h: a graph compiled for one CUDA device, ready to run on its tensors.
//
// Build() schedules the graph exactly as the CPU backend does, prints the kernels as CUDA C++
// (jit/cuda_codegen.h), compiles them with NVRTC for the device's own architecture through the
// kernel cache (CUBINs on disk beside the CPU libraries), and loads the module. Run() walks the
// program on the device's stream: kernels launch with a by-value argument struct
// (jit/cuda_launch_abi.h) on buffers from the caching device allocator; nodes the scheduler left
// alone (views, data movement, matmul) run eagerly. Launches are asynchronous: results are
// ready once the stream reaches them, which every host read (copies, item()) waits for. With
// CUDA graphs on (jit/cuda_graph.h), a shape set's launches are captured on its second call and
// replayed as one graph from then on.
#ifndef DYNTRACE_JIT_CUDA_EXECUTABLE_H_
#define DYNTRACE_JIT_CUDA_EXECUTABLE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "jit/cuda_codegen.h"
#include "jit/cuda_graph.h"
#include "jit/kernel_cache.h"
#include "jit/kernel_ir.h"
#include "jit/shape_plans.h"
#include "runtime/cuda_driver.h"

namespace dt::jit {

class CudaExecutable {
 public:
  // Fails when the graph can't be compiled or loaded for `device` (no NVRTC, an NVRTC error, a
  // module the driver rejects ...): callers then run the graph eagerly and log the reason.
  [[nodiscard]] static absl::StatusOr<std::shared_ptr<CudaExecutable>> Build(const Graph& graph,
                                                                           absl::string_view name,
                                                                           Device device,
                                                                           CudaGraphMode graphs = CudaGraphMode::kAuto);

  // REQUIRES: `inputs` match the graph's inputs (as its guards ensure), on this device.
  // `into`, when given, holds one tensor per graph output (undefined: allocate one) that the
  // kernel computing that output writes into instead of a fresh buffer: eager in-place ops and
  // copies into views (jit/cuda_eager_ops.h). REQUIRES then: CUDA graphs off, and each given
  // tensor has its output's sizes and dtype.
  [[nodiscard]] absl::StatusOr<std::vector<Tensor>> Run(const std::vector<Tensor>& inputs,
                                                        const std::vector<Scalar>& scalars,
                                                        const std::vector<Tensor>& into = {});

  CudaExecutable() = default;
  CudaExecutable(const CudaExecutable&) = delete;
  CudaExecutable& operator=(const CudaExecutable&) = delete;
  ~CudaExecutable();

  const Program& program() const { return program_; }
  // The generated kernels (without the pasted headers).
  const std::string& kernel_source() const { return kernel_source_; }
  int num_kernels() const { return static_cast<int>(program_.kernels.size()); }
  double build_seconds() const { return build_seconds_; }
  // Why this program is never captured (empty when it can be), for the kernels log.
  const std::string& graph_refusal() const { return graph_refusal_; }

 private:
  enum class Mode { kDirect, kCapture, kReplay };
  // One walk over the program: launches (kDirect), launches under stream capture (kCapture),
  // or only computes and patches arguments for a graph launch (kReplay).
  struct Walk {
    Mode mode = Mode::kDirect;
    CudaGraphRecord* record = nullptr;
    size_t next_launch = 0;
    size_t next_scalar_slot = 0;
    const std::vector<Tensor>* into = nullptr;  // direct walks only: see Run()
  };
  // What one input-shape set has seen.
  struct ShapeState {
    int64_t calls = 0;
    std::vector<size_t> warmup_allocations;
    std::unique_ptr<CudaGraphRecord> record;
    int recaptures = 0;
    bool refused = false;
  };

  absl::StatusOr<std::vector<Tensor>> RunLocked(const std::vector<Tensor>& inputs, const std::vector<Scalar>& scalars,
                                                const std::vector<Tensor>& into) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status WalkProgram(Walk& walk, const std::shared_ptr<const ShapePlans::Plan>& plan, std::vector<Tensor>& env,
                           const std::vector<Scalar>& scalars) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status RunKernel(Walk& walk, int index, const ShapePlans::Plan& plan, std::vector<Tensor>& env,
                         const std::vector<Scalar>& scalars) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status RunNodeStep(Walk& walk, int step, std::vector<Tensor>& env, const std::vector<Scalar>& scalars)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<Tensor> OutputBuffer(Walk& walk, int value, const Tensor& meta);
  absl::StatusOr<std::unique_ptr<CudaGraphRecord>> Capture(ShapeState& state,
                                                           const std::shared_ptr<const ShapePlans::Plan>& plan,
                                                           std::vector<Tensor>& env, const std::vector<Scalar>& scalars)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<CUfunction> Function(const std::string& name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Makes `scheduled` this executable's program: the capture copies it needs
  // (jit/capture_copies.h), its kernels compiled and loaded in place of the previous program's.
  absl::Status Compile(Program scheduled) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After a replay failed: stages the inputs a library call reads that moved since `record`'s
  // capture, recompiling the program with their copies and dropping every graph. False when
  // none did (then some other operand moved, and the graph is captured again).
  // The record's index checks: which storage is the caller's (checked before each launch), and
  // the device slots of the checks captured into the graph (runtime/cuda_index_kernels.h).
  absl::Status PrepareIndexChecks(const std::vector<Tensor>& env, CudaGraphRecord& record) const;
  absl::StatusOr<bool> StageMovedInputs(const std::vector<Tensor>& inputs, const CudaGraphRecord& record)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status UnloadModules() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Compiles (or finds cached) each translation unit's CUBIN and loads it as a module of its own.
  absl::Status LoadModules(absl::string_view name);
  void DecideGraphUse(CudaGraphMode mode);
  bool Escapes(int value) const { return value >= 0 && value < static_cast<int>(escaping_.size()) && escaping_[value]; }

  std::string name_;
  CudaGraphMode graph_mode_ = CudaGraphMode::kAuto;
  Graph base_graph_;  // scheduled (decomposed), before capture copies: what a restage starts from
  std::vector<bool> stageable_inputs_;  // see CaptureCopies
  std::vector<int> staged_inputs_;      // inputs copied into the graph (they moved once)
  Program program_;
  CudaProgram cuda_;
  std::string kernel_source_;
  CudaDevice* device_ = nullptr;
  Device device_id_;
  std::vector<std::shared_ptr<const std::string>> cubins_;  // one per translation unit (CudaProgram::sources)
  std::vector<CUmodule> modules_;
  absl::flat_hash_map<std::string, CUmodule> module_of_function_;
  double build_seconds_ = 0;
  std::unique_ptr<ShapePlans> plans_;
  std::vector<std::vector<ValueId>> release_after_;  // per step: values direct walks drop after it
  // Per graph input, whether an in-place node writes its storage; empty unless some kernel
  // stores an in-place write.
  std::vector<bool> written_inputs_;

  bool use_graphs_ = false;
  std::string graph_refusal_;
  std::vector<bool> escaping_;  // by value id: the value, or a view of it, is a graph output
  size_t scalar_operands_ = 0;  // run-time scalar operands across all kernels
  bool draws_random_ = false;   // some node draws random numbers (its graphs own a generator state)

  absl::Mutex mu_;
  absl::flat_hash_map<std::string, CUfunction> functions_ ABSL_GUARDED_BY(mu_);
  // By input layout (sizes, strides, dtypes); at most kMaxGraphShapes hold graphs.
  absl::flat_hash_map<std::vector<int64_t>, ShapeState> shapes_ ABSL_GUARDED_BY(mu_);
  int graphs_held_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace dt::jit

#endif  // DYNTRACE_JIT_CUDA_EXECUTABLE_H_
