// tests/index_kernels_shim.h: what runtime/index_kernels.cuh needs from CUDA, for the host
// compiler.
//
// The kernels use no intra-block synchronisation, so a launch is the same computation as loops
// over blocks and threads: the block and thread indices are thread-locals the test's runner sets
// before calling a kernel for each (block, thread), and the atomics are plain read-modify-writes
// (the runner executes one thread at a time).
#ifndef DYNTRACE_TESTS_INDEX_KERNELS_SHIM_H_
#define DYNTRACE_TESTS_INDEX_KERNELS_SHIM_H_

#include <cmath>

struct ShimDim3 {
  unsigned x = 0, y = 0, z = 0;
};
inline thread_local ShimDim3 blockIdx, threadIdx, blockDim, gridDim;

inline unsigned int atomicCAS(unsigned int* p, unsigned int expected, unsigned int desired) {
  const unsigned int old = *p;
  if (old == expected) *p = desired;
  return old;
}
inline unsigned long long atomicCAS(unsigned long long* p, unsigned long long expected, unsigned long long desired) {
  const unsigned long long old = *p;
  if (old == expected) *p = desired;
  return old;
}
inline unsigned long long atomicMin(unsigned long long* p, unsigned long long v) {
  const unsigned long long old = *p;
  if (v < old) *p = v;
  return old;
}
inline unsigned long long atomicMax(unsigned long long* p, unsigned long long v) {
  const unsigned long long old = *p;
  if (v > old) *p = v;
  return old;
}
inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
  const unsigned long long old = *p;
  *p = old + v;
  return old;
}

#include "runtime/index_kernels.cuh"

#endif  // DYNTRACE_TESTS_INDEX_KERNELS_SHIM_H_
