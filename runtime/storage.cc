#include "runtime/storage.h"

#include "runtime/allocator.h"

namespace dt {

std::shared_ptr<Storage> Storage::Allocate(size_t nbytes, Device device) {
  if (device.is_meta()) return std::shared_ptr<Storage>(new Storage(nullptr, nbytes, device, {}));
  // CUDA storage is allocated by the CUDA runtime module, which wraps its blocks with Wrap().
  void* data = HostAllocator::Get().Allocate(nbytes);
  return std::shared_ptr<Storage>(new Storage(
      data, nbytes, device, [data, nbytes] { HostAllocator::Get().Free(data, nbytes); }));
}

std::shared_ptr<Storage> Storage::Wrap(void* data, size_t nbytes, Device device,
                                       std::function<void()> release) {
  return std::shared_ptr<Storage>(new Storage(data, nbytes, device, std::move(release)));
}

Storage::~Storage() {
  if (release_) release_();
}

}  // namespace dt
