#include "jit/cuda_launch.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_format.h"

namespace dt::jit {
namespace {

// Blocks per SM worth launching for a grid-stride loop: enough to hide latency.
constexpr int64_t kBlocksPerSm = 32;
// A row shorter than this is folded by one block, however few rows there are.
constexpr int64_t kMinSplitRow = 16384;
// Elements each thread of a split block should fold, at least.
constexpr int64_t kSplitElementsPerThread = 16;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// A power of two of at least 32 threads, enough for `n` items, at most `max_block`.
int RowBlock(int64_t n, int max_block) {
  int block = 32;
  while (block < max_block && block < n) block *= 2;
  return block;
}

// Blocks of kPointwiseBlock threads for `threads` threads of a grid-stride loop.
int64_t PointwiseGrid(int64_t threads, int sm_count) {
  return std::min(std::max<int64_t>(1, sm_count) * kBlocksPerSm, CeilDiv(threads, kPointwiseBlock));
}

}  // namespace

CudaLaunchPlan PlanCudaLaunch(const CudaKernelInfo& kernel, int64_t rows, int64_t n, int sm_count) {
  CudaLaunchPlan plan;
  const int64_t max_grid = std::max<int64_t>(1, sm_count) * kBlocksPerSm;
  if (rows <= 0 || (!kernel.is_row_kernel && n <= 0)) return plan;
  if (!kernel.is_row_kernel) {
    plan.launches.push_back({kernel.name, PointwiseGrid(rows * n, sm_count), kPointwiseBlock, 0});
    return plan;
  }
  // Split when the rows alone would leave most SMs idle and each is long enough to share.
  const int64_t wanted_blocks = std::max<int64_t>(1, sm_count) * 2;
  if (kernel.has_split && rows < wanted_blocks && n >= kMinSplitRow) {
    const int64_t by_length = n / (kMaxRowBlock * kSplitElementsPerThread);
    plan.split = std::max<int64_t>(2, std::min(by_length, CeilDiv(wanted_blocks * 2, rows)));
    plan.workspace_bytes = rows * plan.split * kernel.num_reductions * kCudaPartialSlotBytes;
    plan.launches.push_back({kernel.name + "_split_partial", std::min(max_grid, rows * plan.split), kMaxRowBlock, 0});
    plan.launches.push_back({kernel.name + "_split_finish", std::min(max_grid, rows), RowBlock(plan.split, kMaxRowBlock), 0});
    return plan;
  }
  // The cached path: the fewest threads whose slots hold the row when the rows alone fill the
  // GPU (more rows in flight per SM), else a thread per vector so that a few rows still spread
  // over many threads.
  if (kernel.row_slots > 0 && n <= kernel.row_slots * int64_t{kMaxCachedRowBlock}) {
    const int64_t per_thread = rows >= wanted_blocks ? kernel.row_slots : std::max(1, kernel.vector_width);
    plan.launches.push_back(
        {kernel.name + "_cached", std::min(max_grid, rows), RowBlock(CeilDiv(n, per_thread), kMaxCachedRowBlock), 0});
    return plan;
  }
  plan.launches.push_back({kernel.name, std::min(max_grid, rows), RowBlock(n, kMaxRowBlock), 0});
  return plan;
}

bool VectorPathReady(const CudaKernelInfo& kernel, const CudaKernelArgs& args) {
  if (kernel.vector_width <= 1) return false;
  if (kernel.is_row_kernel && args.n % kernel.vector_width != 0) return false;
  for (const CudaVectorCheck& check : kernel.vector_checks) {
    const int k = check.operand;
    if (check.broadcast) {
      if (args.inner_strides[k] != 0) return false;
      continue;
    }
    if (args.inner_strides[k] != 1 || reinterpret_cast<uintptr_t>(args.data[k]) % check.bytes != 0) return false;
    for (int64_t d = 0; d < args.outer_rank; ++d) {
      if (args.outer_strides[k][d] % check.elements != 0) return false;
    }
  }
  return true;
}

void ChooseLaunchPath(const CudaKernelInfo& kernel, const CudaKernelArgs& args, int sm_count, CudaLaunchPlan* plan) {
  if (plan->launches.size() != 1) return;
  CudaLaunch& launch = plan->launches[0];
  const bool vector = VectorPathReady(kernel, args);
  if (!kernel.is_row_kernel) {
    if (!vector) return;
    launch.function = kernel.name + "_vector";
    launch.grid = PointwiseGrid(args.rows * CeilDiv(args.n, kernel.vector_width), sm_count);
    return;
  }
  if (launch.function != kernel.name + "_cached") return;
  if (vector) {
    launch.function = kernel.name + "_vector";
    return;
  }
  // The strided cached function takes at most kStridedRowBlockBound threads: its slots must
  // still hold the row, else the row takes the general path.
  const int64_t n = args.n;
  if (n > kernel.row_slots * int64_t{kStridedRowBlockBound}) {
    launch.function = kernel.name;
    launch.block = RowBlock(n, kMaxRowBlock);
    return;
  }
  if (launch.block > kStridedRowBlockBound) launch.block = kStridedRowBlockBound;
  if (n > kernel.row_slots * int64_t{launch.block}) launch.block = RowBlock(CeilDiv(n, kernel.row_slots), kStridedRowBlockBound);
}

absl::StatusOr<CudaKernelArgs> PackCudaArgs(const LaunchGeometry& geometry, absl::Span<char* const> data,
                                            const CudaLaunchPlan& plan, char* workspace,
                                            absl::Span<const int64_t> itemsizes) {
  const int64_t rank = geometry.outer_rank();
  if (rank > kCudaMaxOuterRank || data.size() > static_cast<size_t>(kCudaMaxOperands)) {
    return absl::UnimplementedError(absl::StrFormat("a launch of %d outer dims and %d operands exceeds the CUDA ABI",
                                                    rank, data.size()));
  }
  CudaKernelArgs args{};
  args.outer_rank = rank;
  args.rows = 1;
  for (int64_t d = 0; d < rank; ++d) {
    args.outer_sizes[d] = geometry.outer_sizes[d];
    args.rows *= geometry.outer_sizes[d];
  }
  args.n = geometry.inner_size;
  for (size_t k = 0; k < data.size(); ++k) {
    args.data[k] = data[k];
    for (int64_t d = 0; d < rank; ++d) args.outer_strides[k][d] = geometry.strides[k * (rank + 1) + d];
    args.inner_strides[k] = geometry.inner_stride(k);
    args.itemsizes[k] = k < itemsizes.size() ? itemsizes[k] : 0;
  }
  args.split = plan.split;
  args.workspace = workspace;
  return args;
}

}  // namespace dt::jit
