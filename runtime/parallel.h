// runtime/parallel.h: splitting a range of independent work items across cores.
//
// ParallelFor runs fn(begin, end) over disjoint chunks that cover [0, total); it stays on the
// calling thread when the work is smaller than `grain`, so small tensors pay no threading cost.
#ifndef DYNTRACE_RUNTIME_PARALLEL_H_
#define DYNTRACE_RUNTIME_PARALLEL_H_

#include <cstdint>
#include <functional>

namespace dt {

inline constexpr int64_t kDefaultGrain = 32768;

void ParallelFor(int64_t total, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);
// How many threads ParallelFor (and BLAS calls) may use: set_num_threads's value, else
// OpenMP's default. On a machine shared with other work, OpenMP's waiting threads spin between
// kernels and slow everything down, so users (and bench/training.py, to match PyTorch's
// thread count) may lower it.
int MaxThreads();
// REQUIRES: threads >= 1.
void SetMaxThreads(int threads);

}  // namespace dt

#endif  // DYNTRACE_RUNTIME_PARALLEL_H_
