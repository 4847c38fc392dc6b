#include "runtime/storage.h"

#include <new>

#include "runtime/allocator.h"
#include "runtime/cuda_allocator.h"

namespace dt {

std::shared_ptr<Storage> Storage::Allocate(size_t nbytes, Device device) {
  if (device.is_meta()) return std::shared_ptr<Storage>(new Storage(nullptr, nbytes, device, {}));
  if (device.type == DeviceType::kCuda) {
    // A CUDA tensor exists only once its device was set up, so the one failure left is running
    // out of memory, reported like the host allocator's (MemoryError at the Python boundary).
    const int index = device.index;
    absl::StatusOr<CUdeviceptr> block = CudaAllocator::Get().Allocate(index, nbytes);
    if (!block.ok()) throw std::bad_alloc();
    const CUdeviceptr ptr = *block;
    return std::shared_ptr<Storage>(new Storage(reinterpret_cast<void*>(ptr), nbytes, device, [index, ptr, nbytes] {
      CudaAllocator::Get().Free(index, ptr, nbytes);
    }));
  }
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
