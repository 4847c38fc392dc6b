#include "runtime/cuda_allocator.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>

#include "absl/strings/str_format.h"
#include "runtime/errors.h"

namespace dt {
namespace {

constexpr CUresult kCudaErrorOutOfMemory = 2;
constexpr size_t kStagingBytes = size_t{8} << 20;

// Two page-locked buffers per device, each with the event recorded after its last copy.
struct Staging {
  std::mutex mu;
  void* buffers[2] = {nullptr, nullptr};
  CUevent done[2] = {nullptr, nullptr};
  bool used[2] = {false, false};
};

absl::StatusOr<Staging*> StagingFor(const CudaDevice& device) {
  static std::mutex mu;
  static auto* stagings = new absl::flat_hash_map<int, std::unique_ptr<Staging>>();
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = (*stagings)[device.index()];
  if (slot != nullptr) return slot.get();
  auto staging = std::make_unique<Staging>();
  const CudaDriver& d = device.driver();
  for (int i = 0; i < 2; ++i) {
    absl::Status s = CudaCall(d.cuMemHostAlloc(&staging->buffers[i], kStagingBytes, kCuMemHostAllocPortable),
                              "cuMemHostAlloc (pinned staging buffer)");
    if (s.ok()) s = CudaCall(d.cuEventCreate(&staging->done[i], kCuEventDisableTiming), "cuEventCreate");
    if (!s.ok()) return s;
  }
  slot = std::move(staging);
  return slot.get();
}

// The device's staging buffers, with its context current on this thread.
absl::StatusOr<Staging*> ActiveStagingFor(const CudaDevice& device) {
  absl::StatusOr<Staging*> staging = StagingFor(device);
  if (!staging.ok()) return staging.status();
  if (absl::Status a = device.Activate(); !a.ok()) return a;
  return staging;
}

// Waits until the copy that last used buffer `b` finished.
absl::Status WaitForBuffer(const CudaDriver& d, Staging& s, int b) {
  if (!s.used[b]) return absl::OkStatus();
  s.used[b] = false;
  return CudaCall(d.cuEventSynchronize(s.done[b]), "cuEventSynchronize");
}

thread_local CudaAllocationRecorder* allocation_recorder = nullptr;
thread_local std::vector<size_t>* recorded_sizes = nullptr;
thread_local bool cache_only = false;
thread_local CudaFreeHold* free_hold = nullptr;

}  // namespace

CudaFreeHold::CudaFreeHold() : previous_(free_hold) { free_hold = this; }

CudaFreeHold::~CudaFreeHold() {
  free_hold = previous_;
  for (const CudaHeldBlock& b : blocks_) CudaAllocator::Get().Free(b.device, b.ptr, b.nbytes);
}

CudaAllocationRecorder::CudaAllocationRecorder() : previous_(allocation_recorder) {
  allocation_recorder = this;
  recorded_sizes = &sizes_;
}

CudaAllocationRecorder::~CudaAllocationRecorder() {
  allocation_recorder = previous_;
  recorded_sizes = previous_ != nullptr ? &previous_->sizes_ : nullptr;
}

CudaCacheOnlyScope::CudaCacheOnlyScope() : previous_(cache_only) { cache_only = true; }
CudaCacheOnlyScope::~CudaCacheOnlyScope() { cache_only = previous_; }

CudaAllocator& CudaAllocator::Get() {
  static auto* allocator = new CudaAllocator();
  return *allocator;
}

size_t CudaAllocator::SizeClass(size_t nbytes) {
  if (nbytes <= 512) return 512;
  if (nbytes <= (size_t{1} << 20)) {
    size_t c = 1024;
    while (c < nbytes) c <<= 1;
    return c;
  }
  const size_t granule = size_t{2} << 20;
  return (nbytes + granule - 1) / granule * granule;
}

absl::StatusOr<CUdeviceptr> CudaAllocator::Allocate(int device, size_t nbytes) {
  const size_t size_class = SizeClass(nbytes);
  if (recorded_sizes != nullptr) recorded_sizes->push_back(nbytes);
  {
    absl::MutexLock lock(&mu_);
    auto it = free_lists_.find(Key{device, size_class});
    if (it != free_lists_.end() && !it->second.empty()) {
      const CUdeviceptr ptr = it->second.back();
      it->second.pop_back();
      ++stats_.cache_hits;
      stats_.bytes_cached -= static_cast<int64_t>(size_class);
      stats_.bytes_in_use += static_cast<int64_t>(size_class);
      stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
      return ptr;
    }
  }
  if (cache_only) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "an allocation of %d bytes on cuda:%d found no cached block while allocation was limited to the "
        "cache (CUDA graph capture)",
        nbytes, device));
  }
  absl::StatusOr<CudaDevice*> gpu = CudaDevice::Get(device);
  if (!gpu.ok()) return gpu.status();
  if (absl::Status s = (*gpu)->Activate(); !s.ok()) return s;
  const CudaDriver& d = (*gpu)->driver();
  CUdeviceptr ptr = 0;
  CUresult rc = d.cuMemAlloc(&ptr, size_class);
  if (rc == kCudaErrorOutOfMemory) {
    absl::MutexLock lock(&mu_);
    ReleaseCachedLocked();
    rc = d.cuMemAlloc(&ptr, size_class);
  }
  if (rc == kCudaErrorOutOfMemory) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "CUDA out of memory: allocating %d bytes on cuda:%d failed (%d bytes in use by dyntrace)",
        nbytes, device, Stats().bytes_in_use));
  }
  if (absl::Status s = CudaCall(rc, "cuMemAlloc"); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  ++stats_.driver_allocations;
  stats_.bytes_in_use += static_cast<int64_t>(size_class);
  stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
  return ptr;
}

void CudaAllocator::Free(int device, CUdeviceptr ptr, size_t nbytes) {
  if (free_hold != nullptr) {
    free_hold->blocks_.push_back(CudaHeldBlock{device, ptr, nbytes});
    return;
  }
  const size_t size_class = SizeClass(nbytes);
  absl::MutexLock lock(&mu_);
  free_lists_[Key{device, size_class}].push_back(ptr);
  stats_.bytes_in_use -= static_cast<int64_t>(size_class);
  stats_.bytes_cached += static_cast<int64_t>(size_class);
}

absl::Status CudaAllocator::Reserve(int device, const std::vector<size_t>& sizes) {
  std::vector<std::pair<CUdeviceptr, size_t>> blocks;
  absl::Status status;
  for (size_t nbytes : sizes) {
    absl::StatusOr<CUdeviceptr> block = Allocate(device, nbytes);
    if (!block.ok()) {
      status = block.status();
      break;
    }
    blocks.emplace_back(*block, nbytes);
  }
  for (const auto& [ptr, nbytes] : blocks) Free(device, ptr, nbytes);
  return status;
}

void CudaAllocator::ReleaseCachedLocked() {
  for (auto& [key, blocks] : free_lists_) {
    absl::StatusOr<CudaDevice*> gpu = CudaDevice::Get(key.device);
    if (!gpu.ok() || !(*gpu)->Synchronize().ok()) continue;
    for (CUdeviceptr ptr : blocks) (*gpu)->driver().cuMemFree(ptr);
    stats_.bytes_cached -= static_cast<int64_t>(key.size_class * blocks.size());
    blocks.clear();
  }
}

void CudaAllocator::EmptyCache() {
  absl::MutexLock lock(&mu_);
  ReleaseCachedLocked();
}

void CudaAllocator::ResetPeak() {
  absl::MutexLock lock(&mu_);
  stats_.peak_bytes_in_use = stats_.bytes_in_use;
}

CudaAllocatorStats CudaAllocator::Stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

absl::Status CopyHostToDevice(const CudaDevice& device, CUdeviceptr dst, const void* src, size_t nbytes) {
  absl::StatusOr<Staging*> staging = ActiveStagingFor(device);
  if (!staging.ok()) return staging.status();
  Staging& s = **staging;
  std::lock_guard<std::mutex> lock(s.mu);
  const CudaDriver& d = device.driver();
  int b = 0;
  for (size_t offset = 0; offset < nbytes; offset += kStagingBytes, b ^= 1) {
    const size_t len = std::min(kStagingBytes, nbytes - offset);
    if (absl::Status w = WaitForBuffer(d, s, b); !w.ok()) return w;
    std::memcpy(s.buffers[b], static_cast<const char*>(src) + offset, len);
    absl::Status c = CudaCall(d.cuMemcpyHtoDAsync(dst + offset, s.buffers[b], len, device.stream()),
                              "cuMemcpyHtoDAsync");
    if (c.ok()) c = CudaCall(d.cuEventRecord(s.done[b], device.stream()), "cuEventRecord");
    if (!c.ok()) return c;
    s.used[b] = true;
  }
  return absl::OkStatus();
}

absl::Status CopyDeviceToHost(const CudaDevice& device, void* dst, CUdeviceptr src, size_t nbytes) {
  absl::StatusOr<Staging*> staging = ActiveStagingFor(device);
  if (!staging.ok()) return staging.status();
  Staging& s = **staging;
  std::lock_guard<std::mutex> lock(s.mu);
  const CudaDriver& d = device.driver();
  // Chunk i is copied into buffer i % 2 while chunk i - 1 is drained from the other one.
  size_t pending_offset = 0, pending_len = 0;
  int pending_buffer = -1;
  auto drain = [&]() -> absl::Status {
    if (pending_buffer < 0) return absl::OkStatus();
    if (absl::Status w = WaitForBuffer(d, s, pending_buffer); !w.ok()) return w;
    std::memcpy(static_cast<char*>(dst) + pending_offset, s.buffers[pending_buffer], pending_len);
    pending_buffer = -1;
    return absl::OkStatus();
  };
  int b = 0;
  for (size_t offset = 0; offset < nbytes; offset += kStagingBytes, b ^= 1) {
    const size_t len = std::min(kStagingBytes, nbytes - offset);
    if (absl::Status w = WaitForBuffer(d, s, b); !w.ok()) return w;
    absl::Status c = CudaCall(d.cuMemcpyDtoHAsync(s.buffers[b], src + offset, len, device.stream()),
                              "cuMemcpyDtoHAsync");
    if (c.ok()) c = CudaCall(d.cuEventRecord(s.done[b], device.stream()), "cuEventRecord");
    if (!c.ok()) return c;
    s.used[b] = true;
    if (absl::Status r = drain(); !r.ok()) return r;
    pending_offset = offset;
    pending_len = len;
    pending_buffer = b;
  }
  return drain();
}

}  // namespace dt
