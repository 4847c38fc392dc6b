// runtime/random.h: the global random generators behind rand/randn.
//
// CPU tensors draw from one process-wide 64-bit Mersenne Twister; CUDA tensors from Philox
// counters (below). manual_seed reseeds both, so runs are reproducible. Uniform samples are in
// [0, 1); normal samples use the Box-Muller transform.
#ifndef DYNTRACE_RUNTIME_RANDOM_H_
#define DYNTRACE_RUNTIME_RANDOM_H_

#include <cstdint>

#include "runtime/tensor.h"

namespace dt {

// Reseeds both generators: the host's and the device's (counters start again at 0).
void ManualSeed(uint64_t seed);
// Fills a contiguous floating tensor. REQUIRES: IsFloating(t.dtype()), t contiguous.
void FillUniform(const Tensor& t);
void FillNormal(const Tensor& t);

// The device generator: Philox4x32-10 counters under the seed (runtime/index_kernels.cuh draws
// from them). Each draw reserves the counters it uses, so no two draws share numbers and a run's
// numbers depend only on the seed and the draws before them, wherever they ran.
struct PhiloxDraw {
  uint64_t seed = 0;
  uint64_t first = 0;  // the draw's first counter
};
PhiloxDraw ReservePhiloxCounters(uint64_t counters);

}  // namespace dt

#endif  // DYNTRACE_RUNTIME_RANDOM_H_
