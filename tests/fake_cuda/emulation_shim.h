// tests/fake_cuda/emulation_shim.h: what CUDA C++ source needs from CUDA, for the host compiler.
//
// The stand-in NVRTC (fake_nvrtc.cc) pastes this ahead of every source dyntrace hands NVRTC and
// compiles the result with the host compiler into a shared library; the stand-in driver
// (fake_libcuda.cc, kernel_emulator.cc) runs its kernels one block at a time, each CUDA thread
// a fiber. So the code sees NVRTC's view (__CUDACC_RTC__, no standard headers of its own) and
// the few device builtins dyntrace's kernels use are the driver's:
// - blockIdx, blockDim and gridDim are per-launch values, threadIdx the running fiber's;
// - __syncthreads waits for every thread of the block, a warp shuffle for its warp's 32;
// - atomics are plain read-modify-writes: fibers take turns only at those waits.
// The driver finds the hooks below by name (dlsym) in each library it loads.
#ifndef DYNTRACE_TESTS_FAKE_CUDA_EMULATION_SHIM_H_
#define DYNTRACE_TESTS_FAKE_CUDA_EMULATION_SHIM_H_

#include <math.h>
#include <stdint.h>
#include <string.h>

#define __CUDACC_RTC__ 1
#undef INT64_C
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __launch_bounds__(...)
#define __shared__ static
#define __restrict__ __restrict

struct DtEmuDim3 {
  unsigned x, y, z;
};

extern "C" {
// Set by the driver: the launch's geometry and the running fiber's thread index.
__attribute__((visibility("default"))) DtEmuDim3 dt_emu_block_idx, dt_emu_block_dim, dt_emu_grid_dim;
__attribute__((visibility("default"))) const DtEmuDim3* dt_emu_thread_idx;
// Set by the driver: suspend the fiber until the block (or its warp) gets there.
__attribute__((visibility("default"))) void (*dt_emu_syncthreads)();
__attribute__((visibility("default"))) uint64_t (*dt_emu_shfl_xor)(uint64_t bits, int lane_mask);
}

#define threadIdx (*dt_emu_thread_idx)
#define blockIdx dt_emu_block_idx
#define blockDim dt_emu_block_dim
#define gridDim dt_emu_grid_dim

inline void __syncthreads() { dt_emu_syncthreads(); }

template <typename T>
inline T __shfl_xor_sync(unsigned, T v, int lane_mask) {
  static_assert(sizeof(T) <= sizeof(uint64_t), "a shuffled value fits 64 bits");
  uint64_t bits = 0;
  memcpy(&bits, &v, sizeof(T));
  bits = dt_emu_shfl_xor(bits, lane_mask);
  memcpy(&v, &bits, sizeof(T));
  return v;
}

// Rounded double operations: plain ones, as the library is built without contraction.
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dmul_rn(double a, double b) { return a * b; }

template <typename T>
inline T atomicAdd(T* p, T v) {
  const T old = *p;
  *p = old + v;
  return old;
}
template <typename T>
inline T atomicMin(T* p, T v) {
  const T old = *p;
  if (v < old) *p = v;
  return old;
}
template <typename T>
inline T atomicMax(T* p, T v) {
  const T old = *p;
  if (v > old) *p = v;
  return old;
}
template <typename T>
inline T atomicCAS(T* p, T expected, T desired) {
  const T old = *p;
  if (old == expected) *p = desired;
  return old;
}

#endif  // DYNTRACE_TESTS_FAKE_CUDA_EMULATION_SHIM_H_
