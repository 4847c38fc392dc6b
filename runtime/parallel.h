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
// How many threads ParallelFor, BLAS calls and the cpu backend's kernels may use:
// set_num_threads's value, else OMP_NUM_THREADS, else the CPUs this process may run on. Not
// OpenMP's live default: other libraries in the process set that (importing Debian's torch sets
// it to one thread), and dyntrace's kernels would follow them. On a machine shared with other
// work, OpenMP's waiting threads spin between kernels and slow everything down, so users (and
// bench/training.py, to match PyTorch's thread count) may lower it.
int MaxThreads();
// REQUIRES: threads >= 1.
void SetMaxThreads(int threads);

// While alive, OpenMP parallel regions on this thread without a num_threads clause (the cpu
// backend's generated kernels) get MaxThreads() threads; the thread's own OpenMP default, which
// another library may have chosen, is restored after.
class MaxThreadsScope {
 public:
  MaxThreadsScope();
  ~MaxThreadsScope();
  MaxThreadsScope(const MaxThreadsScope&) = delete;
  MaxThreadsScope& operator=(const MaxThreadsScope&) = delete;

 private:
  int restore_ = 0;  // 0: nothing to restore
};

}  // namespace dt

#endif  // DYNTRACE_RUNTIME_PARALLEL_H_
