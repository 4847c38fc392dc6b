// jit/cuda_graph.h: CUDA-graph replay of a compiled program, one graph per input-shape set.
//
// A program's launches cost a few microseconds each on the host; replaying them as one CUDA
// graph costs one launch. CudaExecutable (jit/cuda_executable.h) runs a shape set's first call
// directly, recording what it allocates; on the second it reserves those sizes in the caching
// allocator, captures the program's launches (thread-local capture mode, the allocator limited to
// its cache, so capture allocates nothing) and launches the instantiated graph; later calls
// replay it. Before each replay the host walks the program again, without launching, and
// computes every kernel's argument struct: a kernel whose arguments changed (new input or
// output addresses) gets them with cuGraphExecKernelNodeSetParams, never a copy. Outputs (and
// everything a returned view reaches) get fresh buffers each call, so a result the caller
// still holds is never overwritten; intermediates, workspaces and run-time scalars live in
// buffers the graph owns. A library call inside the graph (cuBLAS) can't be re-pointed: the copies
// of jit/capture_copies.h keep its operands still (a returned result is copied out, a moved
// input copied in), and when some other operand moves, the graph is captured again.
#ifndef DYNTRACE_JIT_CUDA_GRAPH_H_
#define DYNTRACE_JIT_CUDA_GRAPH_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "jit/cuda_launch_abi.h"
#include "jit/shape_plans.h"
#include "runtime/cuda_allocator.h"
#include "runtime/cuda_driver.h"
#include "runtime/cuda_index_kernels.h"

namespace dt::jit {

// dyntrace.jit(..., cuda_graphs=...): "auto" replays programs of more than one launch; True
// replays every program that can be captured; False never captures.
enum class CudaGraphMode : uint8_t { kOff, kAuto, kOn };
absl::StatusOr<CudaGraphMode> ParseCudaGraphMode(absl::string_view text);  // "auto" | "true" | "false"

// Process-wide counters, reported by dyntrace.stats().
struct CudaGraphCounters {
  std::atomic<int64_t> captures{0};   // graphs captured and instantiated
  std::atomic<int64_t> replays{0};    // graph launches (the capturing call's included)
  std::atomic<int64_t> patches{0};    // kernel nodes re-pointed at new addresses
  std::atomic<int64_t> refusals{0};   // captures that failed or were refused; those calls ran directly
  std::atomic<int64_t> kernel_launches{0};  // kernels launched one by one, outside any capture
  // Calls run without a graph because their executable already holds graphs for its limit of
  // shape sets (8; a dynamic size that takes many values reaches it).
  std::atomic<int64_t> shape_limit{0};
};
CudaGraphCounters& GlobalCudaGraphCounters();

// A kernel launch as captured: its node in the graph and the arguments it holds now.
struct CapturedLaunch {
  CUfunction function = nullptr;
  unsigned grid = 1, block = 1, shared_bytes = 0;
  CUgraphNode node = nullptr;
  CudaKernelArgs args{};
};

// The tensors a library call (a captured node step) read: replay is valid only while they are
// the same memory with the same layout.
struct CapturedCall {
  std::vector<std::vector<int64_t>> operand_layouts;  // address, sizes, strides per tensor
  std::vector<Tensor> outputs;                        // owned by the graph
  bool aliases_operand = false;  // launched nothing (contiguous of a contiguous tensor): rerun on the host
};

// One shape set's graph and the device memory it owns.
class CudaGraphRecord {
 public:
  explicit CudaGraphRecord(CudaDevice* device) : device_(device) {}
  ~CudaGraphRecord();
  CudaGraphRecord(const CudaGraphRecord&) = delete;
  CudaGraphRecord& operator=(const CudaGraphRecord&) = delete;

  CudaDevice* device_;
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  std::shared_ptr<const ShapePlans::Plan> plan;     // the layouts the graph was captured for
  std::vector<const void*> input_addresses;         // per graph input, at the capture
  std::vector<CapturedLaunch> launches;             // in launch order
  absl::flat_hash_map<int, CapturedCall> calls;     // by step index
  absl::flat_hash_map<int, Tensor> intermediates;   // by value id
  absl::flat_hash_map<int, Tensor> workspaces;      // by kernel index
  Tensor scalar_buffer;                             // one 8-byte slot per run-time scalar operand
  std::vector<char> scalar_image;                   // its host-side contents for the next replay
  // What the buffer holds: uploaded only when the numbers change, since a copy from pageable
  // memory waits for the stream.
  std::vector<char> uploaded_image;
  // Blocks the capture's ops freed (their temporaries): the graph still writes them.
  std::vector<CudaHeldBlock> held_blocks;
  // Random draws (runtime/cuda_index_kernels.h's CapturedRandomDraws): the device state
  // {seed, counter base} they read, the counters one launch uses, and what the state will hold
  // when the next launch starts (its initial mismatch makes the first launch upload).
  Tensor random_state;
  uint64_t random_counters = 0;
  std::array<uint64_t, 2> random_next{~uint64_t{0}, ~uint64_t{0}};
  // Index checks of the capture (runtime/cuda_index_kernels.h): those on the caller's inputs
  // run before each launch, those on values the graph computes are read back after it.
  GraphIndexChecks index_checks;
};

// The layout fingerprint of `t` that CapturedCall compares.
std::vector<int64_t> LayoutOf(const Tensor& t);

}  // namespace dt::jit

#endif  // DYNTRACE_JIT_CUDA_GRAPH_H_
