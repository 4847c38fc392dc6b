// jit/cuda_launch_abi.h: the one argument every generated CUDA kernel takes.
//
// This header is compiled twice: by the host build (the runtime fills the struct) and by NVRTC
// (jit:cuda_launch_abi_cc pastes it into every generated CUDA translation unit), so both sides
// share one layout by construction; the static_asserts pin it.
//
// Every kernel is `extern "C" __global__ void NAME(const dt::CudaKernelArgs args)`: the struct
// is passed BY VALUE, so its bytes are the kernel node's parameters, and a CUDA graph's node can
// be re-pointed at new tensors with cuGraphExecKernelNodeSetParams without re-capture. The
// fields mirror the CPU kernels' (outer_rank, outer_sizes, n, data, strides) arguments computed
// by jit/launch_geometry; jit/cuda_launch.h fills them and says how each kernel is launched.
//
// Strides and sizes are in ELEMENTS of the operand's dtype. An operand that is a run-time Python
// scalar is a pointer to one device-resident element of its dtype, like a 0-d tensor.
#ifndef DYNTRACE_JIT_CUDA_LAUNCH_ABI_H_
#define DYNTRACE_JIT_CUDA_LAUNCH_ABI_H_

#include "runtime/kernel_portability.h"

namespace dt {

// Outer (kept) dims after launch_geometry merged them; a domain of higher rank is rejected by
// the generator, which is static knowledge (a kernel's domain rank is fixed by its guards).
inline constexpr int kCudaMaxOuterRank = 8;
// Operands (inputs, outputs and scalars) of one kernel.
inline constexpr int kCudaMaxOperands = 32;
// Bytes of workspace a split reduction needs per (row, block of that row, reduction): every
// accumulator type fits in 8 bytes.
inline constexpr int kCudaPartialSlotBytes = 8;

struct CudaKernelArgs {
  int64_t outer_rank;                        // number of outer dims in use, <= kCudaMaxOuterRank
  int64_t outer_sizes[kCudaMaxOuterRank];    // [0, outer_rank): the outer dims, outermost first
  int64_t rows;                              // product of outer_sizes[0, outer_rank) (1 when 0-d)
  int64_t n;                                 // the inner size: a row's length
  char* data[kCudaMaxOperands];              // operand i's base address (device memory)
  int64_t outer_strides[kCudaMaxOperands][kCudaMaxOuterRank];  // operand i, outer dim d
  int64_t inner_strides[kCudaMaxOperands];   // operand i's stride along the inner dim
  // Bytes per element of operand i (0: not given). Kernels know their dtypes and ignore this;
  // it lets the stand-in driver (tests/fake_cuda) check each operand's whole byte range.
  int64_t itemsizes[kCudaMaxOperands];
  // Split reductions only (see jit/cuda_launch.h); otherwise split = 1, workspace = nullptr.
  int64_t split;                             // blocks sharing one row
  char* workspace;                           // rows * split * reductions * kCudaPartialSlotBytes
};

static_assert(sizeof(CudaKernelArgs) ==
                  8 * (1 + kCudaMaxOuterRank + 2 + kCudaMaxOperands * (3 + kCudaMaxOuterRank) + 2),
              "CudaKernelArgs must have no padding: host and NVRTC must agree on every offset");
static_assert(sizeof(CudaKernelArgs) <= 4096, "kernel parameters must stay within 4 KiB");

// The element offsets of outer row `row` (0 <= row < args.rows) in operands 0..N-1. Written
// for the GPU: no index array (it would live in local memory), one division per outer dim but
// the outermost (whose index is what is left of `row`), so the common rank-1 case divides not
// at all; N is a constant, so the unrolled offsets stay in registers. Also compiled on the host,
// where tests check it against plain index arithmetic.
template <int N>
DT_HD void RowOffsets(const CudaKernelArgs& args, int64_t row, int64_t (&off)[N]) {
  DT_UNROLL
  for (int k = 0; k < N; ++k) off[k] = 0;
  for (int64_t d = args.outer_rank - 1; d > 0; --d) {
    const int64_t i = row % args.outer_sizes[d];
    row /= args.outer_sizes[d];
    DT_UNROLL
    for (int k = 0; k < N; ++k) off[k] += i * args.outer_strides[k][d];
  }
  if (args.outer_rank > 0) {
    DT_UNROLL
    for (int k = 0; k < N; ++k) off[k] += row * args.outer_strides[k][0];
  }
}

// A grid-stride walk over `rows` rows of `per_row` items each (items: elements, or vector
// groups), tracking (row, item) incrementally: one division per thread at the start instead of
// one per step. REQUIRES: per_row > 0.
struct GridWalk {
  int64_t row, item, step_rows, step_items, per_row;
  DT_HD GridWalk(int64_t start, int64_t step, int64_t per_row_)
      : row(start / per_row_), item(start % per_row_), step_rows(step / per_row_),
        step_items(step % per_row_), per_row(per_row_) {}
  DT_HD void Advance() {
    row += step_rows;
    item += step_items;
    if (item >= per_row) {
      item -= per_row;
      ++row;
    }
  }
};

}  // namespace dt

#endif  // DYNTRACE_JIT_CUDA_LAUNCH_ABI_H_
