#include "runtime/allocator.h"

#include <algorithm>
#include <cstdlib>
#include <new>

namespace dt {

HostAllocator& HostAllocator::Get() {
  // Leaked on purpose: tensors may be freed during interpreter shutdown, after static destructors.
  static HostAllocator* allocator = new HostAllocator();
  return *allocator;
}

size_t HostAllocator::SizeClass(size_t nbytes) {
  if (nbytes <= kHostAlignment) return kHostAlignment;
  // Small blocks round to a power of two; large ones to a multiple of 1/8 of their power of two,
  // which bounds waste at 12.5% while keeping the number of classes small.
  size_t pow2 = size_t{1} << (64 - __builtin_clzll(nbytes - 1));
  if (pow2 <= 4096) return pow2;
  size_t step = pow2 / 8;
  return (nbytes + step - 1) / step * step;
}

void* HostAllocator::Allocate(size_t nbytes) {
  const size_t size = SizeClass(nbytes);
  {
    absl::MutexLock lock(&mu_);
    auto it = free_lists_.find(size);
    if (it != free_lists_.end() && !it->second.empty()) {
      void* ptr = it->second.back();
      it->second.pop_back();
      stats_.cache_hits++;
      stats_.bytes_cached -= static_cast<int64_t>(size);
      stats_.bytes_in_use += static_cast<int64_t>(size);
      stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
      return ptr;
    }
    stats_.system_allocations++;
    stats_.bytes_in_use += static_cast<int64_t>(size);
    stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
  }
  void* ptr = std::aligned_alloc(kHostAlignment, size);
  if (ptr == nullptr) {
    absl::MutexLock lock(&mu_);
    stats_.bytes_in_use -= static_cast<int64_t>(size);
    throw std::bad_alloc();
  }
  return ptr;
}

void HostAllocator::Free(void* ptr, size_t nbytes) {
  if (ptr == nullptr) return;
  const size_t size = SizeClass(nbytes);
  {
    absl::MutexLock lock(&mu_);
    stats_.bytes_in_use -= static_cast<int64_t>(size);
    if (size <= kMaxCachedBytes) {
      free_lists_[size].push_back(ptr);
      stats_.bytes_cached += static_cast<int64_t>(size);
      return;
    }
  }
  std::free(ptr);
}

void HostAllocator::EmptyCache() {
  absl::flat_hash_map<size_t, std::vector<void*>> released;
  {
    absl::MutexLock lock(&mu_);
    released.swap(free_lists_);
    stats_.bytes_cached = 0;
  }
  for (auto& [size, blocks] : released) {
    for (void* p : blocks) std::free(p);
  }
}

void HostAllocator::ResetPeak() {
  absl::MutexLock lock(&mu_);
  stats_.peak_bytes_in_use = stats_.bytes_in_use;
}

AllocatorStats HostAllocator::Stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace dt
