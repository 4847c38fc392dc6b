// runtime/index_kernel_abi.h: the argument every index, sort and scan kernel takes, and the
// address arithmetic they share.
//
// Compiled three ways: by the host build (runtime/cuda_index_kernels.cc fills the struct), by
// NVRTC (pasted ahead of runtime/index_kernels.cuh into the kernels' module), and by the host
// compiler under tests/index_kernels_shim.h, where the same kernels run as loops on host memory.
// One definition gives every side one layout; the static_assert pins it (no padding: every
// field is 8 bytes).
//
// A launch walks a domain of up to kIxMaxRank dims (row-major `linear` positions). Each operand
// is a base address and one stride per domain dim, in its own elements. An index term reads an
// integer from one operand (the index tensor) and moves another operand's address by that value
// times a gain (the indexed dim's stride): x[t] reads src at (position strides) + t[..] * stride.
//
//   IxArgs a{};  a.rank = 1; a.sizes[0] = n; a.numel = n;  ... fill operands ...
//   extern "C" __global__ void dt_ix_gather(const dt::IxArgs a);   // one element per position
#ifndef DYNTRACE_RUNTIME_INDEX_KERNEL_ABI_H_
#define DYNTRACE_RUNTIME_INDEX_KERNEL_ABI_H_

#include "runtime/kernel_portability.h"

namespace dt {

inline constexpr int kIxMaxRank = 12;
// Operand 0 is written (out / dst), operand 1 is read (src); the rest hold indices or scratch.
inline constexpr int kIxMaxOperands = 8;

struct IxOperand {
  char* data;                     // element 0 of the operand's addressing (device memory)
  int64_t itemsize;               // bytes per element
  int64_t strides[kIxMaxRank];    // elements per step of each domain dim
  // The byte range [low_bytes, high_bytes) around `data` that the launch may touch: the
  // stand-in driver (tests/fake_cuda) checks it lies in device memory.
  int64_t low_bytes, high_bytes;
};

// out-of-range values are skipped (the host checked them first and raised).
struct IxIndexTerm {
  int64_t operand;  // holding the index values: int32 or int64, told by its itemsize
  int64_t target;   // the operand whose address the value moves
  int64_t size;     // valid values: [0, size), or [-size, size) when wrap is set
  int64_t wrap;
  int64_t gain;     // the target's stride along the dim it indexes
};

// Remaps the read operand (1) along a domain dim: position i reads ((i * sign + shift) mod
// modulus), which is flip (sign -1), roll (a shift) and repeat (the modulus); modulus 0: i.
struct IxRemap {
  int64_t sign, shift, modulus;
};

struct IxArgs {
  int64_t rank;
  int64_t sizes[kIxMaxRank];
  int64_t numel;  // product of sizes: the positions a launch covers
  int64_t operands;
  IxOperand op[kIxMaxOperands];
  int64_t terms;
  IxIndexTerm term[kIxMaxOperands];
  IxRemap remap[kIxMaxRank];
  int64_t mode;          // what a kernel family does (a fold, a scan, a search side)
  int64_t param[6];      // kernel-specific sizes (row length, step ...), named where used
  double alpha;          // index_add's multiplier
  uint64_t* error;       // check kernels: the first bad position + 1 (atomic min), else ~0
};
static_assert(sizeof(IxArgs) == 8 * (2 + kIxMaxRank + 1 + kIxMaxOperands * (4 + kIxMaxRank) + 1 +
                                      5 * kIxMaxOperands + 3 * kIxMaxRank + 1 + 6 + 2),
              "IxArgs must have no padding: host and NVRTC must agree on every offset");
static_assert(sizeof(IxArgs) <= 4096, "kernel parameters must stay within 4 KiB");

// Folds a scatter or scan applies (IxArgs::mode).
// The check kernel's passes: find the first bad position (into error[0], as position + 1), then
// copy that position's value into error[1] (a CUDA graph reads both after its launch).
enum IxCheck : int64_t { kIxCheckFind = 0, kIxCheckReadValue = 1 };

enum IxFold : int64_t { kIxAssign = 0, kIxSum = 1, kIxProd = 2, kIxMax = 3, kIxMin = 4, kIxLogSumExp = 5 };

// What range (IxArgs::mode) generates, and which checked integer op int_binary computes.
enum IxRange : int64_t { kIxArange = 0, kIxLinspace = 1 };
// What random (IxArgs::mode) draws: uniform in [0, 1), or standard normal; or, with one thread,
// adds param[2] to the counter base of the state at param[3] (a CUDA graph's last step).
enum IxRandom : int64_t { kIxUniform = 0, kIxNormal = 1, kIxAdvanceCounters = 2 };
enum IxIntegerOp : int64_t { kIxFloorDivide = 0, kIxRemainder = 1, kIxPower = 2 };

// The kernels (runtime/index_kernels.cuh), by name: X(name) for each. Untyped kernels move
// element bytes; typed ones are instantiated for the module's element type.
#define DT_IX_UNTYPED_KERNELS(X) X(check) X(gather) X(claim) X(put) X(band) X(compact) X(runs)
#define DT_IX_TYPED_KERNELS(X)                                                                 \
  X(fold) X(identity) X(mean) X(sort_init) X(sort_step) X(sort_take) X(scan_init) X(scan_step) \
  X(scan_store) X(pair_init) X(cumext_step) X(argext_step) X(search) X(run_starts) X(range)     \
  X(int_binary) X(random)

// Reads element `at` of an integer operand as int64.
DT_HD int64_t IxReadIndex(const IxOperand& o, int64_t at) {
  if (o.itemsize == 8) return reinterpret_cast<const int64_t*>(o.data)[at];
  return reinterpret_cast<const int32_t*>(o.data)[at];
}

// The element offsets of position `linear` in every operand, index terms applied. False when
// an index term's value is out of range (no address is then valid).
DT_HD bool IxOffsets(const IxArgs& a, int64_t linear, int64_t (&off)[kIxMaxOperands]) {
  for (int k = 0; k < kIxMaxOperands; ++k) off[k] = 0;
  for (int64_t d = a.rank - 1; d >= 0; --d) {
    const int64_t size = a.sizes[d];
    const int64_t i = linear % size;
    linear /= size;
    for (int64_t k = 0; k < a.operands; ++k) off[k] += i * a.op[k].strides[d];
    if (a.remap[d].modulus > 0) {
      const int64_t m = a.remap[d].modulus;
      const int64_t j = ((i * a.remap[d].sign + a.remap[d].shift) % m + m) % m;
      off[1] += (j - i) * a.op[1].strides[d];
    }
  }
  for (int64_t t = 0; t < a.terms; ++t) {
    const IxIndexTerm& term = a.term[t];
    int64_t v = IxReadIndex(a.op[term.operand], off[term.operand]);
    if (term.wrap && v < 0) v += term.size;
    if (v < 0 || v >= term.size) return false;
    off[term.target] += v * term.gain;
  }
  return true;
}

}  // namespace dt

#endif  // DYNTRACE_RUNTIME_INDEX_KERNEL_ABI_H_
