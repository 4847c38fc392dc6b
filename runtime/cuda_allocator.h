// runtime/cuda_allocator.h: the caching allocator behind every CUDA tensor, and pinned staging.
//
// cuMemAlloc and cuMemFree synchronise the device and cost tens of microseconds, so a freed block
// goes back to a free list of its size class and the next allocation of that class reuses it:
// the steady state of a loop makes no driver allocation at all. All of dyntrace's work on a
// device is ordered on that device's one stream (runtime/cuda_driver.h), so a block freed while
// kernels that use it are still queued can be handed out at once: whatever uses it next is
// queued behind them. When the driver runs out of memory the cached blocks are released and
// the allocation is tried once more.
//
//   DT_ASSIGN_OR_RETURN(CUdeviceptr p, CudaAllocator::Get().Allocate(0, bytes));
//   CudaAllocator::Get().Free(0, p, bytes);
#ifndef DYNTRACE_RUNTIME_CUDA_ALLOCATOR_H_
#define DYNTRACE_RUNTIME_CUDA_ALLOCATOR_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "runtime/cuda_driver.h"

namespace dt {

struct CudaAllocatorStats {
  int64_t driver_allocations = 0;  // cuMemAlloc calls
  int64_t cache_hits = 0;
  int64_t bytes_cached = 0;
  int64_t bytes_in_use = 0;
  int64_t peak_bytes_in_use = 0;  // the most in use at once since the last ResetPeak()
};

class CudaAllocator {
 public:
  static CudaAllocator& Get();

  // A block of at least `nbytes` (256-byte aligned, as cuMemAlloc guarantees) on device `device`.
  absl::StatusOr<CUdeviceptr> Allocate(int device, size_t nbytes);
  // REQUIRES: `ptr` came from Allocate(device, nbytes) with the same arguments.
  void Free(int device, CUdeviceptr ptr, size_t nbytes);
  // Returns every cached block to the driver.
  void EmptyCache();
  CudaAllocatorStats Stats() const;
  // Starts the peak over from the bytes in use now (torch.cuda.reset_peak_memory_stats).
  void ResetPeak();

  // Size classes: powers of two up to 1 MiB, then multiples of 2 MiB, so blocks reused across
  // slightly different sizes waste at most half (small) or 2 MiB (large).
  static size_t SizeClass(size_t nbytes);

  // Puts one cached block of each of `sizes` on `device`'s free lists (allocating what is
  // missing), so that allocations of those sizes are served without the driver.
  absl::Status Reserve(int device, const std::vector<size_t>& sizes);

 private:
  struct Key {
    int device;
    size_t size_class;
    friend bool operator==(const Key& a, const Key& b) {
      return a.device == b.device && a.size_class == b.size_class;
    }
    template <typename H>
    friend H AbslHashValue(H h, const Key& k) {
      return H::combine(std::move(h), k.device, k.size_class);
    }
  };

  void ReleaseCachedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  absl::flat_hash_map<Key, std::vector<CUdeviceptr>> free_lists_ ABSL_GUARDED_BY(mu_);
  CudaAllocatorStats stats_ ABSL_GUARDED_BY(mu_);
};

// While alive, records the sizes this thread's Allocate() calls ask for (a CUDA graph's warm-up
// run, whose allocations the capture will repeat).
class CudaAllocationRecorder {
 public:
  CudaAllocationRecorder();
  ~CudaAllocationRecorder();
  CudaAllocationRecorder(const CudaAllocationRecorder&) = delete;
  CudaAllocationRecorder& operator=(const CudaAllocationRecorder&) = delete;
  const std::vector<size_t>& sizes() const { return sizes_; }

 private:
  std::vector<size_t> sizes_;
  CudaAllocationRecorder* previous_;
};

// While alive, this thread's Allocate() calls are served from the cache only; a miss is an
// error instead of a driver allocation (during stream capture, which must allocate nothing).
class CudaCacheOnlyScope {
 public:
  CudaCacheOnlyScope();
  ~CudaCacheOnlyScope();
  CudaCacheOnlyScope(const CudaCacheOnlyScope&) = delete;
  CudaCacheOnlyScope& operator=(const CudaCacheOnlyScope&) = delete;

 private:
  bool previous_;
};

// A block kept out of the cache (CudaFreeHold); give it back with CudaAllocator::Free.
struct CudaHeldBlock {
  int device;
  CUdeviceptr ptr;
  size_t nbytes;
};

// While alive, blocks this thread frees are held here instead of going back to the cache. A
// CUDA graph captured meanwhile keeps writing every block its launches touched, temporaries an
// op freed during the capture included: back in the cache, such a block could be handed to a
// tensor the caller holds and be overwritten by the next replay. The graph's owner frees the
// held blocks once the graph is destroyed.
class CudaFreeHold {
 public:
  CudaFreeHold();
  ~CudaFreeHold();  // blocks not taken go back to the cache
  CudaFreeHold(const CudaFreeHold&) = delete;
  CudaFreeHold& operator=(const CudaFreeHold&) = delete;
  std::vector<CudaHeldBlock> Take() { return std::move(blocks_); }

 private:
  friend class CudaAllocator;
  std::vector<CudaHeldBlock> blocks_;
  CudaFreeHold* previous_;
};

// Copies between host memory and a device through page-locked staging buffers, so the DMA
// engine reads and writes the host side directly and a large copy overlaps its halves: chunk
// i + 1 travels while chunk i is staged. Host memory the caller owns is never pinned itself.
absl::Status CopyHostToDevice(const CudaDevice& device, CUdeviceptr dst, const void* src, size_t nbytes);
// Returns when the bytes are in `dst`: the device's queued work that produced them ran first.
absl::Status CopyDeviceToHost(const CudaDevice& device, void* dst, CUdeviceptr src, size_t nbytes);

}  // namespace dt

#endif  // DYNTRACE_RUNTIME_CUDA_ALLOCATOR_H_
