// runtime/storage.h: a reference-counted block of bytes that tensors view.
//
// Storage owns its bytes through a release callback: the host allocator for tensors dyntrace
// made, the producer's DLPack deleter for tensors that came in zero-copy. Meta storage has no
// bytes at all. Storage is shared by std::shared_ptr; views hold the same Storage.
#ifndef DYNTRACE_RUNTIME_STORAGE_H_
#define DYNTRACE_RUNTIME_STORAGE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "runtime/device.h"

namespace dt {

class Storage {
 public:
  // Allocates `nbytes` on `device`: the caching host allocator, the caching CUDA allocator, or
  // nothing for meta. Running out of memory throws std::bad_alloc, like operator new.
  static std::shared_ptr<Storage> Allocate(size_t nbytes, Device device);
  // Wraps memory owned elsewhere; `release` runs when the last view is gone.
  static std::shared_ptr<Storage> Wrap(void* data, size_t nbytes, Device device,
                                       std::function<void()> release);

  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage();

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

  // Counts in-place writes, shared by every view of the storage: autograd compares it with the
  // count a saved tensor had, to refuse a backward pass over values that were overwritten.
  uint64_t version() const { return version_; }
  void BumpVersion() { ++version_; }

 private:
  Storage(void* data, size_t nbytes, Device device, std::function<void()> release)
      : data_(data), nbytes_(nbytes), device_(device), release_(std::move(release)) {}

  void* data_;
  size_t nbytes_;
  Device device_;
  std::function<void()> release_;
  uint64_t version_ = 0;
};

}  // namespace dt

#endif  // DYNTRACE_RUNTIME_STORAGE_H_
