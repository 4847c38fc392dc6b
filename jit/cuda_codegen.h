// jit/cuda_codegen.h: prints a Program's kernels as CUDA C++ translation units for NVRTC.
//
// The same kernel IR the C++ generator prints (jit/kernel_ir.h), through the same KernelPrinter
// and the same pasted runtime headers, so element results match eager and the CPU backend.
// Every kernel function is `extern "C" __global__ void NAME(const dt::CudaKernelArgs args)`
// (jit/cuda_launch_abi.h); jit/cuda_launch.h turns a CudaKernelInfo plus a LaunchGeometry into
// the launches. Per Kernel `k` of the IR the translation unit holds:
//
//  - pointwise kernels: `k`, a grid-stride loop over the rows x n domain. When the trace saw unit
//    (or zero) innermost strides for every full-size operand, also `k_vector`, which the
//    launcher picks (cuda_launch.h's VectorPathReady) when the actual inner strides match, the
//    stride-1 operands' base addresses are aligned to 16 bytes (or their whole vector, when
//    smaller) and their outer strides keep every row aligned (CudaKernelInfo::vector_checks);
//    each thread then handles `vector_width` consecutive elements of a row, 32 bytes of the
//    widest operand as two 16-byte accesses (the row's ragged end element by element). One
//    function per path: NVRTC's time follows the length of a function, and the units compile
//    side by side.
//  - row kernels (with reductions): `k`, one block per row (grid-stride over rows). Each
//    reduction is a pass over the row: per-thread partials in the accumulator dtype, then warp
//    shuffles and one shared-memory exchange across warps, so every thread ends with the row's
//    value; the full-size outputs are the last pass. A row of at most row_slots * blockDim.x
//    elements takes the cached path: each thread first loads its slots of every operand that
//    more than one pass reads (softmax's and layer_norm's input) into registers, 16 bytes at a
//    time when every operand's layout allows (as for pointwise kernels), and the passes read the
//    registers, so the row comes from memory once with all its loads in flight together.
//    Longer rows take the general path, which reads the row again in each pass (from L2). Each
//    path is a function of its own, chosen by the launcher (cuda_launch.h): `k` the general
//    one, `k_cached` the cached one with element-by-element loads at any stride, and, when the
//    trace saw unit strides, `k_vector` the cached one with 16-byte loads, for rows of whole
//    vectors whose operands are all aligned (CudaKernelInfo::vector_checks).
//  - row kernels whose reductions all read only the row's elements (no pass depends on another
//    reduction, nor does a full-size output): also `k_split_partial` and `k_split_finish`, which
//    spread a few long rows (a reduction to a scalar) over many blocks. See cuda_launch.h.
#ifndef DYNTRACE_JIT_CUDA_CODEGEN_H_
#define DYNTRACE_JIT_CUDA_CODEGEN_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "jit/kernel_ir.h"
#include "jit/schedule.h"

namespace dt::jit {

// One full-size operand's part of a vector path's precondition (VectorPathReady checks it):
// inner stride 1, a base aligned to `bytes`, outer strides multiples of `elements`; or, for an
// operand the trace saw broadcast along the row, inner stride 0.
struct CudaVectorCheck {
  int operand = 0;
  int64_t elements = 1;
  int64_t bytes = 1;
  bool broadcast = false;
};

// What a launcher needs to know about one generated kernel, besides its run-time geometry.
struct CudaKernelInfo {
  std::string name;                 // the __global__ function `name`: the IR kernel's, or an earlier one's with its code
  bool is_row_kernel = false;       // one block per row (reductions) vs a flat grid-stride loop
  bool has_split = false;           // `name`_split_partial and `name`_split_finish exist
  int num_reductions = 0;           // workspace slots per (row, split block)
  int vector_width = 1;             // elements per thread on the vector path; 1: no vector path
  // Row kernels: rows of at most row_slots * blockDim.x elements take the cached path, which
  // reads each operand from memory once (PlanCudaLaunch sizes the block for it).
  int row_slots = 0;
  // Row kernels with vector_width > 1: what `name`_vector requires of every full-size operand.
  std::vector<CudaVectorCheck> vector_checks;
  int static_shared_bytes = 0;      // declared __shared__ memory (no dynamic shared memory is used)
  std::vector<std::string> functions;  // every __global__ function the kernel defines
};

// The most threads a row kernel's strided cached function (`k_cached`) is launched with: its
// __launch_bounds__, which leaves it 128 registers (the other functions are bound to 1024).
inline constexpr int kStridedRowBlockBound = 512;

struct CudaProgram {
  // Translation units ready for NVRTC, each with the pasted headers and some of the kernels:
  // separate units compile in parallel and are cached one by one (KernelCache::LoadCubins).
  std::vector<std::string> sources;
  // By __global__ function name: the index in `sources` defining it (a kernel's functions may
  // sit in different units, which compile side by side).
  absl::flat_hash_map<std::string, int> unit_of_function;
  std::string readable;  // the kernels without the pasted headers (logs, dyntrace.kernels())
  // One per Program kernel, in order. A kernel with the same code as an earlier one is emitted
  // once: its entry is a copy of that one's, naming that one's functions.
  std::vector<CudaKernelInfo> kernels;
};

// Fails (kUnimplemented) for a kernel beyond the launch ABI's limits (more than
// kCudaMaxOperands operands, or a domain of rank above kCudaMaxOuterRank + 1).
// `max_units`: how many translation units the kernels' functions may be spread over (the threads
// that will compile them). Each unit pays for parsing the headers again (about 0.05-0.09 s of
// NVRTC's time, beside 0.15-0.3 s for a row kernel's function), so a unit gets at least
// kMinUnitKernelBytes of kernel text unless a function alone is larger: a small graph stays one
// unit, a large one is spread so that its units take similar times, one function each when
// there are threads enough.
inline constexpr size_t kMinUnitKernelBytes = 2048;
[[nodiscard]] absl::StatusOr<CudaProgram> EmitCuda(const Program& program, int max_units = 1);

// How the cuda backend schedules a graph: fused in-place writes, a write no kernel takes as a
// kernel of its own, kernels within the launch ABI's operands.
// `device`: where it runs (written-out attention with dropout draws its keep mask there).
ScheduleOptions CudaScheduleOptions(std::optional<Device> device = std::nullopt);
// `graph` (a cpu backend's decomposed graph too) scheduled and printed as the cuda backend
// would compile it: what dyntrace.kernels(fn, target="cuda") shows and DYNTRACE_NVRTC_CHECK
// compiles.
[[nodiscard]] absl::StatusOr<CudaProgram> EmitCudaFor(const Graph& graph, int max_units = 1);

// The launch ABI header as pasted into every CUDA translation unit (built from jit/).
const char* CudaLaunchAbiSource();

}  // namespace dt::jit

#endif  // DYNTRACE_JIT_CUDA_CODEGEN_H_
