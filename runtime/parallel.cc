#include "runtime/parallel.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace dt {

namespace {
// 0 until set_num_threads: DefaultThreads().
std::atomic<int> threads_set{0};

// OMP_NUM_THREADS's first number when set and positive, else the CPUs in the affinity mask.
int DefaultThreads() {
  static const int threads = [] {
    if (const char* env = std::getenv("OMP_NUM_THREADS"); env != nullptr) {
      const long n = std::strtol(env, nullptr, 10);
      if (n > 0) return static_cast<int>(std::min<long>(n, 1 << 16));
    }
    cpu_set_t cpus;
    if (sched_getaffinity(0, sizeof(cpus), &cpus) == 0 && CPU_COUNT(&cpus) > 0) return CPU_COUNT(&cpus);
    return 1;
  }();
  return threads;
}
}  // namespace

int MaxThreads() {
#ifdef _OPENMP
  const int set = threads_set.load(std::memory_order_relaxed);
  return set > 0 ? set : DefaultThreads();
#else
  return 1;
#endif
}

MaxThreadsScope::MaxThreadsScope() {
#ifdef _OPENMP
  const int previous = omp_get_max_threads();
  if (previous != MaxThreads()) {
    restore_ = previous;
    omp_set_num_threads(MaxThreads());
  }
#endif
}

MaxThreadsScope::~MaxThreadsScope() {
#ifdef _OPENMP
  if (restore_ > 0) omp_set_num_threads(restore_);
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
