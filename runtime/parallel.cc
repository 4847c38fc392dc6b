#include "runtime/parallel.h"

#include <algorithm>
#include <atomic>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace dt {

namespace {
// 0 until set_num_threads: OpenMP's default (OMP_NUM_THREADS, else one per core).
std::atomic<int> threads_set{0};
}  // namespace

int MaxThreads() {
  const int set = threads_set.load(std::memory_order_relaxed);
  if (set > 0) return set;
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

void SetMaxThreads(int threads) {
  threads_set.store(threads, std::memory_order_relaxed);
#ifdef _OPENMP
  omp_set_num_threads(threads);  // the CPU backend's compiled kernels, on this thread
#endif
}

void ParallelFor(int64_t total, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (total <= 0) return;
  const int64_t max_chunks = std::max<int64_t>(1, std::min<int64_t>(MaxThreads(), total / grain));
#ifdef _OPENMP
  if (max_chunks > 1 && !omp_in_parallel()) {
#pragma omp parallel num_threads(static_cast<int>(max_chunks))
    {
      const int64_t chunks = omp_get_num_threads();
      const int64_t id = omp_get_thread_num();
      const int64_t per = (total + chunks - 1) / chunks;
      const int64_t begin = id * per;
      const int64_t end = std::min(total, begin + per);
      if (begin < end) fn(begin, end);
    }
    return;
  }
#endif
  fn(0, total);
}

}  // namespace dt
