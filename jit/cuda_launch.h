// jit/cuda_launch.h: how the CUDA runtime launches what jit/cuda_codegen.h generated.
//
// The runtime computes a LaunchGeometry exactly as the CPU backend does (jit/launch_geometry.h),
// then asks PlanCudaLaunch for the launches and PackCudaArgs for the by-value argument struct
// (jit/cuda_launch_abi.h). Nothing here needs a GPU, so the rules are unit-tested on any machine.
//
// The rules (what PlanCudaLaunch encodes):
//  - Pointwise kernel `k`: 1-D grid, kPointwiseBlock threads, grid = enough blocks for the
//    work (rows * n threads), capped at 32 blocks per SM (the loop is grid-stride, so any grid
//    is correct). No dynamic shared memory. ChooseLaunchPath makes it `k_vector`, with a thread
//    per vector_width elements, when the arguments allow (VectorPathReady).
//  - Row kernel `k`: 1-D grid of min(rows, 32 per SM) blocks (grid-stride over rows), a block
//    of 32..kMaxRowBlock threads, always a multiple of 32 (the shuffle reduction requires it).
//    A row that fits the cached path (n <= row_slots * kMaxCachedRowBlock) launches `k_cached`
//    with the smallest power-of-two block with n <= row_slots * block when rows fill the GPU
//    (2 per SM), else one thread per vector_width elements (up to kMaxCachedRowBlock); then
//    ChooseLaunchPath makes it `k_vector` when the arguments allow (VectorPathReady), else
//    keeps `k_cached` within kStridedRowBlockBound threads (its launch bound: a row longer than
//    row_slots * kStridedRowBlockBound takes `k`). Longer rows launch `k`.
//    Shared memory is static only (CudaKernelInfo::static_shared_bytes).
//  - Split row kernel (has_split, few rows, long rows): two launches on one stream, both with
//    the same CudaKernelArgs whose `split` is set and whose `workspace` points to
//    workspace_bytes of device memory (nothing to initialise):
//      1. `k_split_partial`: rows * split chunks (grid-stride), each block folds one chunk of
//         one row and writes its partial accumulators, and writes the chunk's full-size outputs;
//      2. `k_split_finish`: one block per row folds the row's `split` partials and writes the
//         row-level outputs.
//    Partial q (reduction ordinal) of (row, part) lives at workspace byte offset
//    ((q * rows + row) * split + part) * kCudaPartialSlotBytes.
//  - Nothing is launched when the domain is empty (rows == 0, or a pointwise kernel's n == 0).
#ifndef DYNTRACE_JIT_CUDA_LAUNCH_H_
#define DYNTRACE_JIT_CUDA_LAUNCH_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "jit/cuda_codegen.h"
#include "jit/cuda_launch_abi.h"
#include "jit/launch_geometry.h"

namespace dt::jit {

inline constexpr int kPointwiseBlock = 256;
inline constexpr int kMaxRowBlock = 256;
// The cached row path may use up to this many threads (every kernel is __launch_bounds__(1024)).
inline constexpr int kMaxCachedRowBlock = 1024;

struct CudaLaunch {
  std::string function;  // the __global__ function's name in the module
  int64_t grid = 1;      // blocks, 1-D (gridDim.x)
  int block = 32;        // threads, 1-D (blockDim.x)
  int dynamic_shared_bytes = 0;
};

struct CudaLaunchPlan {
  std::vector<CudaLaunch> launches;  // in order, on one stream
  int64_t split = 1;                 // CudaKernelArgs::split
  int64_t workspace_bytes = 0;       // CudaKernelArgs::workspace must point to this many bytes
};

// `rows` and `n` from the kernel's LaunchGeometry; `sm_count` of the device.
CudaLaunchPlan PlanCudaLaunch(const CudaKernelInfo& kernel, int64_t rows, int64_t n, int sm_count);

// Whether `args` meet `kernel`'s vector path's precondition: every full-size operand as
// CudaKernelInfo::vector_checks asks (unit inner stride, or zero for one the trace saw
// broadcast; a base aligned to the access; outer strides keeping each row aligned), and for a
// row kernel rows of whole vectors (n % vector_width == 0).
bool VectorPathReady(const CudaKernelInfo& kernel, const CudaKernelArgs& args);

// Turns a plan's `k_cached` (row kernel) or `k` (pointwise kernel, with its grid for a thread
// per vector) launch into `k_vector` when VectorPathReady(kernel, args).
void ChooseLaunchPath(const CudaKernelInfo& kernel, const CudaKernelArgs& args, int sm_count, CudaLaunchPlan* plan);

// The kernel's argument struct for `geometry` and one device address per operand, with each
// operand's bytes per element where known (`itemsizes` empty or data.size() long).
// REQUIRES: data.size() == the kernel's operand count. Fails when the geometry exceeds the ABI.
[[nodiscard]] absl::StatusOr<CudaKernelArgs> PackCudaArgs(const LaunchGeometry& geometry,
                                                          absl::Span<char* const> data,
                                                          const CudaLaunchPlan& plan, char* workspace,
                                                          absl::Span<const int64_t> itemsizes = {});

}  // namespace dt::jit

#endif  // DYNTRACE_JIT_CUDA_LAUNCH_H_
