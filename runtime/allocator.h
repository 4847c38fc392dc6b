// runtime/allocator.h: the caching host allocator behind every CPU tensor.
//
// Blocks are 64-byte aligned (a cache line, and enough for any vector load) and rounded up to a
// size class; a freed block goes back to its class's free list instead of to the system, so a
// loop that allocates the same shapes every iteration stops calling malloc after the first.
// Blocks above kMaxCachedBytes are returned to the system on free.
//
//   void* p = HostAllocator::Get().Allocate(1000);
//   HostAllocator::Get().Free(p, 1000);
#ifndef DYNTRACE_RUNTIME_ALLOCATOR_H_
#define DYNTRACE_RUNTIME_ALLOCATOR_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace dt {

inline constexpr size_t kHostAlignment = 64;

struct AllocatorStats {
  int64_t system_allocations = 0;  // calls that reached the system allocator
  int64_t cache_hits = 0;
  int64_t bytes_cached = 0;  // bytes held in free lists
  int64_t bytes_in_use = 0;
  int64_t peak_bytes_in_use = 0;  // the most in use at once since the last ResetPeak()
};

class HostAllocator {
 public:
  static HostAllocator& Get();

  // Never returns null: allocation failure throws std::bad_alloc like operator new, which the
  // Python boundary turns into MemoryError.
  void* Allocate(size_t nbytes);
  // REQUIRES: `ptr` came from Allocate(nbytes) with the same nbytes.
  void Free(void* ptr, size_t nbytes);
  // Returns every cached block to the system.
  void EmptyCache();
  AllocatorStats Stats() const;
  // Starts the peak over from the bytes in use now (torch.cuda.reset_peak_memory_stats).
  void ResetPeak();

  static constexpr size_t kMaxCachedBytes = size_t{1} << 30;

 private:
  static size_t SizeClass(size_t nbytes);

  mutable absl::Mutex mu_;
  absl::flat_hash_map<size_t, std::vector<void*>> free_lists_ ABSL_GUARDED_BY(mu_);
  AllocatorStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace dt

#endif  // DYNTRACE_RUNTIME_ALLOCATOR_H_
