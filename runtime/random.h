// runtime/random.h: the global random generator behind rand/randn.
//
// One process-wide generator (64-bit Mersenne Twister), reseeded by manual_seed so that runs are
// reproducible. Uniform samples are in [0, 1); normal samples use the Box-Muller transform.
#ifndef DYNTRACE_RUNTIME_RANDOM_H_
#define DYNTRACE_RUNTIME_RANDOM_H_

#include <cstdint>

#include "runtime/tensor.h"

namespace dt {

void ManualSeed(uint64_t seed);
// Fills a contiguous floating tensor. REQUIRES: IsFloating(t.dtype()), t contiguous.
void FillUniform(const Tensor& t);
void FillNormal(const Tensor& t);

}  // namespace dt

#endif  // DYNTRACE_RUNTIME_RANDOM_H_
